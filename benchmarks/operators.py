"""The operators (netgen.ops) against the libraries users come from:
forward + backward times side by side in one process, peak memory each in
a fresh process.

Cases (float32, torch 1 thread, OMP_NUM_THREADS=1):

* ``rank1024``:  soft_rank, n = 1,024, B = 64, vs torchsort ``soft_rank`` (l2)
* ``rank65536``: soft_rank, n = 65,536, B = 16, vs torchsort ``soft_rank`` (l2)
* ``mask10450``: topk_mask, (k = 5, n = 10,450), B = 64, vs LapSum's CPU ``soft_topk``
* ``sort1024``:  soft_sort values, n = 1,024, B = 64, vs torchsort ``soft_sort``
* ``rank1024b1``, ``rank16384b1``, ``sort1024b1``, ``sort16384b1`` (not run
  unless named): soft_rank and soft_sort at B = 1 (one row: the Spearman
  loss of torchsort's README), n = 1,024 and 16,384: the 1-row copies of the
  numba lane kernels (netgen/codegen/numba/narrow.py)
* ``rank1M``, ``sort1M`` (not run unless named): soft_rank and soft_sort at
  n = 2^20, B = 1 (issue 31 item 5), with ``max_size=`` the network's
  estimate (the sorter has 100.7 million comparators); the first call
  (build or cache read, compile) is printed per method, and each memory
  process its whole peak RSS too (``process peak``)

Each case also runs netgen's route before the operators, for reference: a
generated layer (``AutoLayer``, target auto: numba here) returns P and the
ranks are ``r @ P``, the mask ``P.sum(-2)``, the sorted values its values
(P is computed too). It is skipped where P does not fit (n = 65,536:
16 x 65,536^2 floats), and the memory it would need is printed instead.

``--backend`` picks the operators' backends (``target=``; several run side
by side): ``reference`` (the reference executor's lane sweeps under
autograd: correct, O(size) memory, slow), ``auto``, and each target with
lane kernels (``torch``; ``numba``, and ``cuda`` on a GPU, once they have
them). The baselines come from
``tools/build_baselines.sh`` (``--baselines DIR``, default
``$NETGEN_BASELINES/site`` or ``/tmp/netgen-baselines/site``); a missing one
is reported and skipped.

Timing: every method of a case is called once per round, rounds
interleaved (``--reps``, medians), after one untimed warm-up call (which
builds the network and compiles what needs compiling). Memory: a fresh
process per (case, method) makes the inputs, warms up, then runs one
forward + backward and reports the peak RSS during it minus the RSS
before it (Linux /proc; the working memory of one call).

    python benchmarks/operators.py --backend reference --cases rank1024 mask10450 sort1024
    python benchmarks/operators.py --backend numba --reps 11
    python benchmarks/operators.py --backend reference torch --cases rank1024   # side by side
    python benchmarks/operators.py --backend numba numba-checkpointed --cases rank1024 --clock cpu --no-p-route

``numba-checkpointed`` (soft_rank only): the numba target with its
checkpointed lane sweeps forced, beside ``numba`` (the saved state below
256 MiB): at n = 1,024 one meets torchsort's time, the other its memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

CASES = {  # name: (operator, n, k, B, baseline)
    "rank1024": ("soft_rank", 1024, None, 64, "torchsort"),
    "rank65536": ("soft_rank", 65536, None, 16, "torchsort"),
    "mask10450": ("topk_mask", 10450, 5, 64, "lapsum"),
    "sort1024": ("soft_sort", 1024, None, 64, "torchsort"),
    "rank1024b1": ("soft_rank", 1024, None, 1, "torchsort"),
    "rank16384b1": ("soft_rank", 16384, None, 1, "torchsort"),
    "sort1024b1": ("soft_sort", 1024, None, 1, "torchsort"),
    "sort16384b1": ("soft_sort", 16384, None, 1, "torchsort"),
    "rank1M": ("soft_rank", 1 << 20, None, 1, "torchsort"),
    "sort1M": ("soft_sort", 1 << 20, None, 1, "torchsort"),
}
#: the cases run when none are named (the n = 2^20 ones take minutes)
DEFAULT_CASES = ("rank1024", "rank65536", "mask10450", "sort1024")
#: LapSum's temperature for the benchmark (time does not depend on it much)
LAPSUM_ALPHA = 0.1
P_ROUTE_LIMIT = 4 << 30  # bytes of P above which the r @ P route is not run


def baselines_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("NETGEN_BASELINES")
    return Path(env) / "site" if env else Path("/tmp/netgen-baselines/site")


#: a --backend: soft_rank on the numba target with the checkpointed lane
#: sweeps forced (what it runs past 256 MiB of saved state), beside ``numba``:
#: time against memory at one size
CHECKPOINTED = "numba-checkpointed"


def checkpointed(n: int, k, ms: int, f):
    """``f`` (a numba-target operator call) with the layer code's
    ``_CK_BYTES`` at 0 during the call, restored after (``numba`` in the
    same process keeps its own choice; the backward follows what the
    forward saved)."""
    from netgen import ops
    from netgen.ops.backends import lanes_for
    from netgen.relax.distributions import default_relaxation

    names = {}

    def call(t):
        if not names:  # the layer code's globals, looked up once
            net = ops.network_for(n, k or n, max_size=ms)
            lanes = lanes_for(net, default_relaxation(net), "numba", "cpu")
            names.update(g=type(lanes._for(t))._values.__globals__)
        g = names["g"]
        old, g["_CK_BYTES"] = g["_CK_BYTES"], 0
        try:
            return f(t)
        finally:
            g["_CK_BYTES"] = old

    return call


def methods(case: str, backends, baselines: Path, p_route: bool = True) -> dict:
    """name -> (step() running forward + backward, or a str: why skipped)."""
    op, n, k, B, base = CASES[case]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, n, generator=g)
    w = torch.randn(B, n if op != "soft_topk" else k, generator=g)  # cotangent
    out: dict = {}

    def fwd_bwd(f):
        def step():
            xr = x.detach().requires_grad_(True)
            (f(xr) * w).sum().backward()
        return step

    import netgen.ops as ops
    from netgen.network import DEFAULT_MAX_SIZE
    from netgen.ops.networks import estimate

    ms = max(DEFAULT_MAX_SIZE, estimate(n, k or n, "best"))  # the opt-in where the default budget is too small

    for backend in backends:  # (default arguments bind each backend to its own closure)
        if backend == CHECKPOINTED:  # the numba target with its lane sweeps checkpointed, whatever the size
            if op == "soft_rank":
                out[f"netgen soft_rank ({backend})"] = fwd_bwd(checkpointed(
                    n, k, ms, lambda t: ops.soft_rank(t, target="numba", max_size=ms)))
            continue
        if op == "soft_rank":
            out[f"netgen soft_rank ({backend})"] = fwd_bwd(
                lambda t, b=backend: ops.soft_rank(t, target=b, max_size=ms))
        elif op == "topk_mask":
            out[f"netgen topk_mask ({backend})"] = fwd_bwd(
                lambda t, b=backend: ops.topk_mask(t, k, target=b, max_size=ms))
        else:
            out[f"netgen soft_sort ({backend})"] = fwd_bwd(
                lambda t, b=backend: ops.soft_sort(t, target=b, max_size=ms).values)
            if backend == "numba":  # the values sweep alone, without soft_sort's torch.sort indices
                from netgen.ops.backends import lanes_for
                from netgen.relax.distributions import default_relaxation

                def values_alone(t):  # the network on the first call: not in the other methods' processes
                    net = ops.network_for(n, n, max_size=ms)
                    lanes = lanes_for(net, default_relaxation(net), "numba", "cpu")
                    return lanes.values(t, lanes.relaxation.steepness).flip(-1)

                out["netgen numba values sweep alone (no indices)"] = fwd_bwd(values_alone)

    if str(baselines) not in sys.path:
        sys.path.insert(0, str(baselines))
    if base == "torchsort":
        try:
            import torchsort
        except ImportError as e:
            out["torchsort"] = f"not available ({e}; build it with tools/build_baselines.sh)"
        else:
            f = torchsort.soft_rank if op == "soft_rank" else torchsort.soft_sort
            out[f"torchsort {f.__name__} (l2)"] = fwd_bwd(lambda t: f(t, regularization="l2"))
    else:
        try:
            from lapsum.topk import soft_topk as lapsum_topk
        except ImportError as e:
            out["LapSum soft_topk"] = f"not available ({e}; build it with tools/build_baselines.sh)"
        else:
            kk = torch.full((B, 1), float(k))
            # a fresh alpha tensor per call: their forward overwrites alpha.data
            out["LapSum soft_topk (C++ CPU)"] = fwd_bwd(
                lambda t: lapsum_topk(t, kk, torch.tensor(LAPSUM_ALPHA), dim=1, largest=True))

    p_bytes = B * (k or n) * n * 4
    label = {"soft_rank": "netgen r @ P (generated layer)", "topk_mask": "netgen P.sum(-2) (generated layer)",
             "soft_sort": "netgen layer values (P computed too)"}[op]
    if not p_route:
        pass
    elif p_bytes > P_ROUTE_LIMIT:
        out[label] = f"skipped: P alone needs {p_bytes / 2**30:,.0f} GiB ({B} x {k or n} x {n} float32)"
    else:
        try:
            from netgen.codegen.auto import AutoLayer
        except ImportError as e:  # codegen is being reorganised (issue 31 follow-up)
            out[label] = f"not available ({e})"
        else:
            from netgen.relax.distributions import default_relaxation

            net = ops.network_for(n, k or n, max_size=ms)
            layer = AutoLayer(net, default_relaxation(net), "auto")
            if op == "soft_rank":
                r = (n - torch.arange(n)).float()
                out[label] = fwd_bwd(lambda t: (r @ layer(t)[1]))
            elif op == "topk_mask":
                out[label] = fwd_bwd(lambda t: layer(t)[1].sum(-2))
            else:
                out[label] = fwd_bwd(lambda t: layer(t)[0].flip(-1))
    return out


def child(case: str, method: str, backend, baselines: Path) -> None:
    """One method in this fresh process: print its working memory (bytes)."""
    from measure import measure

    torch.set_num_threads(1)
    step = methods(case, backend, baselines)[method]
    step()  # warm-up: builds, compiles, reads caches
    for mod in list(sys.modules.values()):  # numba modules pool saved state between calls: count it in the call
        names = getattr(mod, "__dict__", {})  # not getattr(mod, ...): a module's __getattr__ may import (LapSum's)
        if names.get("TARGET") == "numba" and callable(names.get("free_buffers")):
            names["free_buffers"]()
    try:  # hand what the warm-up freed back to the OS, so the peak below counts what one call needs
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    _, mem, reset = measure(step, 1)
    # the whole process's peak, build included: VmHWM of this process image (ru_maxrss would count the
    # parent's pages this process held between fork and exec)
    peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"mem": mem, "reset": reset, "peak": peak}))


def memory_of(case, method, backend, baselines, timeout) -> tuple[int | None, str]:
    """(bytes or None, text) of one method's working memory, fresh process."""
    cmd = [sys.executable, __file__, "--child", case, method, "--backend", *backend, "--baselines", str(baselines)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    if p.returncode:
        return None, "failed: " + (p.stderr.strip().splitlines() or ["?"])[-1][:80]
    d = json.loads(p.stdout.strip().splitlines()[-1])
    return d["mem"], (f"{d['mem'] / 2**20:,.1f}" + ("" if d["reset"] else " (incl. loading)")
                      + f" (process peak {d['peak'] / 2**30:.2f} GiB)")


def main():
    from netgen.bench.networks import cpu_model

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", nargs="+", default=["reference"],
                    help="the operators' target= (default reference); several run side by side")
    ap.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES), choices=list(CASES))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--baselines", default=None)
    ap.add_argument("--no-memory", action="store_true", help="skip the fresh-process memory runs")
    ap.add_argument("--no-p-route", action="store_true",
                    help="leave out the generated layer's P route (its GB-sized calls evict the caches between the "
                         "others' calls)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall time, or this thread's CPU time (every method runs on the calling thread with "
                         "torch at 1 thread: steadier on a shared machine)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per memory process")
    ap.add_argument("--child", nargs=2, metavar=("CASE", "METHOD"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    baselines = baselines_dir(a.baselines)
    if a.child:
        return child(a.child[0], a.child[1], a.backend, baselines)
    torch.set_num_threads(1)
    from measure import interleaved

    print(f"# {cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (shared machine); "
          f"torch {torch.__version__}, 1 thread, float32; backend {', '.join(a.backend)}; medians of {a.reps} "
          f"interleaved rounds ({a.clock} time); memory: peak RSS of one call in a fresh process")
    print("| case | method | fwd+bwd ms | time vs anchor | working memory MiB | memory vs anchor |")
    print("|---|---|---|---|---|---|")
    for case in a.cases:
        op, n, k, B, base = CASES[case]
        where = f"{op} n={n}" + (f" k={k}" if k else "") + f" B={B}"
        ms = methods(case, a.backend, baselines, not a.no_p_route)
        runnable = {m: s for m, s in ms.items() if callable(s)}
        first = {}
        for m, s in runnable.items():
            t0 = time.perf_counter()
            s()  # warm-up: the first call (builds or reads the network, compiles)
            first[m] = time.perf_counter() - t0
        warm = sum(first.values())
        clock = time.thread_time if a.clock == "cpu" else time.perf_counter
        times = interleaved(runnable, a.reps, clock=clock) if runnable else {}
        anchor = next((m for m in ms if m.startswith(("torchsort", "LapSum")) and m in times), None)
        mems = {m: (None, "") if a.no_memory else memory_of(case, m, a.backend, baselines, a.timeout)
                for m in runnable}
        for m, s in ms.items():
            if not callable(s):
                print(f"| {where} | {m} | {s} | | | |", flush=True)
                continue
            ratio = f"{times[m] / times[anchor]:.2f}x" if anchor else "no anchor"
            mem, text = mems[m]
            am = mems[anchor][0] if anchor else None
            mratio = f"{mem / am:.2f}x" if mem is not None and am else ""
            print(f"| {where} | {m} | {times[m] * 1e3:,.1f} | {ratio} | {text} | {mratio} |", flush=True)
        print(f"<!-- {case}: warm-up of all methods {warm:.1f} s: "
              + ", ".join(f"{m} {t:.1f} s" for m, t in first.items()) + " -->", flush=True)


if __name__ == "__main__":
    main()
