"""Import cost of a cache module, three ways, side by side (issue 32):

* ``checked bytes``: what netgen does: SHA-256 of the file's bytes, then
  ``compile(data, path)`` (no .pyc read or written);
* ``timestamp pyc``: Python's default bytecode cache (mtime + size checked:
  a planted .pyc with the same stamp ran);
* ``checked-hash pyc``: PEP 552 (Python checks a SipHash of the *source*,
  not the bytecode it runs).

Prints the median of 7 per module; the machine may be shared: compare the
columns of one run. ``python benchmarks/cache_import.py``
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import py_compile
import statistics
import tempfile
import time
from pathlib import Path

from netgen.codegen import emit
from netgen.construct import build
from netgen.relax.distributions import Relaxation


def _median_ms(fn, reps=7):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(ts)


def main():
    d = Path(tempfile.mkdtemp())
    print(f"{'module':<22} {'kB':>5} {'checked bytes':>14} {'timestamp pyc':>14} {'checked-hash pyc':>17}")
    for target, n, k in (("torch", 1024, 8), ("numba", 1024, 8), ("numba", 10450, 5), ("cuda", 1024, 8)):
        src = emit(target, build("splitter", n, k), Relaxation("logistic", 3.0))
        p = d / f"m_{target}_{n}.py"
        p.write_text(src)

        def checked():
            data = p.read_bytes()
            hashlib.sha256(data).hexdigest()
            compile(data, str(p), "exec", dont_inherit=True)

        row = [_median_ms(checked)]
        for mode in (py_compile.PycInvalidationMode.TIMESTAMP, py_compile.PycInvalidationMode.CHECKED_HASH):
            pyc = importlib.util.cache_from_source(str(p))
            py_compile.compile(str(p), cfile=pyc, invalidation_mode=mode, doraise=True)
            row.append(_median_ms(lambda: importlib.machinery.SourceFileLoader("m", str(p)).get_code("m")))
            os.unlink(pyc)
        print(f"{target + f' n={n} k={k}':<22} {len(src) / 1e3:>5.0f} {row[0]:>11.2f} ms {row[1]:>11.2f} ms "
              f"{row[2]:>14.2f} ms")


if __name__ == "__main__":
    main()
