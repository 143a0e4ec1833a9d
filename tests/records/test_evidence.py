"""sweep.records.evidence: how a verdict reads, and the per-workload pick record (its noise source
kept, and a record written before it had one still read)."""

from __future__ import annotations

import pytest

from sweep.records.evidence import WorkloadPick, verdict_words


@pytest.mark.parametrize("verdict, source, words", [
    ("faster", "iterations", "beyond one run's noise"),
    ("faster", "runs", "beyond noise"),
    ("faster", "race", "beyond noise"),
    ("faster", None, "beyond noise"),
    ("tie", "iterations", "within noise"),
    ("unknown", "runs", "noise unknown"),
    (None, None, "noise unknown"),
])
def test_verdict_words_say_beyond_one_runs_noise_for_evidence_from_one_runs_iterations(verdict, source, words):
    assert verdict_words(verdict, source) == words


def test_a_workload_pick_keeps_its_noise_source_and_one_without_reads_as_unknown():
    pick = WorkloadPick("decode", 5.0, {"P": 2}, "P2", 100.0, 103.0, 0.03, {"P": 1}, 0.05, "faster", 4, "iterations")
    assert WorkloadPick.from_dict(pick.to_dict()) == pick
    old = {k: v for k, v in pick.to_dict().items() if k != "noise_source"}   # a best.json from before the field
    assert WorkloadPick.from_dict(old).noise_source == "unknown"
