"""bench/pick_stability.py's analysis: certified and tie verdicts counted apart, and whether each
rerun's pick lies inside every other rerun's verdict (a certified pick, or a tied set)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.pick_stability import analyze, report  # noqa: E402

H100_K5 = ROOT / "tests" / "data" / "h100" / "pick_stability" / "host_heavy_k5.json"
X, Y, Z = {"T": 32}, {"T": 64}, {"T": 16}


def _rerun(name: str, pick: dict, certified: bool, tied: list[dict]) -> dict:
    return {"name": name, "groups": {"T": {"pick": pick, "certified": certified, "raced": True, "rounds": 9,
                                          "tied": tied, "rule": "default in tied set"}},
            "sweep_gpu_s": 10.0, "race_gpu_s": 1.0, "race_share": 0.1, "race_rounds": 9}


def test_the_h100_reruns_of_host_heavy_all_tie_and_their_tie_picks_and_verdicts_agree():
    runs = json.loads(H100_K5.read_text())["runs"]
    s = analyze(runs)
    assert len(runs) == 5 and s["certified_picks"] == 0 and s["certified_repeat"] is None
    assert s["tie_picks"] == 5 and s["tie_repeat"] == 1.0
    assert s["verdict_pairs"] == 20 and s["verdict_agreement"] == 1.0
    assert "tie picks (the tie rule's pick of a tied set): 5, repeat 100%" in report(s, runs)


def test_a_certified_pick_outside_another_reruns_tied_set_counts_as_a_contradiction():
    runs = [_rerun("a", X, True, [X]), _rerun("b", Y, False, [Y, Z])]
    s = analyze(runs)
    assert (s["certified_picks"], s["tie_picks"]) == (1, 1)
    assert s["verdict_pairs"] == 2 and s["verdict_agreement"] == 0.0


def test_a_certified_pick_inside_another_reruns_tied_set_agrees_with_it_and_the_tie_picks_repeat_by_mode():
    runs = [_rerun("a", X, True, [X]), _rerun("b", Y, False, [Y, X]), _rerun("c", Y, False, [Y, X]),
            _rerun("d", X, False, [X, Y])]
    s = analyze(runs)
    assert s["tie_picks"] == 3 and s["tie_repeat"] == 2 / 3
    # inside the other three verdicts: a's X 3 times, d's X 3, b's and c's Y twice each (not in a's {X})
    assert s["verdict_pairs"] == 12 and s["verdict_agreement"] == (3 + 3 + 2 + 2) / 12


H100_K5_CONCURRENT = H100_K5.with_name("host_heavy_k5_concurrent.json")


def test_the_h100_reruns_of_host_heavy_with_concurrent_race_rounds_all_certify_one_pick():
    runs = json.loads(H100_K5_CONCURRENT.read_text())["runs"]
    s = analyze(runs)
    assert len(runs) == 5 and s["certified_picks"] == 5 and s["certified_repeat"] == 1.0
    assert s["tie_picks"] == 0 and s["verdict_agreement"] == 1.0
    assert all(r["sampling"]["runs_median"] >= 5 and r["sampling"]["sources"] == {"runs": 24} for r in runs)
    assert "certified picks: 5, repeat 100% (target >= 95%)" in report(s, runs)
