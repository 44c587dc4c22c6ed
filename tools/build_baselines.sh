#!/usr/bin/env bash
# Build the two CPU baselines of benchmarks/operators.py into a folder
# outside git (default /tmp/netgen-baselines; first argument or
# $NETGEN_BASELINES overrides it):
#
#   <dir>/site/torchsort/      torchsort 0.1.10 from its sdist (PyPI), CPU
#                              extension only: nvcc is hidden from PATH, so
#                              its setup.py (which probes `nvcc`) builds
#                              isotonic_cpu and no CUDA extension.
#   <dir>/site/lapsum/         the LapSum authors' Python package (gmum/LapSum,
#                              lapsum/lapsum/) with its CPU C++ extensions
#                              soft_topk_cpu and log_soft_topk_cpu compiled
#                              here exactly as their setup.py compiles them
#                              (CppExtension, link args -lm -fopenmp); the
#                              CUDA extensions are replaced by stub modules
#                              that raise on use (their wrapper imports both).
#
# Then:  PYTHONPATH=<dir>/site python benchmarks/operators.py ...
#        (from lapsum.topk import soft_topk; import torchsort)
#
# Nothing of either project is copied into this repository. LapSum's source
# comes from a local git mirror of github.com/gmum/LapSum: pass its git
# directory as $LAPSUM_GIT (default /work/.mirror/gmum+LapSum/repo) or a
# checkout as $LAPSUM_SRC. Needs g++, torch and setuptools; ~2-4 minutes on
# two cores. Prints each step and, at the end, the versions it built.
set -euo pipefail

DIR="${1:-${NETGEN_BASELINES:-/tmp/netgen-baselines}}"
LAPSUM_GIT="${LAPSUM_GIT:-/work/.mirror/gmum+LapSum/repo}"
TORCHSORT="torchsort==0.1.10"
mkdir -p "$DIR/site" "$DIR/src"
DIR="$(cd "$DIR" && pwd)"
# PATH without any directory that holds nvcc: torchsort's setup.py builds its
# CUDA extension whenever `nvcc` runs, and that fails without CUDA_HOME
NOCUDA_PATH=""
IFS=: read -r -a parts <<< "$PATH"
for p in "${parts[@]}"; do
  [ -x "$p/nvcc" ] && continue
  NOCUDA_PATH="${NOCUDA_PATH:+$NOCUDA_PATH:}$p"
done

echo "== torchsort ($TORCHSORT): sdist, CPU extension only"
( cd "$DIR/src" && PATH="$NOCUDA_PATH" python -m pip download "$TORCHSORT" --no-deps --no-binary :all: \
    --no-build-isolation -d . -q )
PATH="$NOCUDA_PATH" python -m pip install --no-deps --no-build-isolation --no-cache-dir --upgrade \
  --target "$DIR/site" "$DIR"/src/torchsort-0.1.10.tar.gz -q

echo "== LapSum (gmum/LapSum): CPU soft_topk"
rm -rf "$DIR/src/lapsum"
if [ -n "${LAPSUM_SRC:-}" ]; then
  cp -r "$LAPSUM_SRC/lapsum" "$DIR/src/lapsum"
  REV="checkout $LAPSUM_SRC"
else
  mkdir -p "$DIR/src/lapsum"
  git --git-dir="$LAPSUM_GIT" archive HEAD lapsum | tar -x -C "$DIR/src/lapsum" --strip-components=1
  REV="$(git --git-dir="$LAPSUM_GIT" rev-parse HEAD)"
fi
# their setup.py rewrites '.type()' -> '.scalar_type()' for torch >= 2.6; do the same
find "$DIR/src/lapsum/lapsum/topk" -name '*.cpp' -exec sed -i 's/\.type()/.scalar_type()/g' {} +
for stem in soft_topk log_soft_topk; do
  printf 'def __getattr__(name):\n    raise ImportError("LapSum CUDA extension not built (CPU-only build by netgen tools/build_baselines.sh)")\n' \
    > "$DIR/src/lapsum/lapsum/topk/extension/${stem}_cuda.py"
done
cat > "$DIR/src/lapsum/setup_cpu.py" <<'EOF'
# written by netgen tools/build_baselines.sh: LapSum's setup.py without its CUDA extensions
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ext = [CppExtension(name=f"lapsum.topk.extension.{s}_cpu", sources=[f"lapsum/topk/cpu/{s}.cpp"],
                    extra_link_args=["-Wl,--no-as-needed", "-lm", "-fopenmp"]) for s in ("soft_topk", "log_soft_topk")]
setup(name="lapsum", version="0.1.0", packages=["lapsum", "lapsum.topk", "lapsum.topk.extension"],
      ext_modules=ext, cmdclass={"build_ext": BuildExtension})
EOF
( cd "$DIR/src/lapsum" && PATH="$NOCUDA_PATH" python setup_cpu.py -q build_ext --inplace )
rm -rf "$DIR/site/lapsum"
cp -r "$DIR/src/lapsum/lapsum" "$DIR/site/lapsum"

echo "== check"
PYTHONPATH="$DIR/site" python - <<EOF
import torch, torchsort
from lapsum.topk import soft_topk
x = torch.randn(2, 8, dtype=torch.float64, requires_grad=True)
torchsort.soft_rank(x).sum().backward()
x.grad = None
# alpha as a tensor: their backward returns a gradient for alpha, which torch refuses for a float
# (and their forward overwrites alpha.data with -|alpha| for largest=True: pass a fresh one each call)
soft_topk(x, torch.full((2, 1), 3.0, dtype=torch.float64), torch.tensor(0.1, dtype=torch.float64), dim=-1).sum().backward()
print("torchsort", torchsort.__file__)
print("lapsum   ", soft_topk.__module__, "from gmum/LapSum $REV")
EOF
echo "built into $DIR/site; use PYTHONPATH=$DIR/site"
