"""Certification on by default under a cap (no GPU): the race runs when what certifying costs is
at most max(20% of the sweep's GPU seconds, certify.cap_s), else one line says what it would
cost and which setting allows it; every group's summary line says certified, tie (the tied set)
or why it was not raced."""

from __future__ import annotations

import pandas as pd
import pytest

from sweep.decide import certify, race_cost, select
from sweep.decide.collect import Collected
from sweep.node import race
from sweep.records import Best, Candidate, Choice
from sweep.records.evidence import Certification
from sweep.space import target
from sweep.stats import Entrant


@pytest.fixture
def write(tmp_path):
    """write(certify_yaml) -> a loaded space of two groups (P: 4 values, Q: one) with that certify section."""
    def _write(certify_section: str = "") -> target.Space:
        (tmp_path / "Makefile").write_text("all:\n")
        path = tmp_path / "s.yaml"
        path.write_text(f"name: s\ntarget: {{name: t, dir: {tmp_path}, profile: [x]}}\n"
                        "parameters:\n  P: {tag: P, values: [1, 2, 3, 4], default: 1, kernels: [k]}\n"
                        "  Q: {tag: Q, values: [1], default: 1, kernels: [q]}\n" + certify_section)
        return target.load(path)
    return _write


def configs(per_run_s: float, jobs: int = 4, verify_s: float = 0.0) -> pd.DataFrame:
    tags = [f"P{i + 1}" for i in range(jobs)]
    return pd.DataFrame({"tag": tags, "role": "sweep", "status": "ok", "profile_s": per_run_s, "verify_s": verify_s,
                         "runs": 1, "backend": "cupti", "noise_source": "runs", "config_hash": tags})


def plan_for(space, cf: pd.DataFrame) -> race.RacePlan:
    """A race of P's three fastest (a run of each a round, not lockstep) at the space's cap."""
    entrants = tuple(Entrant(t, 32 * (i + 1), i == 0) for i, t in enumerate(["P1", "P2", "P3"]))
    lane = race.Lane(("P",), ("k",), entrants, {e.id: {"P": i + 1} for i, e in enumerate(entrants)})
    return race.RacePlan((lane,), {e.id: f"/jobs/{e.id}" for e in entrants}, {}, certify.budget(space, cf), 30)


@pytest.mark.parametrize("section, gpu_s, cap", [
    ("", 100.0, 60.0),                                  # 20% of 100 s is under the 60 s default cap
    ("", 1000.0, 200.0),                                # 20% of 1000 s is over it
    ("certify: {cap_s: 10}\n", 100.0, 20.0),
    ("certify: {budget_s: 25}\n", 1000.0, 25.0),        # the older setting: the cap exactly
])
def test_the_cap_is_the_larger_of_a_fifth_of_the_sweeps_gpu_seconds_and_cap_s(write, section, gpu_s, cap):
    assert certify.budget(write(section), configs(gpu_s / 4)) == cap


def test_a_race_is_planned_by_default_when_its_cost_is_under_the_cap_and_not_above(write):
    space = write()
    under = configs(2.0)                                # 9 rounds x 3 runs x 2 s = 54 s, under 60 s
    p = plan_for(space, under)
    cost = race_cost.cost_s(p, Collected(under, pd.DataFrame(), None), 3)
    assert cost == pytest.approx(54.0) and certify.over_cap(space, p, cost) == ""
    over = configs(2.5)                                 # 9 x 3 x 2.5 = 67.5 s: over it
    p = plan_for(space, over)
    cost = race_cost.cost_s(p, Collected(over, pd.DataFrame(), None), 3)
    assert certify.over_cap(space, p, cost) == "would cost ~68 s, over the 60 s cap; certify: {cap_s: 75} allows it"
    space = write("certify: {budget_s: 30}\n")
    assert certify.over_cap(space, plan_for(space, over), cost).endswith("certify: {budget_s: 75} allows it")


def choice(macros=("P",), cert: Certification | None = None, not_raced: str = "", candidates: int = 2) -> Choice:
    pick = Candidate({m: 2 for m in macros}, "P2", 10.0, 0.1, 64, samples=5)
    cands = tuple(Candidate({m: i + 1 for m in macros}, f"P{i + 1}", 10.0 + i, 0.1, 32 * (i + 1), samples=5)
                  for i in range(candidates))
    return Choice(macros, ("k",), pick.values, pick, None, None, None, False, candidates=cands, certification=cert,
                  not_raced=not_raced)


def line_of(c: Choice) -> str:
    (line,) = select.summary_lines(Best("s", (c,), dict(c.values)))
    return line


def test_each_groups_summary_says_certified_tie_with_its_tied_set_or_why_not_raced():
    won = Certification("certified", {"P": 2}, "", rounds=9, stopped="decided")
    assert line_of(choice(cert=won)).endswith("  certified (9 rounds)")
    tie = Certification("tie", {"P": 1}, "default in tied set", tied=({"P": 1}, {"P": 2}), rounds=30, stopped="max_rounds")
    assert line_of(choice(cert=tie)).endswith("  tie: 1 | 2 (picked by rule: default in tied set)")
    shown = Certification("tie", {"P": 1}, "default in tied set", tied=({"P": 1}, {"P": 2}), rounds=12,
                          stopped="equivalent")
    assert line_of(choice(cert=shown)).endswith("  tie within 1%: 1 | 2 (picked by rule: default in tied set)")
    why = "would cost ~159 s, over the 60 s cap; certify: {cap_s: 175} allows it"
    assert line_of(choice(not_raced=why)).endswith(f"  not raced: {why}")


def test_unraced_names_a_single_candidate_apart_from_the_sweeps_reason_and_leaves_raced_groups_alone(write):
    space = write()
    won = Certification("certified", {"P": 2}, "", rounds=9, stopped="decided")
    best = Best("s", (choice(("P",)), choice(("Q",), candidates=1)), {"P": 2, "Q": 1})
    c = Collected(configs(1.0), pd.DataFrame(), None)
    out = certify.unraced(space, best, c, {}, "would cost ~99 s")
    assert [ch.not_raced for ch in out.choices] == ["would cost ~99 s", certify.NO_CANDIDATES]
    out = certify.unraced(space, best, c, {("P",): won}, "")
    assert [ch.not_raced for ch in out.choices] == ["", certify.NO_CANDIDATES]
