"""Every enumerating strategy's legal set comes from the per-rule tables (sweep.space.legality),
and says the same as testing each point against every rule."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from sweep.plan.base import Skipped, group_combinations
from sweep.space import first_broken, group_constraints, groups, make_config, target

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

ATOMS = ["A", "B", "C", "D", "2", "0"]
OPS = ["+", "-", "*", "//", "%", "<<", "&", "|", "/"]


def per_point(space, group, base):
    """The reference: each combination through the compiled checker, one at a time."""
    rules = group_constraints(space, group)
    derived = [(p.macro, p.equals) for p in space.parameters if p.derived]
    ok, skipped = [], []
    for values in itertools.product(*(p.values for p in group)):
        chosen = dict(zip((p.macro for p in group), values))
        full = {**base, **chosen}
        full.update((m, full[src]) for m, src in derived)
        why = first_broken(rules, full)
        if why is None:
            ok.append(chosen)
        else:
            skipped.append(Skipped(make_config(space, full), why))
    return ok, skipped


rule = st.builds(lambda a, op, b, cmp, c: f"({a} {op} {b}) {cmp} {c}", st.sampled_from(ATOMS), st.sampled_from(OPS),
                 st.sampled_from(ATOMS), st.sampled_from(["<", "<=", "!=", ">"]), st.sampled_from(ATOMS))
values = st.lists(st.sampled_from([0, 1, 2, 3, 5, 8]), min_size=1, max_size=4, unique=True)


@hypothesis.settings(max_examples=25, deadline=None, database=None)
@hypothesis.given(rules=st.lists(rule, max_size=5), a=values, b=values, c=values)
def test_group_combinations_by_tables_equal_checking_every_combination(tmp_path_factory, rules, a, b, c):
    folder = tmp_path_factory.mktemp("space")
    (folder / "Makefile").write_text("all:\n")
    params = {"A": {"values": a, "min": 0}, "B": {"values": b, "min": 0}, "C": {"values": c, "min": 0},
              "D": {"equals": "A"}}
    path = Path(folder) / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "target": {"name": "t", "dir": str(folder), "profile": ["x"]},
                                    "parameters": params, "constraints": rules}))
    space = target.load(path)
    base = {p.macro: p.values[0] for p in space.swept}
    for g in groups(space):
        fast, slow = group_combinations(space, g, base), per_point(space, g, base)
        assert fast[0] == slow[0], rules
        assert [(s.config, s.reason) for s in fast[1]] == [(s.config, s.reason) for s in slow[1]], rules


def pair_rule(names):
    return st.builds(lambda a, op, b, cmp, c: f"({a} {op} {b}) {cmp} {c}", st.sampled_from(names), st.sampled_from(OPS),
                     st.sampled_from(names), st.sampled_from(["<", "<=", "!=", ">"]), st.sampled_from(names))


@hypothesis.settings(max_examples=25, deadline=None, database=None)
@hypothesis.given(rules=st.lists(st.one_of(pair_rule(["A", "B", "1"]), pair_rule(["C", "2"])), max_size=5),
                  a=values, b=values, c=values)
def test_learning_legality_by_group_sets_equals_checking_every_rule(tmp_path_factory, rules, a, b, c):
    from sweep.plan.learned import legality_test
    from sweep.space import check

    folder = tmp_path_factory.mktemp("space")
    (folder / "Makefile").write_text("all:\n")
    params = {"A": {"values": a, "min": 0, "kernels": ["k1"], "tag": "A"},
              "B": {"values": b, "min": 0, "kernels": ["k1"], "tag": "B"},
              "C": {"values": c, "min": 0, "kernels": ["k2"], "tag": "C"}}
    path = Path(folder) / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "target": {"name": "t", "dir": str(folder), "profile": ["x"]},
                                    "parameters": params, "constraints": rules}))
    space = target.load(path)
    is_legal = legality_test(space)
    for combo in itertools.product(a, b, c):
        point = dict(zip("ABC", combo))
        assert is_legal(point) == (check(space, make_config(space, point)) is None), (rules, point)


def test_factorized_builds_are_the_configs_make_config_gives_derived_values_included(tmp_path):
    from sweep.plan import factorized

    (tmp_path / "Makefile").write_text("all:\n")
    params = {"A": {"values": [1, 2, 4], "kernels": ["k1"], "tag": "A"}, "B": {"values": [8, 16], "kernels": ["k2"], "tag": "B"},
              "D": {"equals": "A"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "target": {"name": "t", "dir": str(tmp_path), "profile": ["x"]},
                                    "strategy": "factorized", "parameters": params, "constraints": ["A != 2"]}))
    space = target.load(path)
    plan = factorized.plan(space)
    assert plan.configs and all(c == make_config(space, {m: c[m] for m in "AB"}) for c in plan.configs)
    assert {c["A"] for c in plan.configs} == {1, 4} and all(c["D"] == c["A"] for c in plan.configs)


@pytest.mark.parametrize("strategy", ["grid", "random", "factorized", "learning", "auto"])
def test_every_enumerating_strategy_prints_progress_while_it_plans(tmp_path, capsys, monkeypatch, strategy):
    from sweep import plan as strategies
    from sweep.plan.base import Ticker

    monkeypatch.setattr(Ticker.__init__, "__defaults__", (-1.0,))   # every tick prints: this plan takes milliseconds
    (tmp_path / "Makefile").write_text("all:\n")
    params = {"A": {"values": [1, 2, 4]}, "B": {"values": [8, 16]}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "target": {"name": "t", "dir": str(tmp_path), "profile": ["x"]},
                                    "strategy": {"name": strategy, **({"whole": 1} if strategy == "auto" else {})},
                                    "parameters": params, "constraints": ["A * B != 16"]}))
    strategies.start(target.load(path)).ask(2)
    assert "s: planning" in capsys.readouterr().err
