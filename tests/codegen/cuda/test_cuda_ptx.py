"""The CUDA kernels of the (5, 10450) splitter module, as ``netgen build
--target cuda`` compiles them (numba.cuda.compile_ptx with NVVM from pip to
PTX for compute 7.5, assembled by ptxas to a cubin per arch, in separate
compile processes, no GPU): the session's one CUDA build (``cuda_cli_build``
in tests/conftest.py, run with the system toolkit hidden) wrote them beside
the module. What was compiled is reported in the run's warnings summary, so
it is visible in the CI log.

The launcher fills Numba's kernel ABI itself (no dispatcher): the parameter
list it builds from torch tensors must match each kernel's PTX entry, one
64-bit word per array field and one byte per flag."""

from __future__ import annotations

import json
import re
import subprocess
import warnings
from pathlib import Path

import pytest
import torch

from netgen.codegen.cache import load

# with the rank-group kernels (_grp_*): k n floats at (5, 10450) pass the
# shared memory of GPUs smaller than Hopper (kernels.default_groups)
KERNELS = {"_fwd", "_bwd", "_fwd_col", "_bwd_col", "_vals_bwd", "_wp_fwd", "_wp_bwd", "_pv_fwd", "_pv_bwd", "_grp_fwd",
           "_grp_bwd"}
# at n = 10450 every kernel's smallest wire-array use (one or two rows of n
# floats, at most 167 KB in float64) fits Hopper's 227 KB of dynamic shared
# memory: both variants
VARIANTS = ("_s", "_g")


@pytest.mark.slow
def test_splitter_10450_kernels_compile_for_sm90(cuda_cli_build):
    from netgen.codegen.cuda.compile import _ptxas
    from netgen.codegen.cuda import cubin as rt

    assert cuda_cli_build["returncode"] == 0, cuda_cli_build["stderr"][-3000:]
    if "compile check partly skipped" in cuda_cli_build["stderr"]:  # no assembler: PTX compiled, no cubin
        pytest.skip("no assembler for the cubins: " + cuda_cli_build["stderr"][-500:])
    path = Path(cuda_cli_build["module"])
    folder, tag, _ = rt.cubin_source(str(path))
    metas = [json.loads(p.read_text()) for p in Path(folder).glob(f"*.{tag}.json")]
    names = [m["kernel"] for m in metas]
    assert sorted(names) == sorted(f"{k}{s}{v}" for k in KERNELS for s in ("_f32", "_f64") for v in VARIANTS)
    kernels = []
    for meta in metas:
        name = meta["kernel"]
        ptx_path = Path(folder) / meta["ptx"]
        ptx = ptx_path.read_text()
        assert ".target sm_75" in ptx and ".entry" in ptx
        cubin_path = Path(folder) / rt.cubin_names(name, tag, "sm_90")
        cubin = cubin_path.read_bytes()
        assert cubin[:4] == b"\x7fELF" and len(cubin) > 1000
        # shared variants keep their wire arrays in dynamic shared memory
        assert (".extern .shared" in ptx) == name.endswith("_s"), name
        check_float_mode(name, ptx)
        # launch bounds where a block's P state takes an SM (kernels.launch_bounds): the rows kernels' float32
        # shared variants (209 KB at (5, 10450)); none elsewhere (the column's two blocks per SM, the groups)
        bounded = name in ("_fwd_f32_s", "_bwd_f32_s")
        assert (".maxntid 1024, 1, 1" in ptx and ".minnctapersm 1" in ptx) == bounded, name
        kernels.append({"name": name, "ptx": str(ptx_path), "ptx_bytes": len(ptx), "cubin_bytes": len(cubin),
                        "info": ""})
    # ptxas's register report for sm_90 (the build keeps the cubins, not the report): the column kernels
    ptxas = _ptxas()
    for k in kernels:
        if ptxas and k["name"] in ("_fwd_col_f32_s", "_bwd_col_f32_s"):
            r = subprocess.run([ptxas, "-arch=sm_90", "-v", "-o", "/dev/null", k["ptx"]], capture_output=True,
                               text=True, timeout=300)
            assert r.returncode == 0, r.stderr
            k["info"] = " ".join(line.split("ptxas info    : ", 1)[-1].strip()
                                 for line in r.stderr.splitlines() if "Used" in line)
    check_launch_abi(load(path), kernels)
    check_column_registers(kernels)
    lines = [f"{k['name']}: PTX {k['ptx_bytes']} B, sm_90 cubin {k['cubin_bytes']} B  {k['info']}" for k in kernels]
    warnings.warn(
        f"[report, not a problem] netgen build --n 10450 --k 5 --target cuda: {len(names)} CUDA kernels "
        f"(PTX for compute 7.5, cubins for sm_80 ... sm_120):\n    " + "\n    ".join(sorted(lines)),
        stacklevel=1,
    )


def check_float_mode(name: str, ptx: str) -> None:
    """float32 kernels are compiled with fast math (approximate division,
    flush-to-zero), float64 kernels with IEEE division; the kernels that
    flag bad rows keep their comparisons against infinity (fast math must
    not fold the isfinite tests away). The lane kernels (W P, P V) and the
    lane-group kernels of P read p and divide nowhere: their float32
    arithmetic flushes to zero, their float64 is exact (nothing
    approximate)."""
    if name.startswith(("_wp_", "_pv_", "_grp_")):
        assert not re.search(r"\bdiv\.\S*f(32|64)\b", ptx) and not re.search(r"\.approx\.", ptx), name
        assert bool(re.search(r"\.ftz\.f32", ptx)) == ("_f32_" in name), name
        return
    if "_f32_" in name:
        assert re.search(r"\bdiv\.(approx|full)\.ftz\.f32", ptx) and not re.search(r"\bdiv\.rn\.f32", ptx), name
    else:
        assert re.search(r"\b(div|rcp)\.rn\.f64", ptx) and not re.search(r"\bdiv\.(approx|full)\.", ptx), name
    if name.startswith(("_fwd_f", "_fwd_col_f")):
        inf = "0f7F800000" if "_f32_" in name else "0d7FF0000000000"
        assert len(re.findall(r"setp\.\w+(\.ftz)?\.f\d\d\s+%p\d+, %f[d]?\d+, " + inf, ptx)) >= 2, name


def check_column_registers(kernels) -> None:
    """The float32 shared-memory column kernels fit 32 registers: two blocks
    of 2 n floats share an SM at n = 10450, so 32 registers is what lets the
    launcher run them with 1024 threads (65,536 registers / 2 blocks / 1024;
    docs/cuda-rounds4-5.md, Round 5). ptxas chooses the count (no register
    bound is passed), so this guards against a change elsewhere in the
    kernel pushing it past 32."""
    for k in kernels:
        if k["name"] in ("_fwd_col_f32_s", "_bwd_col_f32_s") and k["info"]:
            regs = int(re.search(r"Used (\d+) registers", k["info"]).group(1))
            assert regs <= 32, (k["name"], regs, "more than 32 registers: the launcher drops to 800 threads")


def _ptx_params(ptx: str) -> list[str]:
    entry = re.search(r"\.entry\s+\S+\s*\((.*?)\)", ptx, re.S)
    return re.findall(r"\.param\s+\.(\w+)", entry.group(1))


def check_launch_abi(mod, kernels):
    """The launcher's parameter list (``mod._abi`` of example arguments of
    each kernel's kinds) has the widths of the PTX entry's parameters."""
    examples = {
        "f1": torch.empty(3), "f2": torch.empty(2, 3), "w1": torch.empty(5, dtype=torch.uint16),
        "u1": torch.empty(4, dtype=torch.uint32), "i1": torch.empty(5, dtype=torch.int64),
        "b1": torch.empty(2, dtype=torch.int32), "bool": True,
    }
    width = lambda v: "u8" if isinstance(v, bool) else "u64"  # noqa: E731
    for k in kernels:
        family = k["name"][1:-6]  # _fwd_col_f32_s -> fwd_col
        args = [examples[kind] for kind in mod.KERNEL_ARGS[family]]
        packed = mod._abi(args)
        assert [width(v) for v in packed] == _ptx_params(Path(k["ptx"]).read_text()), k["name"]
    # an array is meminfo, parent, size, itemsize, data, shape, strides (bytes)
    f3 = torch.empty(2, 3, 4)
    assert mod._abi([f3, False]) == [0, 0, 24, 4, f3.data_ptr(), 2, 3, 4, 48, 16, 4, False]
