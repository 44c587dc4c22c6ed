#!/usr/bin/env bash
# The one GPU check of issue 29: fits a 4-minute run on a GPU machine. python3 only; the modules and their
# cubins built beforehand (nothing compiles on the GPU machine); each step time-boxed; ends with a table of
# every figure of issue 29 (and a line per operator of issue 31) beside its target, and runs every GPU test.
#
#   bash benchmarks/gpu_check.sh --prepare   # on a CPU machine with ptxas: modules + cubins, $GPU_MODULES.tgz
#   bash benchmarks/gpu_check.sh             # on the GPU machine (carry $GPU_MODULES.tgz); logs under $OUT
#   bash benchmarks/gpu_check.sh --dry-run   # anywhere: the plan and the table's rows and targets, no GPU used
#   bash benchmarks/gpu_check.sh --rehearse  # a CPU machine: every measuring step at small sizes (checks the
#                                            # script before a GPU session spends minutes on it; measures no GPU)
#   bash benchmarks/gpu_check.sh --profile   # on the GPU machine, a second call: ncu's counters of the rows and
#                                            # column kernels beside the model (benchmarks/gpu_profile.py)
#
# Run from the repository root; PYTHONPATH=. where netgen is not installed. Keep the table's format stable:
# the same command runs on the next GPU available. Budget (s): GPU tests 100, host cost 30, the table 100.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="${PYTHONPATH:-.}"
out="${OUT:-gpu-out}"
mods="${GPU_MODULES:-gpu-modules}"
mkdir -p "$out"

if [ "${1:-}" = "--prepare" ]; then
  # netgen's build step compiles PTX (compute 7.5) and cubins (ptxas: the nvidia-cuda-nvcc wheel) for 10
  # modules: 4.5 minutes on a shared 2-core machine. Cubins for sm_90 only (the H100 / H200 lent here;
  # NETGEN_CUDA_ARCHS=sm_80,... for another card, the PTX serves the rest): the folder must fit the device
  # tool's 64 MiB carry (all six archs made it 111 MB)
  export NETGEN_CUDA_ARCHS="${NETGEN_CUDA_ARCHS:-sm_90}"
  python3 benchmarks/gpu_check.py --prepare --modules "$mods" || exit $?
  # the model's estimates per kernel, for gpu_profile.py's table (--profile); ~1 minute
  python3 research/gpu_model/gpu_model.py --B 500 4096 --old none --c 1.60 --json "$mods/model.json" \
    > "$out/gpu_model.txt" 2>&1 || echo "gpu_check.sh: no model.json (see $out/gpu_model.txt): --profile shows '-'"
  # carried as one archive (the PTX text is 70% of the folder and compresses ~10x: 55 MiB -> 7 MiB)
  tar -czf "$mods.tgz" -C "$mods" . || exit $?
  size=$(du -sm "$mods.tgz" | cut -f1)
  echo "gpu_check.sh: carry $mods.tgz (${size} MiB; cubins for $NETGEN_CUDA_ARCHS, PTX for the rest)"
  [ "$size" -le 48 ] || { echo "gpu_check.sh: $mods.tgz is near the 64 MiB carry: build fewer archs" >&2; exit 2; }
  exit 0
fi
if [ "${1:-}" = "--profile" ]; then
  # the second GPU call: the rows and column kernels' hardware counters (ncu) beside the model, one table
  [ -f "$mods/topk5.py" ] || [ ! -f "$mods.tgz" ] || { mkdir -p "$mods" && tar -xzf "$mods.tgz" -C "$mods"; }
  exec timeout 200 python3 benchmarks/gpu_profile.py --modules "$mods" --out "$out" --timeout 170
fi
if [ "${1:-}" = "--rehearse" ]; then
  exec python3 benchmarks/gpu_check.py --rehearse
fi
if [ "${1:-}" = "--dry-run" ]; then
  exec python3 benchmarks/gpu_check.py --dry-run --modules "$mods" --tests-summary "$out/gpu_tests.txt" \
    --host-line "$out/gpu_host.txt"
fi

start=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/gpu.txt"
python3 -c "import torch, numpy, numba, numba_cuda; print('torch', torch.__version__, 'numpy', numpy.__version__, 'numba', numba.__version__, 'numba-cuda', numba_cuda.__version__)" 2>&1 | tee -a "$out/gpu.txt"
[ -f "$mods/topk5.py" ] || [ ! -f "$mods.tgz" ] || { mkdir -p "$mods" && tar -xzf "$mods.tgz" -C "$mods"; }
[ -f "$mods/topk5.py" ] || echo "gpu_check.sh: no prebuilt modules in $mods (run --prepare on a CPU machine and carry $mods.tgz)" | tee -a "$out/gpu.txt"
# every GPU test (marked gpu), their modules from $mods/tests (built by --prepare: no ptxas here)
NETGEN_GPU_MODULES="$mods/tests" timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider \
  tests/codegen/cuda/test_gpu.py tests/codegen/torch/test_torch_target.py 2>&1 | tee "$out/gpu_tests.txt"
# the host cost without kernels, on this machine's CPU (the same line as on a CPU machine)
timeout 30 python3 benchmarks/gpu_host.py --reps 5 --calls 100 2>&1 | tail -1 | tee "$out/gpu_host.txt"
left=$(( 235 - (SECONDS - start) ))
[ "$left" -lt 40 ] && left=40
timeout "$left" python3 benchmarks/gpu_check.py --modules "$mods" --reps 10 --budget $(( left - 10 )) \
  --tests-summary "$out/gpu_tests.txt" --host-line "$out/gpu_host.txt" 2>&1 | tee "$out/gpu_check.txt"
echo "gpu_check.sh: $(( SECONDS - start )) s"
