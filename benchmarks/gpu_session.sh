#!/usr/bin/env bash
# Everything this project measures on a GPU, in one call (each step time-boxed: ~17 minutes in all; the
# GPU tests compile their modules with numba-cuda: minutes). The 4-minute check is benchmarks/gpu_check.sh.
# the GPU tests, the per-kernel table (the cuda target's kernels: rows, column, values only;
# their estimates come from research/gpu_model/gpu_model.py, run without a GPU), then the GPU benchmark table.
#   bash benchmarks/gpu_session.sh            # logs under $OUT (or ./gpu-out)
# Run from the repository root with PYTHONPATH=. where netgen is not installed.
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="${PYTHONPATH:-.}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/gpu.txt"
python3 -c "import torch, numpy, numba, numba_cuda; print('torch', torch.__version__, 'numpy', numpy.__version__, 'numba', numba.__version__, 'numba-cuda', numba_cuda.__version__)" 2>&1 | tee -a "$out/gpu.txt"
timeout 420 python3 -m pytest -m gpu -q -p no:cacheprovider tests/codegen/cuda/test_gpu.py tests/codegen/torch/test_torch_target.py 2>&1 | tee "$out/gpu_tests.txt"
timeout 300 python3 benchmarks/gpu_kernels.py --B 64 500 4096 2>&1 | tee "$out/gpu_kernels.txt"
timeout 300 python3 benchmarks/gpu_bench.py --B 64 500 4096 --n 1000 10450 --reps 20 --budget 10 2>&1 | tee "$out/gpu_bench.txt"
