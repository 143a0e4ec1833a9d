"""bench/strategies.py: Kernel Tuner's runs that end short of the budget are started again; the
summary's budgets and the merging of earlier logs."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cache_spaces, strategies, strategy_table

SPACE = Path(__file__).resolve().parents[1] / "data" / "benchmark_spaces" / "convolution_A4000.json.gz"


@pytest.fixture(scope="module")
def space() -> dict:
    return cache_spaces.load_space(SPACE)


def test_a_kernel_tuner_strategy_that_ends_short_is_started_again_until_the_budget_is_spent(space):
    pytest.importorskip("kernel_tuner", reason="Kernel Tuner (pip install '.[bench]') runs the strategy itself")
    alone, _, starts_alone = strategies.run_kt(space, 0, 100, "dual_annealing", restart=False)
    assert starts_alone == 1 and len(alone) < 100            # dual annealing stops by itself
    trace, _, starts = strategies.run_kt(space, 0, 100, "dual_annealing")
    assert starts > 1 and len(trace) == 100
    assert trace[: len(alone)] == alone                      # the first start is the seed's own run
    assert len(strategies.Evaluator.last.seen) == 100        # distinct configurations only: earlier ones free


# How much of a run repeats for a seed: differential evolution's whole run; Bayesian optimization's
# Latin hypercube start (popsize, 20) only. After it, Kernel Tuner's default method (multi-ultrafast)
# refits its model when the last prediction took under a fifth of the last evaluation's wall-clock
# time, or every fifth step: on a loaded machine that timing, not the seed, can change a later
# proposal (a CI run's 30th differed, 2026-12-01), so its rows vary a little from run to run.
REPEATS_FOR_A_SEED = {"diff_evo": None, "bayes_opt": 20}   # None: the whole run


@pytest.mark.parametrize("strategy", ["diff_evo", "bayes_opt"])
def test_kernel_tuner_strategies_that_sample_latin_hypercubes_repeat_their_run_for_a_seed(space, strategy):
    """Both draw Latin hypercube samples from scipy with no seed (fresh OS entropy): the bench's
    tables for them differed from run to run until their samplers drew from the seeded generator."""
    pytest.importorskip("kernel_tuner", reason="Kernel Tuner (pip install '.[bench]') runs the strategy itself")
    first, second = (strategies.run_kt(space, 3, 30, strategy, restart=False)[0] for _ in range(2))
    n = REPEATS_FOR_A_SEED[strategy]
    assert len(first) >= (n or 10) and first[:n] == second[:n]


def test_a_kernel_tuner_run_for_a_seed_is_the_same_in_a_fresh_process_as_after_other_runs(space):
    """Kernel Tuner imports a strategy's module on first use, and that import draws from Python's
    global generator: the first Bayesian optimization run of a process (a bench worker's) differed
    from later ones with the same seed, in its seeded Latin hypercube start too, until run_kt
    imported it before seeding."""
    pytest.importorskip("kernel_tuner", reason="Kernel Tuner (pip install '.[bench]') runs the strategy itself")
    root = Path(__file__).resolve().parents[2]
    fresh = subprocess.run(
        [sys.executable, "-c", "import json, sys; from bench import cache_spaces, strategies; "
         f"space = cache_spaces.load_space({str(SPACE)!r}); "
         "print(json.dumps(strategies.run_kt(space, 3, 30, 'bayes_opt', restart=False)[0]))"],
        cwd=root, env={**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'bench'}"},
        capture_output=True, text=True, check=True)
    strategies.run_kt(space, 4, 30, "bayes_opt", restart=False)
    n = REPEATS_FOR_A_SEED["bayes_opt"]       # past its start, the machine's load can change a proposal
    after_others = strategies.run_kt(space, 3, 30, "bayes_opt", restart=False)[0]
    assert json.loads(fresh.stdout.splitlines()[-1])[:n] == after_others[:n]


def _run(strategy: str, trace: list, **extra) -> dict:
    return {"space": "s", "strategy": strategy, "seed": 0, "trace": trace, "optimum": 1.0,
            "cpu_per_suggestion": 0.0, **extra}


def test_a_run_shorter_than_a_budget_is_left_out_of_that_budget_and_restarted_runs_are_counted():
    runs = [_run("kt_x", [2.0, 1.5], starts=1), _run("kt_x", [3.0, 1.2, 1.1, 1.0], starts=3)]
    (row,) = strategy_table.summarize(runs, (2, 4))
    assert row["best@2"][1] == pytest.approx((1.5 + 1.2) / 2)
    assert row["best@4"] == [1.0, 1.0, 1.0]                 # the short run is not in it
    assert row["short_runs"] == 1 and row["restarted_runs"] == 1
    assert strategy_table.best_at([None, None], 1.0, 2) == math.inf   # only failures: nothing found


def test_merged_kernel_tuner_runs_of_the_other_restart_mode_are_run_again_not_reused(tmp_path, space, monkeypatch):
    pytest.importorskip("kernel_tuner", reason="the bench refuses Kernel Tuner's strategies without it")
    log = tmp_path / "old.jsonl"
    old = _run("kt_dual_annealing", [None], space=space["name"])      # a log from before the option
    log.write_text(json.dumps(old) + "\n" + json.dumps(_run("random", [5.0], space=space["name"])) + "\n")
    made = []
    monkeypatch.setattr(strategies, "run_one", lambda t: made.append(t) or _run(t[1], [1.0], space=space["name"]))
    strategies.main(["--spaces", str(SPACE), "--strategies", "kt_dual_annealing,random", "--seeds", "1",
                     "--budgets", "1", "--merge", str(log)])
    assert [(t[1], t[4]) for t in made] == [("kt_dual_annealing", True)]   # random's logged run is reused


def test_first_seed_runs_and_tabulates_only_the_seeds_it_names(tmp_path, monkeypatch, capsys):
    log = tmp_path / "old.jsonl"
    log.write_text(json.dumps(_run("random", [5.0], space="convolution_A4000", seed=3)) + "\n")
    made = []
    monkeypatch.setattr(strategies, "run_one", lambda t: made.append(t) or _run(t[1], [1.0], space=strategies.load_name(t[0]), seed=t[2]))
    strategies.main(["--spaces", str(SPACE), "--strategies", "random", "--seeds", "2", "--first-seed", "40",
                     "--budgets", "1", "--merge", str(log)])
    assert [t[2] for t in made] == [40, 41]
    assert "2 in the table, 2 seeds from 40" in capsys.readouterr().out   # seed 3's logged run is left out


def _rate_cache(tmp_path: Path, objective: str = "GFLOP/s") -> tuple[Path, tuple]:
    """60 configurations of the shared extract, declared to maximize GFLOP/s, with one mid-table
    configuration's rate raised above every other's (as the hub's hotspot caches count work a
    time does not show): the fastest configuration is then not the best one."""
    import gzip
    with gzip.open(SPACE, "rt") as f:
        data = json.load(f)
    entries = [e for e in data["cache"].values() if isinstance(e.get("time"), float)][:60]
    keys = data["tune_params_keys"]
    for e in entries:
        e["GFLOP/s"] = 1000.0 / e["time"]
    star = sorted(entries, key=lambda e: e["time"])[30]
    star["GFLOP/s"] = 10 * max(e["GFLOP/s"] for e in entries)
    data["cache"] = {",".join(str(e[k]) for k in keys): e for e in entries}
    data["objective"] = objective
    path = tmp_path / "rates.json"
    path.write_text(json.dumps(data))
    return path, tuple(star[k] for k in keys)


def test_a_space_declared_to_maximize_a_rate_is_replayed_as_its_reciprocal_cost(tmp_path):
    path, star = _rate_cache(tmp_path)
    space = cache_spaces.load_space(path)
    assert space["higher_is_better"] and space["objective"] == "GFLOP/s"
    best = min(space["table"], key=lambda c: space["table"][c])
    rate = space["data"]["cache"][",".join(map(str, star))]["GFLOP/s"]
    assert best == star and space["optimum"] == pytest.approx(1 / rate)


def test_kernel_tuner_climbs_the_space_s_declared_objective_not_time(tmp_path):
    pytest.importorskip("kernel_tuner", reason="Kernel Tuner (pip install '.[bench]') runs the strategy itself")
    import gzip
    with gzip.open(SPACE, "rt") as f:
        data = json.load(f)
    for e in data["cache"].values():   # a rate that rises with the time: the slowest configuration is the best
        if isinstance(e.get("time"), float):
            e["GFLOP/s"] = 1000.0 * e["time"]
    data["objective"] = "GFLOP/s"
    (tmp_path / "rates.json").write_text(json.dumps(data))
    space = cache_spaces.load_space(tmp_path / "rates.json")
    as_time = dict(space, objective="time", higher_is_better=False)   # what Kernel Tuner does when not told

    def visited(space: dict) -> float:   # the median cost of what simulated annealing visits, 3 seeds
        runs = [strategies.run_kt(space, seed, 40, "simulated_annealing")[0] for seed in range(3)]
        return sum(sorted(t for t in run if t is not None)[len(run) // 2] for run in runs)

    assert visited(space) < 0.85 * visited(as_time)


def test_a_space_whose_objective_has_no_known_direction_is_refused_in_one_line(tmp_path, capsys):
    path, _ = _rate_cache(tmp_path, objective="registers")
    with pytest.raises(SystemExit) as e:
        strategies.main(["--spaces", str(path), "--strategies", "random", "--seeds", "1"])
    assert str(path) in str(e.value) and "'registers' has no known direction" in str(e.value)


def test_a_file_that_is_not_a_cache_is_refused_naming_it(tmp_path):
    path = tmp_path / "space.json"
    path.write_text(json.dumps({"parameters": []}))
    with pytest.raises(SystemExit) as e:
        strategies.main(["--spaces", str(path), "--strategies", "random", "--seeds", "1"])
    assert str(path) in str(e.value) and "not a brute-forced Kernel Tuner cache file" in str(e.value)


def test_a_t4_results_file_is_refused_with_the_cache_it_needs(tmp_path):
    path = tmp_path / "A4000_T4.json"
    path.write_text(json.dumps({"schema_version": "1.0.0", "results": []}))
    with pytest.raises(SystemExit) as e:
        strategies.main(["--spaces", str(path), "--strategies", "random", "--seeds", "1"])
    assert str(path) in str(e.value) and "a T4 results file" in str(e.value)


def test_the_asynchronous_mode_keeps_in_flight_proposals_waiting_and_tells_the_oldest_first(space):
    from sweep.plan.learning import LearningSearch
    seen = []

    class Probe(LearningSearch):
        def tell(self, point, value, failure=None):
            seen.append((len(self.pending), self._key(point) == self.pending[0]))
            super().tell(point, value, failure)

    trace, _ = strategies.run_ours(space, 0, 30, make=Probe, in_flight=4)
    assert len(trace) == 30
    assert max(n for n, _ in seen) == 4 and all(oldest for _, oldest in seen)
    assert [n for n, _ in seen[-4:]] == [4, 3, 2, 1]          # the budget's last proposals drain
    assert strategies.run_ours(space, 0, 30, in_flight=4)[0] == trace


def _one_parameter_cache(tmp_path: Path) -> Path:
    """Eight configurations of one parameter, fastest in the middle: a space smaller than Kernel
    Tuner's differential evolution's population and its Bayesian optimization's first sample."""
    sizes = list(range(32, 288, 32))
    cache = {str(b): {"block_size_x": b, "time": 1.0 + abs(b - 160) / 100} for b in sizes}
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"device_name": "test", "kernel_name": "k", "problem_size": [1],
                                "tune_params_keys": ["block_size_x"], "tune_params": {"block_size_x": sizes},
                                "objective": "time", "cache": cache}))
    return path


def test_a_kernel_tuner_strategy_that_raises_is_named_below_the_table_and_the_other_runs_stay(tmp_path, capsys):
    pytest.importorskip("kernel_tuner", reason="Kernel Tuner (pip install '.[bench]') runs the strategies itself")
    log = tmp_path / "runs.jsonl"
    rows = strategies.main(["--spaces", str(_one_parameter_cache(tmp_path)), "--seeds", "2", "--budgets", "4",
                            "--strategies", "ours,kt_random_sample,kt_diff_evo", "--log", str(log)])
    assert {r["strategy"] for r in rows} == {"ours", "kt_random_sample"}   # a space of one parameter replays in KT
    out = capsys.readouterr().out
    assert "runs whose strategy failed (left out of the table):" in out
    assert "tiny kt_diff_evo: 2 run(s), seeds 0, 1: IndexError" in out and "kernel_tuner/strategies/diff_evo.py:" in out
    logged = [json.loads(line)["strategy"] for line in log.read_text().splitlines()]
    assert sorted(logged) == ["kt_random_sample"] * 2 + ["ours"] * 2       # a failed run is not logged: rerun later


def test_a_failure_of_this_project_s_strategy_fails_the_bench(tmp_path, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise RuntimeError("no candidates")
    monkeypatch.setattr(strategies, "run_ours", broken)
    with pytest.raises(SystemExit) as e:
        strategies.main(["--spaces", str(_one_parameter_cache(tmp_path)), "--seeds", "1", "--budgets", "4",
                         "--strategies", "ours,random"])
    assert "ours failed (above)" in str(e.value)
    assert "tiny ours: 1 run(s), seeds 0: RuntimeError: no candidates" in capsys.readouterr().out


def test_kernel_tuner_solves_a_space_s_restriction_once_per_worker_and_charges_it_to_every_run(space):
    pytest.importorskip("kernel_tuner", reason="Kernel Tuner (pip install '.[bench]') runs the strategy itself")
    import kt_runs   # the module strategies.run_kt is from (bench/ is on the path once strategies is imported)
    solved = kt_runs.kt_space(space).solved
    solved.clear()
    first = strategies.run_kt(space, 0, 30, "random_sample", restart=False)
    assert len(solved) == 1
    ((_, spent),) = solved.values()
    second = strategies.run_kt(space, 0, 30, "random_sample", restart=False)
    assert second[0] == first[0] and len(solved) == 1                 # the same run from the kept solve
    assert second[1] * len(second[0]) >= spent                         # whose CPU is charged to it again


def test_each_budget_reads_every_column_from_the_runs_told_that_budget():
    runs = [_run("kt_x", [3.0, 2.0], limit=2), _run("kt_x", [5.0, 4.0, 3.0, 1.0], limit=4)]
    (row,) = strategy_table.summarize(runs, (2, 4), each_budget=True)
    assert row["best@2"][1] == 2.0 and row["best@4"][1] == 1.0   # not 4.0, the longer run's first two
    assert row["seeds"] == 1 and row["evals_to_1pct"] == 4       # the rest of the row: the largest budget's runs
    (anytime,) = strategy_table.summarize([runs[1]], (2, 4))
    assert anytime["best@2"][1] == 4.0


def test_each_budget_makes_a_run_per_budget_and_seed_and_reuses_logged_runs_of_the_same_budget(tmp_path):
    log = tmp_path / "runs.jsonl"
    args = ["--spaces", str(SPACE), "--strategies", "random,ours", "--seeds", "2", "--budgets", "5,10",
            "--each-budget", "--log", str(log)]
    strategies.main(args)
    made = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted((r["strategy"], r["seed"], r["limit"], len(r["trace"])) for r in made) == [
        (s, seed, b, b) for s in ("ours", "random") for seed in (0, 1) for b in (5, 10)]
    again = tmp_path / "again.jsonl"
    strategies.main(args[:-1] + [str(again), "--merge", str(log)])
    assert not again.exists() or again.read_text() == ""               # every run reused, none made again


def test_a_failure_s_message_reaches_the_terminal_with_its_control_characters_spelled_out():
    try:
        raise ValueError("bad value '\x1b[2Jx'\nsecond line")
    except ValueError as error:
        line = strategies.failure_of(error)
    assert line.startswith("ValueError: bad value '\\x1b[2Jx' (") and "\x1b" not in line and "second line" not in line


def test_the_enumerations_a_brute_force_cache_declares_reach_the_learning_strategy_unordered():
    """bench/brute_force.py writes each parameter's kind (parameter_kinds); the learning strategy is
    given pnpoly's two enumerations as choices, its sizes and flag as ordered."""
    space = cache_spaces.load_space(Path(strategies.__file__).parent / "data" / "pnpoly_H200.json.gz")
    assert space["kinds"]["PNPOLY_BETWEEN"] == "choice" and space["kinds"]["PNPOLY_TILE"] == "size"
    made = []

    def make(dims, **options):
        from sweep.plan.learning import LearningSearch

        made.append({d.name: d.is_choice() for d in dims})
        return LearningSearch(dims, **options)

    strategies.run_ours(space, seed=0, limit=3, make=make)
    assert made == [{"PNPOLY_BLOCK_X": False, "PNPOLY_TILE": False, "PNPOLY_BETWEEN": True, "PNPOLY_SLOPES": False,
                     "PNPOLY_METHOD": True}]
