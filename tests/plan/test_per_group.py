"""sweep.plan.per_group: a learning search per parameter group, each build the next point of each."""

from __future__ import annotations

from sweep.plan.learning import Dim
from sweep.plan.per_group import PerGroupSearch

GROUPS = [("a",), ("b",)]
DIMS = [Dim("a", (1, 2, 3, 4, 5, 6)), Dim("b", (1, 2, 3, 4))]
LEGAL = [[{"a": v} for v in range(1, 7)], [{"b": v} for v in range(1, 5)]]


def times(p: dict) -> dict:
    return {("a",): 1.0 + abs(p["a"] - 3), ("b",): float(p["b"])}


def search(**kw) -> PerGroupSearch:
    return PerGroupSearch(GROUPS, DIMS, LEGAL, seed=0, **kw)


def test_each_build_takes_a_new_point_of_every_group_until_one_runs_out_then_repeats_its_best():
    s = search()
    builds = []
    while (got := s.ask(1)):
        builds.append(got[0])
        parts = times(got[0])
        s.tell(got[0], sum(parts.values()), parts=parts)
    assert len(builds) == 6                                   # the larger group's size, not 6 x 4
    assert sorted(p["a"] for p in builds) == [1, 2, 3, 4, 5, 6]
    assert sorted(p["b"] for p in builds[:4]) == [1, 2, 3, 4] and [p["b"] for p in builds[4:]] == [1, 1]
    assert s.models[0].best()[0] == {"a": 3} and s.models[1].best()[0] == {"b": 1}
    assert s.best() == ({"a": 3, "b": 1}, 2.0)


def test_each_group_is_told_its_own_kernels_time_not_the_total():
    s = search()
    (p,) = s.ask(1)
    s.tell(p, 100.0, parts=times(p))
    assert s.models[0].told[s.models[0]._key({"a": p["a"]})][0] == times(p)[("a",)]
    assert s.models[1].told[s.models[1]._key({"b": p["b"]})][0] == times(p)[("b",)]


def test_a_failed_build_fails_the_point_of_every_group_that_was_new_in_it():
    s = search()
    (p,) = s.ask(1)
    s.tell(p, None, failure="compile_failed")
    assert [m.told[m._key({n: p[n]})] for m, n in zip(s.models, "ab")] == [(None, "compile_failed")] * 2


def test_a_group_whose_kernels_no_build_measures_is_held_at_one_point_after_three_of_its_points():
    s = search(start=[{"a": 2, "b": 4}])
    seen_b = []
    for _ in range(6):
        (p,) = s.ask(1)
        seen_b.append(p["b"])
        s.tell(p, 5.0, parts={("a",): times(p)[("a",)]})     # b's kernel is never timed
    assert s.muted == {1} and [v for v, _ in s.models[1].told.values()] == [None] * 3
    assert seen_b[0] == 4 and len(set(seen_b[:3])) == 3 and set(seen_b[3:]) == {4}   # three tried, then held


def test_a_point_at_which_a_timed_groups_kernels_did_not_run_is_told_as_failed_and_the_group_goes_on():
    s = search()
    (p,) = s.ask(1)
    s.tell(p, 5.0, parts=times(p))
    (q,) = s.ask(1)
    s.tell(q, 5.0, parts={("a",): times(q)[("a",)]})          # b's value at q kept its kernel from running
    assert s.models[1].told[s.models[1]._key({"b": q["b"]})] == (None, "not_timed")
    assert not s.muted and s.ask(1)


def test_results_told_again_before_any_ask_give_the_proposals_the_first_run_would_have_made():
    first, history = search(budget=6), []
    for _ in range(3):
        for p in first.ask(2):
            parts = times(p)
            first.tell(p, sum(parts.values()), parts=parts)
            history.append(p)
    resumed = search(budget=6)
    for p in history:
        parts = times(p)
        resumed.tell(p, sum(parts.values()), parts=parts)
    assert resumed.ask(2) == first.ask(2)


def test_it_stops_at_its_budget_counted_in_builds():
    s = search(budget=3)
    for p in s.ask(3):
        parts = times(p)
        s.tell(p, sum(parts.values()), parts=parts)
    assert s.stop() == "budget reached (3 of 3 builds)"


def test_a_group_too_large_to_list_is_searched_by_its_rules_and_proposes_only_legal_combinations():
    from sweep.plan.per_group import RuledGroup

    values = tuple(range(1, 65))
    big = ("x", "y", "z", "w", "v")                       # 64**5: a billion combinations, x + y == z legal
    rule = RuledGroup(lambda p: p["x"] + p["y"] == p["z"],
                      lambda rng, n: [{"x": int(x), "y": int(y), "z": int(x + y), "w": int(w), "v": int(v)}
                                      for x, y, w, v in rng.integers(1, 33, size=(n, 4))])
    s = PerGroupSearch([("a",), big], [DIMS[0], *(Dim(n, values) for n in big)], [LEGAL[0], rule], seed=0)
    asked = []
    for _ in range(12):
        (p,) = s.ask(1)
        asked.append(p)
        s.tell(p, 1.0, parts={("a",): float(p["a"]), big: float(p["z"] + p["w"])})
    assert all(p["x"] + p["y"] == p["z"] for p in asked)
    assert len({tuple(p[n] for n in big) for p in asked}) == 12          # a new combination every build
    assert sorted(p["a"] for p in asked[:6]) == [1, 2, 3, 4, 5, 6]        # the small group walked whole meanwhile
