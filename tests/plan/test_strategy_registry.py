"""The strategy registry: each strategy declares its options; a space file gets only those.
Random draws from the legal set; optuna's sampler is told the constraints."""

from __future__ import annotations

import collections
import dataclasses
import textwrap
import time
from pathlib import Path

import pytest

import sweep.space
from sweep import plan as strategies
from sweep.space import target
from sweep.core.errors import SweepError
from sweep.space import check, groups
from sweep.plan import REGISTRY, STRATEGIES, Option, StrategySpec, factorized, optuna_tpe, random_sample, start

ROOT = Path(__file__).resolve().parents[2]
ONE = "parameters:\n  A: {values: [1, 2]}\n"


def load_text(tmp_path: Path, text: str, name: str = "space.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return target.load(path)


def refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(SweepError) as e:
        load_text(tmp_path, text)
    message = str(e.value)
    assert str(tmp_path / "space.yaml") in message and "\n" not in message
    return message


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------


def test_strategy_names_are_listed_once_by_the_registry_in_module_order():
    assert STRATEGIES == tuple(REGISTRY) == ("tuples", "grid", "factorized", "random", "optuna", "learning", "auto")
    assert sweep.space.STRATEGIES is STRATEGIES                # what the CLI's --strategy choices import
    for name, spec in REGISTRY.items():
        assert spec.name == name


def test_every_strategy_declares_a_doc_one_entry_point_and_documented_options():
    for spec in REGISTRY.values():
        assert spec.doc
        assert (spec.plan is None) != (spec.search is None)
        for o in spec.options:
            assert o.name and o.doc and o.type in (int, bool, str, list)
            assert o.check(o.default, "here") == o.default if o.type in (int, bool, str) else isinstance(o.default, tuple)
    assert REGISTRY["optuna"].search is optuna_tpe.TPESearch and REGISTRY["optuna"].plan is None
    assert {o.name for o in REGISTRY["grid"].options} == set()
    assert {o.name for o in REGISTRY["random"].options} == {"samples", "seed"}


def test_a_spec_with_both_or_neither_entry_point_is_refused():
    with pytest.raises(TypeError, match="exactly one of plan and search"):
        StrategySpec("x", "doc")
    with pytest.raises(TypeError, match="exactly one of plan and search"):
        StrategySpec("x", "doc", plan=lambda s: None, search=lambda s: None)


def test_options_not_given_read_as_the_strategys_declared_defaults(tmp_path):
    s = load_text(tmp_path, ONE + "strategy: optuna\n")
    assert s.strategy.options == ()
    assert s.strategy.samples == 20 and s.strategy.seed == 0
    assert REGISTRY["optuna"].values(s.strategy) == {"samples": 20, "seed": 0, "in_flight": 0, "defaults_first": True}
    with pytest.raises(AttributeError, match="strategy 'optuna' has no option 'rows'; it takes: samples, seed, in_flight, "
                                             "defaults_first"):
        s.strategy.rows


def test_replacing_an_option_keeps_the_others():
    s = sweep.space.Strategy("random", samples=5, seed=2)
    assert dataclasses.replace(s, seed=3) == sweep.space.Strategy("random", {"samples": 5, "seed": 3})
    assert dataclasses.replace(s, name="optuna").samples == 5


# ---------------------------------------------------------------------------
# Options a strategy does not take
# ---------------------------------------------------------------------------


def test_grid_given_samples_is_refused_naming_the_file_the_key_and_what_grid_takes(tmp_path):
    msg = refusal(tmp_path, ONE + "strategy: grid\nsamples: 10\n")
    assert ": samples: grid does not take 'samples' (grid takes no options)" in msg
    assert "only the random and optuna strategies read 'samples'" in msg
    assert "set strategy to one of random, optuna, or remove it" in msg


def test_factorized_given_samples_lists_the_seed_it_takes(tmp_path):
    msg = refusal(tmp_path, ONE + "strategy: factorized\nsamples: 10\n")
    assert "factorized does not take 'samples' (factorized takes seed (default 0))" in msg


def test_grid_given_a_seed_is_refused(tmp_path):
    msg = refusal(tmp_path, ONE + "seed: 3\n")                     # strategy: grid is the default
    assert "grid does not take 'seed'" in msg and "factorized, random, optuna, learning and auto strategies read 'seed'" in msg


def test_an_option_in_the_strategy_mapping_is_refused_when_undeclared(tmp_path):
    msg = refusal(tmp_path, ONE + "strategy: {name: grid, seed: 1}\n")
    assert "strategy.seed: grid does not take 'seed'" in msg


def test_an_option_no_strategy_reads_says_to_remove_it(tmp_path):
    msg = refusal(tmp_path, ONE + "strategy: {name: random, tolerance: 3}\n")
    assert "strategy.tolerance: random does not take 'tolerance' (random takes samples (default 20), seed (default 0))" in msg
    assert "no strategy reads 'tolerance': remove it" in msg


def test_an_option_another_strategy_reads_names_it(tmp_path):
    msg = refusal(tmp_path, ONE + "strategy: {name: random, patience: 3}\n")
    assert "only the learning and auto strategies read 'patience'; set strategy to one of learning, auto" in msg


@pytest.mark.parametrize("text,fragment", [
    (ONE + "strategy: {name: random, samples: many}\n", "strategy.samples: 'many' must be an integer from 1 to 1000000"),
    (ONE + "strategy: {name: optuna, seed: -1}\n", "strategy.seed: -1 must be an integer from 0"),
    (ONE + "strategy: {samples: 3}\n", "strategy: missing 'name'"),
    (ONE + "strategy: {name: random}\nsamples: 3\n", "samples: with strategy: {name: ...} the options go inside it"),
    (ONE + "strategy: {name: tuples, columns: A, rows: [[1]]}\n", "strategy.columns: 'A' must be a list"),
    (ONE + "strategy: {name: tuples, rows: [[0]]}\n", "strategy.rows[0]: 0 is not a launch size"),
    (ONE + "strategy: {name: learning, start_from: 5}\n", "strategy.start_from: 5 must be a str (start_from: a "
                                                          "recording of this space"),
], ids=["samples_type", "seed_negative", "no_name", "flat_and_mapping", "columns_type", "row_zero", "start_from_type"])
def test_strategy_options_are_checked_against_their_declared_type(tmp_path, text, fragment):
    assert fragment in refusal(tmp_path, text)


def test_strategy_mapping_shape_loads_with_its_options(tmp_path):
    s = load_text(tmp_path, ONE + "  B: {values: [3, 4], default: 3}\n"
                  "strategy: {name: tuples, columns: [A], rows: [[1], [2]]}\n")
    assert s.strategy.name == "tuples" and s.strategy.columns == ("A",) and s.strategy.rows == ((1,), (2,))
    assert [c.as_dict() for c in strategies.plan(s).configs] == [{"A": 1, "B": 3}, {"A": 2, "B": 3}]
    w = load_text(tmp_path, ONE + "strategy: {name: learning, budget: 20, start_from: ../results/gemm-h100}\n")
    assert w.strategy.start_from == "../results/gemm-h100" and w.strategy.budget == 20
    r = load_text(tmp_path, ONE + "strategy: {name: random, samples: 1, seed: 4}\n")
    assert (r.strategy.samples, r.strategy.seed) == (1, 4) and len(strategies.plan(r).configs) == 1


@pytest.mark.parametrize("path", sorted((ROOT / "spaces").glob("*.yaml")) + sorted((ROOT / "tests" / "data").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_shipped_space_file_loads_and_plans(path):
    s = target.load(path)
    if REGISTRY[s.strategy.name].plan is not None:
        assert strategies.plan(s).configs


def test_a_command_line_strategy_override_reads_its_own_options():
    from sweep.pipeline.overrides import apply_overrides

    s = target.load(ROOT / "spaces" / "factorized_check.yaml")           # factorized, seed 3
    r = apply_overrides(s, strategy="random", samples=4)
    assert r.strategy.samples == 4 and r.strategy.seed == 3
    assert len(strategies.plan(r).configs) == 4
    assert strategies.plan(apply_overrides(s, strategy="grid")).note.startswith("grid: 25 points")
    with pytest.raises(SweepError, match="choose one of tuples, grid, factorized, random, optuna"):
        apply_overrides(s, strategy="bayes")


# ---------------------------------------------------------------------------
# Groups live in the space
# ---------------------------------------------------------------------------


def test_parameter_groups_are_part_of_the_space():
    s = target.load(ROOT / "spaces" / "full.yaml")
    assert factorized.groups is groups       # selection joins them further by measured kernels (candidates.kernel_groups)
    assert [len(g) for g in groups(s)] == [3, 1, 1, 6, 4]


# ---------------------------------------------------------------------------
# random: drawn from the legal set
# ---------------------------------------------------------------------------

SPARSE = """\
    strategy: random
    samples: {samples}
    seed: {seed}
    parameters:
      A: {{values: {{range: [1, 100]}}}}
      B: {{values: {{range: [1, 100]}}}}
      C: {{equals: A}}
    constraints:
      - A + B <= 25
    """


def test_random_over_a_three_percent_legal_space_gives_samples_legal_configs_and_no_skips(tmp_path):
    s = load_text(tmp_path, SPARSE.format(samples=50, seed=0))
    p = strategies.plan(s)
    assert len(p.configs) == len(set(p.configs)) == 50
    assert all(check(s, c) is None and c["C"] == c["A"] for c in p.configs)
    assert p.skipped == ()
    assert "50 of the 300 legal points" in p.note and "10,000-point grid (100*100)" in p.note


def test_random_draws_every_legal_point_about_equally_often(tmp_path):
    s = load_text(tmp_path, SPARSE.format(samples=1, seed=0).replace("100", "10").replace("<= 25", "<= 6"))
    counts = collections.Counter()
    for seed in range(400):
        (c,) = strategies.plan(dataclasses.replace(s, strategy=dataclasses.replace(s.strategy, seed=seed))).configs
        counts[(c["A"], c["B"])] += 1
    assert set(counts) == {(a, b) for a in range(1, 11) for b in range(1, 11) if a + b <= 6}   # 15 legal points
    assert 10 <= min(counts.values()) and max(counts.values()) <= 50                         # 26.7 expected each


def test_random_with_a_group_too_large_to_enumerate_draws_per_parameter(tmp_path):
    text = """\
        strategy: random
        samples: 5
        parameters:
          X: {tag: T, values: {range: [1, 100]}}
          Y: {tag: T, values: {range: [1, 100]}}
          Z: {tag: T, values: {range: [1, 100]}}
          W: {values: [1, 2]}
        constraints:
          - X + Y + Z <= 40
        """
    s = load_text(tmp_path, text)
    p = strategies.plan(s)
    assert len(p.configs) == 5 and all(check(s, c) is None for c in p.configs) and p.skipped == ()
    assert p.note.startswith("random: found 5 legal of 5 wanted in ")


def test_random_gives_up_after_bounded_draws_and_says_how_many_it_found(tmp_path):
    text = """\
        strategy: random
        samples: 5
        parameters:
          X: {tag: T, values: {range: [1, 100]}}
          Y: {tag: T, values: {range: [1, 100]}}
          Z: {tag: T, values: {range: [1, 100]}}
        constraints:
          - X + Y + Z <= 2
        """
    s = load_text(tmp_path, text)
    started = time.monotonic()
    p = strategies.plan(s)
    assert time.monotonic() - started < 5
    assert p.configs == () and p.skipped == ()
    assert f"found 0 legal of 5 wanted in {random_sample.ATTEMPTS_PER_SAMPLE * 5:,} draws" in p.note


def test_random_with_a_rule_naming_no_parameter_that_fails_plans_nothing(tmp_path):
    s = load_text(tmp_path, SPARSE.format(samples=5, seed=0).replace("A + B <= 25", "1 > 2"))
    assert strategies.plan(s).configs == ()


# ---------------------------------------------------------------------------
# optuna: the constraints go to the sampler
# ---------------------------------------------------------------------------

TPE = """\
    strategy: optuna
    samples: 12
    seed: 0
    parameters:
      B: {values: {pow2: [1, 64]}}
      C: {values: [1, 2]}
    constraints:
      - {expr: B != 16, why: sixteen is broken}
      - {expr: B != 16 or C == 1, why: and worse with C}
    """


def _infeasibility(trial) -> float:
    return sum(v for v in trial.constraints.values() if v > 0)


def _run(search) -> list:
    asked = []
    while cs := search.ask(4):
        asked.extend(cs)
        for c in cs:
            search.tell(c, abs(c["B"] - 128) + c["C"])
    return asked


@pytest.mark.filterwarnings("ignore:.*constraints_func.*:FutureWarning")    # deprecated in optuna 5, needed before
@pytest.mark.parametrize("per_trial", [True, False], ids=["set_constraint", "constraints_func"])
def test_tpe_tells_the_sampler_how_many_rules_each_trial_breaks(tmp_path, monkeypatch, per_trial):
    optuna = pytest.importorskip("optuna")
    if not per_trial:                       # the path optuna < 5 takes: TPESampler(constraints_func=...)
        monkeypatch.setattr(optuna_tpe, "per_trial_constraints", lambda _: False)
    search = start(load_text(tmp_path, TPE))
    assert search.per_trial is per_trial
    asked = _run(search)
    assert len(asked) == 12 and all(c["B"] != 16 for c in asked)
    trials = search.study.get_trials(deepcopy=False)
    illegal = [t for t in trials if t.params["B"] == 16]
    assert illegal, "B=16 is suggested at some point"
    for t in illegal:
        assert t.state == optuna.trial.TrialState.PRUNED
        assert _infeasibility(t) == (1 if t.params["C"] == 1 else 2)
    assert all(_infeasibility(t) == 0 for t in trials if t.params["B"] != 16)
    assert len(search.skipped) == len(illegal)


def test_tpe_violations_are_one_per_broken_rule(tmp_path):
    pytest.importorskip("optuna")
    s = load_text(tmp_path, TPE)
    search = start(s)
    make = sweep.space.make_config
    assert search.violations(make(s, {"B": 16, "C": 2})) == (1.0, 1.0)
    assert search.violations(make(s, {"B": 16, "C": 1})) == (1.0, 0.0)
    assert search.violations(make(s, {"B": 32, "C": 2})) == (0.0, 0.0)


def test_option_check_refuses_a_value_of_the_wrong_type():
    o = Option("rows", list, (), "the rows")
    with pytest.raises(SweepError, match=r"here: 3 must be a list \(rows: the rows\)"):
        o.check(3, "here")
