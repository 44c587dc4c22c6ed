import numpy as np
import pytest
from pass_oracles import brute_force_fires

from netgen.compiled import verifier_fires
from netgen.construct import construct
from netgen.network import Network
from netgen.passes import DEFAULT_PASSES, PASSES, PassRecord, optimize


def _brute(net):
    return brute_force_fires(net), "brute force"


def test_records_and_construction():
    # a dead comparator (after output 0's last use), a repeated one, and a late one
    net = Network.from_layers(3, [[(0, 1)], [(0, 1)], [(1, 2)]], outputs=[0], construction={"kind": "hand"})
    out, recs = optimize(net, fires=_brute)
    assert [r.name for r in recs] == ["prune", "clean", "schedule"]
    assert all(isinstance(r, PassRecord) and r.applied for r in recs)
    assert (recs[0].size_before, recs[0].size_after) == (3, 2)
    assert (recs[1].size_before, recs[1].size_after) == (2, 1)
    assert "removed 1 never-swapping comparator" in recs[1].note
    assert out.comparators.tolist() == [[0, 1]]
    assert out.construction == {"kind": "hand", "passes": ["prune", "clean", "schedule"]}
    assert recs[0].seconds >= 0 and "size 3 -> 2" in str(recs[0])
    assert recs[2].to_dict()["depth_after"] == 1


def test_clean_skipped_when_not_analyzable():
    net = construct("oddeven", 10, 3)
    out, recs = optimize(net, fires=lambda n: (None, "not analyzable (test)"))
    assert recs[1].name == "clean" and not recs[1].applied
    assert recs[1].note == "skipped, not analyzable (test)"
    assert recs[1].size_before == recs[1].size_after
    assert out.construction["passes"] == ["prune", "schedule"]


def test_subset_and_order_of_passes():
    net = construct("splitter", 16, 5)
    out, recs = optimize(net, passes=("schedule",))
    assert [r.name for r in recs] == ["schedule"] and out.construction["passes"] == ["schedule"]
    out2, _ = optimize(out, passes=("prune",))
    assert out2.construction["passes"] == ["schedule", "prune"]
    with pytest.raises(ValueError, match="unknown pass"):
        optimize(net, passes=("prune", "fold"))


def test_cleaned_small_networks_still_correct():
    for kind, n, k in [("splitter", 14, 4), ("bitonic", 13, 5), ("transposition", 10, 3)]:
        net, _ = optimize(construct(kind, n, k), fires=_brute)
        x = np.random.default_rng(n).standard_normal((200, n))
        assert np.array_equal(net.select(x), -np.sort(-x, axis=1)[:, :k])


def test_verifier_analysis_skips_wide_sorters_quickly():
    out, recs = optimize(construct("oddeven", 100), fires=verifier_fires)
    assert not recs[1].applied and "sorter with n = 100" in recs[1].note, recs[1].note
    assert recs[1].skipped.startswith("not analyzable") and recs[1].fires_from == ""


def test_verifier_analysis_cleans_sorters_up_to_64_wires():
    out, recs = optimize(construct("oddeven", 40), fires=verifier_fires)
    assert recs[1].applied and "reachable states" in recs[1].note, recs[1].note
    assert recs[1].fires_from.startswith("reachable states") and recs[1].skipped == ""


def test_without_an_analysis_the_cleanup_says_so():
    net = construct("oddeven", 12, 3)
    out, recs = optimize(net)
    assert [r.applied for r in recs] == [True, False, True]
    assert "no firing analysis given" in recs[1].note
    assert out.construction["passes"] == ["prune", "schedule"]


def test_records_carry_fields_and_render_the_note_from_them():
    net = Network.from_layers(3, [[(0, 1)], [(0, 1)], [(1, 2)]], outputs=[0])
    _, recs = optimize(net, fires=_brute)
    clean = recs[1]
    assert (clean.removed, clean.fires_from, clean.skipped) == (1, "brute force", "")
    assert clean.note == "removed 1 never-swapping comparator (fires from brute force)"
    d = clean.to_dict()
    assert (d["removed"], d["fires_from"], d["applied"], d["note"]) == (1, "brute force", True, clean.note)
    # a record rebuilt from its fields says the same: nothing lives only in the text
    again = PassRecord(**{k: d[k] for k in ("name", "size_before", "depth_before", "size_after", "depth_after",
                                             "seconds", "skipped", "fires_from")})
    assert again.note == clean.note and again.removed == 1
    assert recs[0].note == "" and recs[0].removed == 1


def test_the_registry_drives_optimize(monkeypatch):
    assert DEFAULT_PASSES == ("prune", "clean", "schedule") == tuple(PASSES)
    assert all(p.name == name and p.summary for name, p in PASSES.items())
    # a pass added to the registry runs without touching optimize
    from netgen.passes import pipeline

    calls = []

    def reverse(net, fires):
        calls.append(net.size)
        return pipeline.Outcome(net.with_(outputs=net.outputs[::-1]))

    monkeypatch.setitem(pipeline.PASSES, "reverse", pipeline.Pass("reverse", "test pass", reverse))
    net = construct("oddeven", 8, 3)
    out, recs = optimize(net, passes=("reverse",))
    assert calls == [net.size] and out.outputs == net.outputs[::-1] and recs[0].name == "reverse"
    assert out.construction["passes"] == ["reverse"]


def test_log_receives_each_record_as_it_runs():
    seen = []
    _, recs = optimize(construct("oddeven", 8, 3), fires=_brute, log=seen.append)
    assert seen == recs


def test_splitter_5_10450_with_the_verifier():
    """docs/design.md section 4: cleanup gives the paper's construction 25 layers
    and 31,359 comparators; the splitter-tail network that construct() now
    returns (issue 12) ends with 23 layers and 31,356 comparators."""
    pytest.importorskip("netgen.verify.reachable")
    from netgen.construct.splitter import splitter

    out, recs = optimize(splitter(10450, 5), fires=verifier_fires)
    assert recs[1].applied, recs[1].note
    assert (out.depth, out.size) == (25, 31_359)
    out, recs = optimize(construct("splitter", 10450, 5), fires=verifier_fires)
    assert recs[1].applied, recs[1].note
    assert (out.depth, out.size) == (23, 31_356)
