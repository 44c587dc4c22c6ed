"""The GPU benchmark: netgen's cuda and torch layers, every baseline,
difftopk's splitter executor and the torch.topk / cross-entropy floors, one
table (see netgen/bench/gpu.py for what is measured and how).

    python benchmarks/gpu_bench.py [--B 64 500 4096] [--n 1000 10450] [--k 5] [--reps 20]
                                   [--methods netgen-cuda-rows,softsort,...] [--compile-B 500] [--no-graphs]

Exits with status 2 and one line when there is no GPU (``--device cpu`` runs
the same table on the CPU, to check the script).
"""

from __future__ import annotations

import argparse
import sys

from netgen.bench.gpu import all_methods, gpu_problem, run_table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--B", type=int, nargs="+", default=[64, 500, 4096])
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 10450])
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--methods", default=None, help="comma-separated (default: all): " + ",".join(all_methods()))
    ap.add_argument("--compile-B", type=int, nargs="*", default=[500], help="B values that run netgen-torch-compiled")
    ap.add_argument("--no-graphs", action="store_true", help="skip the CUDA-graph replay column")
    ap.add_argument("--budget", type=float, default=30.0, help="skip a method for larger sizes past this many s/step")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = ap.parse_args()
    methods = all_methods() if args.methods is None else [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(all_methods()))
    if unknown or not methods:
        print(f"gpu_bench.py: unknown method(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(all_methods())}",
              file=sys.stderr)
        sys.exit(2)
    if args.device == "cuda" and (why := gpu_problem()):
        print(f"benchmarks/gpu_bench.py: {why}; nothing was measured (--device cpu checks the script)", file=sys.stderr)
        sys.exit(2)
    run_table(args.B, args.n, args.k, methods, reps=args.reps, device=args.device, compile_B=tuple(args.compile_B),
              graphs=not args.no_graphs, budget_s=args.budget)


if __name__ == "__main__":
    main()
