"""Every construction, n = 1..40 and every k, is proved by netgen's own
verifier (docs/design.md section 5): sorters and all selection networks, after
the build pipeline's passes too."""

import pytest

from netgen.compiler import compile_network
from netgen.construct import KINDS, build
from netgen.verify import verify

NS = range(1, 41)
#: odd-even transposition from 33 wires proves slowly (~3-9 s per n): slow
SLOW = {("transposition", n) for n in range(33, 41)}


@pytest.mark.parametrize("kind,n", [pytest.param(kind, n, marks=pytest.mark.slow) if (kind, n) in SLOW else (kind, n)
                                    for kind in KINDS for n in NS])
def test_every_k_is_proved(kind, n):
    for k in range(1, n + 1):
        report = verify(build(kind, n, k))
        assert report.status == "proved", (kind, n, k, str(report))


@pytest.mark.parametrize("n", [7, 16, 23, 33, 40])
@pytest.mark.parametrize("kind", KINDS)
def test_the_build_pipeline_keeps_networks_proved(kind, n):
    for k in sorted({1, 2, n // 2 or 1, n - 1 or 1, n}):
        compiled = compile_network(build(kind, n, k))
        assert compiled.report.status == "proved", (kind, n, k, str(compiled.report))
        assert compiled.network.size <= build(kind, n, k).size
