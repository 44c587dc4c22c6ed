"""``NETGEN_CUDA_ARCHS``: which archs a cuda build assembles cubins for
(netgen/codegen/cuda/cubins.py); no compile runs here."""

from __future__ import annotations

import pytest

from netgen.codegen.cuda.cubins import ARCHS, ENV_ARCHS, build_archs, chosen_archs


def test_all_archs_unless_told(monkeypatch):
    monkeypatch.delenv(ENV_ARCHS, raising=False)
    assert chosen_archs() == ARCHS
    assert build_archs(None) == list(ARCHS)


@pytest.mark.parametrize("value,want", [("sm_90", ("sm_90",)), (" sm_90 , sm_80,", ("sm_80", "sm_90")),
                                        ("sm_120,sm_89", ("sm_89", "sm_120"))])
def test_the_named_archs_in_arch_order(monkeypatch, value, want):
    monkeypatch.setenv(ENV_ARCHS, value)
    assert chosen_archs() == want
    assert build_archs(None) == list(want)


def test_an_arch_the_assembler_does_not_know_is_left_out(monkeypatch, tmp_path):
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho \"--gpu-name: Allowed values: 'sm_80','sm_90'\"\n")
    fake.chmod(0o755)
    monkeypatch.setenv(ENV_ARCHS, "sm_90,sm_120")
    assert build_archs(str(fake)) == ["sm_90"]
    monkeypatch.delenv(ENV_ARCHS)
    assert build_archs(str(fake)) == ["sm_80", "sm_90"]


@pytest.mark.parametrize("value", ["sm_91", "90", ",", "sm_90;sm_80"])
def test_a_name_not_in_the_list_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv(ENV_ARCHS, value)
    with pytest.raises(ValueError, match=ENV_ARCHS):
        chosen_archs()
