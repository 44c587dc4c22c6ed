"""Host cost of the cuda target's eager calls, without a GPU (issue 29).

    python benchmarks/gpu_host.py [--n 10450] [--k 5] [--B 1] [--reps 15] [--calls 200] [--profile [N]]
                                  [--ref TREE [--rounds 3]]

Builds the (k, n) splitter network's cuda module through the public entry
points (``netgen.codegen.write_module`` into a temporary folder,
``netgen.load``), with the GPU faked as tests/codegen/cuda/_cuda_cubin_driver.py
fakes it: torch.cuda reports one device (an H100's 232,448 bytes of opt-in
shared memory), numba-cuda's ``Dispatcher.compile`` returns a stand-in
kernel (40 registers, 16 bytes of static shared memory), the driver's
``cuKernelSetAttribute`` accepts, and ``cuda.core.launch`` does nothing:
**the kernels never run**; the tensors stay on the CPU and the module's
``_require_cuda`` (a device-type test) is stubbed so it takes them. The
self-check and the cubin loader are off (``NETGEN_CUDA_SELFCHECK=0``,
``NETGEN_CUDA_CUBINS=0``): both run once per process, not per call.

What is timed is everything a user's eager call runs on the host: the
layer's checks, the custom-op dispatch, autograd (``torch.autograd.backward``
with given output gradients: no loss ops), the argument packing, the
variant and block choices, the allocations (CPU allocations here, at B = 1
by default so that their size does not count; on a GPU torch's caching
allocator serves them), and the (no-op) launch. Per path -- rows (values
and P), column, values only; forward + backward each -- the median over
``reps`` repetitions of ``calls`` calls, wall and CPU time per call.
``--profile`` runs cProfile over the rows and the column calls and prints
the N functions with the most own time.

``--ref TREE`` (a checkout of another commit, e.g. ``git archive 008c2d6 |
tar -x -C /tmp/ref``) measures before and after in one run: ``--rounds``
rounds, each a fresh process with TREE's netgen then one with this tree's
(the same harness, the same arguments), the medians side by side and their
ratio; the last line is then this tree's medians.

The last line is exactly ``host ms per fwd+bwd: rows X column Y values Z``
(medians of the process's CPU time per call, ms: on a shared machine the
wall clock counts other processes' turns too; both are printed above it). Issue 29's target: rows and column <= 0.10.
This machine's timings are noisy when it is shared: compare lines of one
run, and read the CPU model the script prints.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import time
import types

os.environ.setdefault("NETGEN_CUDA_SELFCHECK", "0")
os.environ.setdefault("NETGEN_CUDA_CUBINS", "0")
os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
os.environ.pop("NETGEN_CUDA_LAUNCH", None)

OPTIN = 232448  # an H100's opt-in shared memory per block (bytes)


def fake_gpu():
    """Fake the GPU for a generated cuda module (nothing is launched)."""
    import cuda.core
    import numba.cuda
    import numba.cuda.cudadrv.driver as drvmod
    import numba.cuda.dispatcher as dispatcher
    import torch

    class _Lib:
        def __init__(self, name):
            self.name = name

        def get_cufunc(self):
            attrs = types.SimpleNamespace(maxthreads=1024, regs=40, shared=16)
            return types.SimpleNamespace(handle=self.name, kernel=("kernel", self.name), attrs=attrs,
                                         device=types.SimpleNamespace(id=0))

        def get_cubin(self, cc=None):  # pragma: no cover - the cubin saver is off
            raise AssertionError("no cubin without a GPU")

    dispatcher.CUDADispatcher.compile = lambda self, sig: types.SimpleNamespace(_codelibrary=_Lib(
        self.py_func.__name__))
    drvmod.driver = types.SimpleNamespace(cuKernelSetAttribute=lambda attr, value, handle, dev: None)
    numba.cuda.is_available = lambda: True
    cuda.core.launch = lambda stream, config, kernel, *words: None
    cuda.core.LaunchConfig = lambda **kw: kw
    cuda.core.Stream = types.SimpleNamespace(from_handle=lambda h: ("stream", h))
    props = types.SimpleNamespace(shared_memory_per_block_optin=OPTIN, name="fake H100", major=9, minor=0)
    torch.cuda.is_available = lambda: True
    torch.cuda.get_device_properties = lambda device=None: props
    torch.cuda.get_device_capability = lambda device=None: (9, 0)
    torch.cuda.current_stream = lambda device=None: types.SimpleNamespace(device_index=0, cuda_stream=0)
    torch.cuda.is_current_stream_capturing = lambda: False
    torch.cuda.current_device = lambda: 0


def build_layer(n, k):
    """The cuda module of the (k, n) splitter network, built and imported
    through the public entry points; its Layer and the module."""
    import netgen
    from netgen.codegen import write_module
    from netgen.compiler import compile_network
    from netgen.construct import build
    from netgen.relax.distributions import default_relaxation

    net = compile_network(build("splitter", n, k)).network
    path = write_module("cuda", net, default_relaxation(net), out_dir=tempfile.mkdtemp(prefix="netgen_gpu_host_"),
                        build=False)  # the launch is stubbed: no cubins (ptxas: ~40 CPU s)
    mod = netgen.load(path)
    if not hasattr(mod, "_require_cuda"):
        sys.exit("benchmarks/gpu_host.py: the generated cuda module has no _require_cuda to let CPU tensors "
                 "through; update fake_gpu()/build_layer() for the new layout")
    mod._require_cuda = lambda x: None  # the real one: a list test and x.device.type == "cuda"
    return mod.Layer(), mod, net


def steps(layer, n, k, B):
    """{path: step()} running one eager forward + backward each."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(B, n, generator=gen, requires_grad=True)
    y = torch.randint(0, n, (B,), generator=gen)
    gv, gc = torch.randn(B, k, generator=gen), torch.randn(B, k, generator=gen)
    gP = torch.randn(B, k, n, generator=gen)

    def rows():
        v, P = layer(x)
        torch.autograd.backward((v, P), (gv, gP))

    def column():
        torch.autograd.backward(layer.column(x, y), gc)

    def values():
        torch.autograd.backward(layer.values(x), gv)

    return {"rows": rows, "column": column, "values": values}


def floor_steps(n, k, B):
    """The same calls through the least an eager autograd layer can be: one
    ``torch.autograd.Function`` whose forward and backward only allocate
    their outputs (what any launcher must do). The harness's own cost
    (``torch.autograd.backward`` with given gradients) is in it too."""
    import torch

    class Rows(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.new_empty((x.shape[0], k)), x.new_empty((x.shape[0], k, n))

        @staticmethod
        def backward(ctx, gv, gP):
            return gv.new_empty((gv.shape[0], n))

    class Column(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x.new_empty((x.shape[0], k))

        @staticmethod
        def backward(ctx, g):
            return g.new_empty((g.shape[0], n)), None

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(B, n, generator=gen, requires_grad=True)
    y = torch.randint(0, n, (B,), generator=gen)
    gv, gP = torch.randn(B, k, generator=gen), torch.randn(B, k, n, generator=gen)

    def rows():
        torch.autograd.backward(Rows.apply(x), (gv, gP))

    def column():
        torch.autograd.backward(Column.apply(x, y), gv)

    return {"rows": rows, "column": column}


def measure(step, reps, calls):
    """(wall ms, CPU ms) per call: medians over ``reps`` runs of ``calls``."""
    for _ in range(max(3, calls // 10)):
        step()
    wall, cpu = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(calls):
            step()
        wall.append((time.perf_counter() - t0) / calls * 1e3)
        cpu.append((time.process_time() - c0) / calls * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def profile(step, calls, top):
    import cProfile
    import pstats

    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        step()
    pr.disable()
    st = pstats.Stats(pr)
    total = sum(v[2] for v in st.stats.values())  # own time of every function
    rows = sorted(st.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    print(f"  {'own us/call':>11s} {'cum us/call':>11s} {'calls/call':>10s}  function")
    for (file, line, fn), (cc, nc, tt, ct, _) in rows:
        where = f"{os.path.basename(file)}:{line}" if line else file
        print(f"  {tt / calls * 1e6:11.1f} {ct / calls * 1e6:11.1f} {nc / calls:10.1f}  {fn} ({where})")
    print(f"  total own time under cProfile: {total / calls * 1e6:.0f} us per call (cProfile inflates it)")


LAST = re.compile(r"host ms per fwd\+bwd: rows (\S+) column (\S+) values (\S+)")


def compare(args, argv) -> int:
    """Before (--ref's tree) and after (this tree), alternating fresh processes."""
    import subprocess

    from netgen.bench.networks import cpu_model

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ref = os.path.abspath(args.ref)
    if not os.path.isdir(os.path.join(ref, "netgen")):
        sys.exit(f"benchmarks/gpu_host.py: --ref {args.ref!r} has no netgen/ (a checkout of the repository)")
    rest, skip = [], False
    for a in argv:  # the same arguments, less --ref/--rounds
        if skip:
            skip = False
        elif a in ("--ref", "--rounds"):
            skip = True
        elif not a.startswith(("--ref=", "--rounds=")):
            rest.append(a)
    got = {"before": [], "after": []}
    for r in range(max(1, args.rounds)):
        for label, tree in (("before", ref), ("after", here)):
            env = dict(os.environ, PYTHONPATH=tree)
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), *rest], capture_output=True, text=True,
                                  env=env, cwd=tree)
            m = LAST.search(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "")
            if proc.returncode != 0 or m is None:
                sys.exit(f"benchmarks/gpu_host.py: the {label} run failed:\n{proc.stderr[-3000:]}")
            got[label].append([float(v) for v in m.groups()])
            print(f"  round {r + 1} {label:6s} ({tree}): rows {m.group(1)} column {m.group(2)} values {m.group(3)}",
                  flush=True)
    med = {k: [statistics.median(col) for col in zip(*v)] for k, v in got.items()}
    print(f"host cost before/after, {cpu_model()}, medians of {len(got['after'])} processes each "
          "(process CPU ms per fwd+bwd):")
    for i, path in enumerate(("rows", "column", "values")):
        print(f"  {path:7s} before {med['before'][i]:.3f}  after {med['after'][i]:.3f}  "
              f"({med['before'][i] / med['after'][i]:.2f}x less)")
    b = med["before"]
    print(f"before ({args.ref}): host ms per fwd+bwd: rows {b[0]:.3f} column {b[1]:.3f} values {b[2]:.3f}")
    a = med["after"]
    print(f"host ms per fwd+bwd: rows {a[0]:.3f} column {a[1]:.3f} values {a[2]:.3f}")
    return 0


def main(argv=None) -> int:
    from netgen.bench.networks import cpu_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10450)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--profile", type=int, nargs="?", const=25, default=0, help="cProfile, the N top functions")
    ap.add_argument("--ref", default=None, help="a checkout of another commit: before/after in one run")
    ap.add_argument("--rounds", type=int, default=3, help="with --ref: alternating processes per tree")
    args = ap.parse_args(argv)
    if args.ref:
        return compare(args, argv if argv is not None else sys.argv[1:])
    fake_gpu()
    import torch

    torch.set_num_threads(1)
    layer, mod, net = build_layer(args.n, args.k)
    fns = steps(layer, args.n, args.k, args.B)
    print(f"host cost of eager calls, kernels NOT launched (fake GPU, CPU tensors, B = {args.B}); {net!r}; "
          f"{cpu_model()}, torch {torch.__version__}, Python {platform.python_version()}; medians of {args.reps} x "
          f"{args.calls} calls")
    res = {}
    for path, step in fns.items():
        res[path] = measure(step, args.reps, args.calls)
        print(f"  {path:7s} fwd+bwd: {res[path][0]:.3f} ms wall, {res[path][1]:.3f} ms CPU per call")
    for path, step in floor_steps(args.n, args.k, args.B).items():
        w, c = measure(step, args.reps, args.calls)
        print(f"  floor {path:7s} (one autograd.Function that only allocates; the same backward call): "
              f"{w:.3f} ms wall, {c:.3f} ms CPU per call")
    if args.profile:
        for path in ("rows", "column"):
            print(f"\ncProfile, {path} fwd+bwd ({args.calls} calls):")
            profile(fns[path], args.calls, args.profile)
    # the process's CPU time: on a shared machine the wall clock also counts other processes' turns
    print(f"host ms per fwd+bwd: rows {res['rows'][1]:.3f} column {res['column'][1]:.3f} values {res['values'][1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
