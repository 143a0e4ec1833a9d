"""Races side by side (sweep.decide.race_parts): a round runs each of a race's jobs once for every
group it serves, so groups are split into at most one race a GPU only when that shortens a round
without adding more than half again the job runs; independent groups are packed balanced by jobs
a round, each part's budget its share of the jobs a round; a resumed sweep finds the parts' outcomes."""

from __future__ import annotations

from sweep.core import atomic
from sweep.decide import race_parts
from sweep.node import race
from sweep.stats.race import Entrant


def _plan(*groups: tuple[str, ...]) -> race.RacePlan:
    lanes = tuple(race.Lane((f"M{i}",), (f"k{i}",), tuple(Entrant(t, 32 * (j + 1), j == 0) for j, t in enumerate(tags)),
                            {t: {f"M{i}": j} for j, t in enumerate(tags)}) for i, tags in enumerate(groups))
    tags = sorted({t for g in groups for t in g})
    return race.RacePlan(lanes, {t: f"/jobs/{t}" for t in tags}, {t: f"h{t}" for t in tags}, 60.0, 30)


def _lanes(parts: list[race.RacePlan]) -> list[list[str]]:
    return [[lane.macros[0] for lane in p.lanes] for p in parts]


def test_groups_that_share_jobs_race_as_one_plan_on_one_gpu_however_many_gpus_there_are():
    p = _plan(("A", "B", "C"), ("A", "B", "D"), ("A", "C", "D"), ("B", "C"), ("D", "A"))   # the seed space's shape
    assert race_parts.parts(p, 2, combined=False) == [p]
    assert race_parts.parts(p, 8, combined=False) == [p]


def test_independent_groups_pack_into_one_race_a_gpu_balanced_by_jobs_a_round():
    p = _plan(("A", "B", "C"), ("D", "E"), ("F", "G"), ("H",))
    two = race_parts.parts(p, 2, combined=False)
    assert _lanes(two) == [["M0", "M3"], ["M1", "M2"]]               # 3 + 1 jobs beside 2 + 2
    assert [sorted(x.jobs) for x in two] == [["A", "B", "C", "H"], ["D", "E", "F", "G"]]
    assert all(set(x.hashes) == set(x.jobs) for x in two)
    assert _lanes(race_parts.parts(p, 4, combined=False)) == [["M0"], ["M1"], ["M2"], ["M3"]]
    assert race_parts.parts(p, 1, combined=False) == [p]
    assert race_parts.parts(p, 4, combined=True) == [p]


def test_a_group_sharing_a_job_with_another_goes_with_it_and_the_rest_race_beside_them():
    p = _plan(("A", "B"), ("C", "D"), ("B", "E"))
    assert _lanes(race_parts.parts(p, 2, combined=False)) == [["M0", "M2"], ["M1"]]


def test_two_groups_sharing_one_job_of_three_race_apart_and_sharing_both_race_together():
    apart = race_parts.parts(_plan(("A", "B"), ("A", "C")), 2, combined=False)   # 2 jobs a round, not 3; 4 runs, not 3
    assert _lanes(apart) == [["M0"], ["M1"]] and [sorted(x.jobs) for x in apart] == [["A", "B"], ["A", "C"]]
    same = _plan(("A", "B"), ("B", "A"))
    assert race_parts.parts(same, 2, combined=False) == [same]


def test_a_resumed_sweep_finds_the_outcomes_of_the_parts_its_first_run_raced(tmp_path):
    p = _plan(("A", "B"), ("C", "D"), ("E", "F"))

    def folder(x: race.RacePlan):
        return tmp_path / x.digest()

    ran = race_parts.parts(p, 2, combined=False)
    for x in ran:
        atomic.write_json(folder(x) / race.OUTCOME, {"schema": race.OUTCOME_SCHEMA, "plan_digest": x.digest()})
    found = race_parts.recorded_parts(p, folder)
    assert [x for x, _ in found] == ran
    atomic.write_json(folder(p) / race.OUTCOME, {"schema": race.OUTCOME_SCHEMA, "plan_digest": p.digest()})
    assert [x for x, _ in race_parts.recorded_parts(p, folder)] == [p]      # the whole plan's race comes first


def test_a_parts_budget_is_its_share_of_the_jobs_a_round_so_its_groups_get_the_rounds_the_one_race_gave():
    p = _plan(("A", "B", "C"), ("D", "E"), ("F", "G"), ("H",))          # 8 jobs a round, 60 s
    assert [x.budget_s for x in race_parts.parts(p, 2, combined=False)] == [30.0, 30.0]    # 4 of 8 jobs each
    apart = race_parts.parts(_plan(("A", "B"), ("A", "C")), 2, combined=False)
    assert [x.budget_s for x in apart] == [40.0, 40.0]                                      # 2 of 3 jobs each
    four = race_parts.parts(p, 4, combined=False)
    assert [x.budget_s for x in four] == [22.5, 15.0, 15.0, 15.0]       # 3, 2, 2 of 8; 1 of 8 gets an even share


def test_a_part_keeps_enough_budget_to_reach_its_own_first_decisive_look_and_never_more_than_the_whole():
    p = _plan(("A", "B", "C"), ("D", "E"), ("F", "G"), ("H",))
    start_ups = race_parts.parts(p, 4, combined=False, first_look_s=lambda part: 10.0 + 2.0 * len(part.tags()))
    assert [x.budget_s for x in start_ups] == [24.0, 21.0, 21.0, 18.0]   # 1.5 x (10 s + 2 s a job) over the shares
    assert [x.budget_s for x in race_parts.parts(p, 2, combined=False, first_look_s=lambda part: 90.0)] == [60.0, 60.0]


def test_parts_that_would_reach_their_first_decisive_look_no_sooner_than_the_whole_race_are_not_split():
    p = _plan(("A", "B", "C"), ("D", "E"), ("F", "G"), ("H",))
    start_bound = lambda plans: 0.3 * sum(len(x.tags()) for x in plans)           # the node's start-ups, one at a time
    turn_bound = lambda plans: max(len(x.tags()) for x in plans)                   # each race's turns on its own GPU
    assert race_parts.parts(p, 4, combined=False, side_by_side_s=start_bound) == [p]
    assert _lanes(race_parts.parts(p, 4, combined=False, side_by_side_s=turn_bound)) == [["M0"], ["M1"], ["M2"], ["M3"]]
    assert _lanes(race_parts.parts(p, 4, combined=False, side_by_side_s=lambda plans: None)) == \
        [["M0"], ["M1"], ["M2"], ["M3"]]                                            # no estimate: the job count decides
