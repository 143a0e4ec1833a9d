"""The learning and auto strategies in a sweep: replayed from a recorded brute-forced space
(tests/data/benchmark_spaces: an extract of the convolution space on an RTX A4000), so the
driver, the replay executor and the model meet as they do on a GPU. No GPU."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest

from sweep import cli
from sweep.dispatch import recording
from sweep.plan import REGISTRY
from sweep.records import Status, read_result
from sweep.space import target

DATA = Path(__file__).resolve().parents[1] / "data" / "benchmark_spaces"
KT = DATA / "A4000_extract.json.gz"
GRID = {"block_size_x": [16, 32], "block_size_y": [1, 2], "tile_size_x": [1, 2], "tile_size_y": [1, 2],
        "read_only": [0, 1], "use_padding": [0], "use_shmem": [0, 1]}


def t1_space(tmp_path: Path, strategy: dict | None = None, name: str = "conv") -> Path:
    t1 = json.loads((DATA / "convolution_milo.T1.json").read_text())
    t1["General"]["BenchmarkName"] = name
    for p in t1["ConfigurationSpace"]["TuningParameters"]:
        if p["Name"] in GRID:
            p["Values"] = str(GRID[p["Name"]])
            p["Default"] = GRID[p["Name"]][0]
    path = tmp_path / f"{name}.T1.json"
    path.write_text(json.dumps(t1))
    return path


def run(tmp_path: Path, space: Path, *extra: str, jobs: str = "jobs") -> int:
    return cli.main(["run", str(space), "--executor", "replay", "--from", str(KT), "--no-report", "--no-confirm",
                     "--jobs-dir", str(tmp_path / jobs), "--results-dir", str(tmp_path / "results"), *extra])


def measured(tmp_path: Path, jobs: str = "jobs", name: str = "conv") -> list[tuple[str, Status]]:
    out = []
    for d in sorted((tmp_path / jobs / name).iterdir()):
        r = read_result(d) if d.is_dir() else None
        if r is not None:
            out.append((r.tag, r.status))
    return out


def test_a_strategy_option_the_strategy_does_not_declare_is_refused_in_one_line(tmp_path, capsys):
    assert run(tmp_path, t1_space(tmp_path), "--strategy", "learning", "--strategy-option", "whole=3") == 1
    assert "--strategy-option whole: strategy 'learning' takes budget, budget_s, seed" in capsys.readouterr().err


def test_learning_and_auto_are_registered_strategies_with_declared_budgets():
    assert {"learning", "auto"} <= set(REGISTRY)
    assert {o.name for o in REGISTRY["learning"].options} >= {"budget", "budget_s", "seed"}
    assert {o.name for o in REGISTRY["auto"].options} >= {"whole", "budget", "seed"}


def test_a_learning_sweep_stops_at_its_budget_having_run_only_legal_points(tmp_path, capsys):
    space = t1_space(tmp_path)
    assert run(tmp_path, space, "--strategy", "learning", "--budget", "12") == 0
    runs = measured(tmp_path)
    assert len(runs) == 12
    err = capsys.readouterr().err
    assert "learning" in err and "stopped after 12 evaluations: its budget of 12 evaluations is spent" in err
    s = target.load(space)
    from sweep.space import check, make_config
    for tag, _ in runs:
        cfg = json.loads((tmp_path / "jobs" / "conv" / tag / "config.json").read_text())["macros"]
        assert check(s, make_config(s, {k: v for k, v in cfg.items() if k in {p.macro for p in s.swept}})) is None


def test_a_learning_sweep_with_proposals_in_flight_stops_when_out_of_patience(tmp_path, capsys):
    # 64 legal points, 4 proposals in flight (the default's floor): the rule reads told times only,
    # so it fires with proposals awaiting results, as the expected-improvement rule it replaced never did
    assert cli.main(["run", str(t1_space(tmp_path)), "--executor", "replay", "--from", str(KT), "--no-confirm",
                     "--jobs-dir", str(tmp_path / "jobs"), "--results-dir", str(tmp_path / "results"),
                     "--strategy", "learning", "--budget", "60", "--strategy-option", "patience=12"]) == 0
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "stopped after" in x)
    made = int(line.split("stopped after ")[1].split()[0])
    assert 12 < made < 60 and len(measured(tmp_path)) == made
    assert "the best time gained no more than 0.5% in its last" in line and "(patience 12;" in line
    # kept with the sweep, and said in the header of the report this run wrote, for whoever reads them later
    runs = json.loads((tmp_path / "jobs" / "conv" / "sweep.json").read_text())["runs"]
    assert runs[-1]["stopped"] == line.split("conv: ", 1)[1] and runs[-1]["finished"] >= runs[-1]["started"]
    page = (tmp_path / "results" / "conv" / "report.html").read_text()
    assert html.escape(runs[-1]["stopped"]) in page


def test_a_learning_sweep_finds_a_near_best_point_of_the_recording_in_a_fraction_of_it(tmp_path):
    rec = recording.load(KT)
    times = sorted(e.measurements[0].mean_ns for e in rec.entries if e.status == Status.OK)
    assert run(tmp_path, t1_space(tmp_path), "--strategy", "learning", "--budget", "24") == 0
    found = min(read_result(tmp_path / "jobs" / "conv" / tag).measurements[0].mean_ns
                for tag, st in measured(tmp_path) if st == Status.OK)
    # 24 of the 64 legal points: random picks would reach the best 5% about 70% of the time
    assert found <= times[max(0, len(times) // 20)], (found, times[:5])


def test_an_interrupted_learning_sweep_resumes_with_the_proposals_it_would_have_made(tmp_path):
    space = t1_space(tmp_path)
    assert run(tmp_path, space, "--strategy", "learning", "--budget", "16", jobs="whole") == 0
    assert run(tmp_path, space, "--strategy", "learning", "--budget", "7", jobs="cut") == 0
    assert run(tmp_path, space, "--strategy", "learning", "--budget", "16", jobs="cut") == 0
    assert [t for t, _ in measured(tmp_path, "cut")] == [t for t, _ in measured(tmp_path, "whole")]


def test_auto_sweeps_a_small_space_whole_and_says_why(tmp_path, capsys):
    assert run(tmp_path, t1_space(tmp_path), "--strategy", "auto") == 0
    err = capsys.readouterr().err
    assert "auto: 64 legal points, at most 64: the whole grid" in err
    assert len(measured(tmp_path)) == 64


def test_auto_learns_on_a_space_over_its_whole_limit(tmp_path, capsys):
    assert run(tmp_path, t1_space(tmp_path), "--strategy", "auto", "--budget", "10", "--strategy-option",
               "whole=20") == 0
    err = capsys.readouterr().err
    assert "auto: 64 legal points, over 20: learning" in err
    assert len(measured(tmp_path)) == 10


def test_learning_keeps_at_most_in_flight_proposals_awaiting_their_results(tmp_path):
    from sweep.plan.learned import LearnedSearch, default_in_flight

    space = target.load(t1_space(tmp_path))
    search = LearnedSearch(space, {"budget": 40, "budget_s": 0, "seed": 0, "in_flight": 3})
    first = search.ask(100)                 # an executor with room for 100 gets 3
    assert len(first) == 3 and search.ask(100) == [] and not search.stopped
    search.tell(first[0], 1000.0)
    assert len(search.ask(100)) == 1        # one result in: one more proposal
    assert (default_in_flight(100), default_in_flight(20), default_in_flight(1000)) == (10, 4, 100)


def test_a_learning_sweep_with_few_proposals_in_flight_still_runs_its_whole_budget(tmp_path):
    assert run(tmp_path, t1_space(tmp_path), "--strategy", "learning", "--budget", "12",
               "--strategy-option", "in_flight=2") == 0
    assert len(measured(tmp_path)) == 12


def test_a_gpu_seconds_budget_sends_one_proposal_first_with_no_cost_to_expect_yet(tmp_path):
    from sweep.plan.learned import LearnedSearch

    space = target.load(t1_space(tmp_path))
    search = LearnedSearch(space, {"budget": 60, "budget_s": 10, "seed": 0, "in_flight": 6})
    first = search.ask(100)
    assert len(first) == 1 and search.ask(100) == [] and not search.stopped
    search.tell(first[0], 1000.0, cost_s=0.5)
    assert len(search.ask(100)) == 6          # 9.5 s left at 0.5 s a configuration: room for all 6


def test_a_gpu_seconds_budget_goes_on_one_at_a_time_while_the_told_configurations_cost_nothing(tmp_path):
    from sweep.plan.learned import LearnedSearch

    space = target.load(t1_space(tmp_path))
    search = LearnedSearch(space, {"budget": 60, "budget_s": 10, "seed": 0, "in_flight": 6})
    search.tell(search.ask(100)[0], None, failure="compile_failed", cost_s=0.0)
    second = search.ask(100)
    assert len(second) == 1 and search.ask(100) == []    # a failed build at 0 s says nothing of the next cost
    search.tell(second[0], 1000.0, cost_s=1.0)
    assert len(search.ask(100)) == 6                      # 9 s left at 0.5 s a configuration on average


def test_a_gpu_seconds_budget_counts_what_the_proposals_in_flight_are_expected_to_cost(tmp_path):
    from sweep.plan.learned import LearnedSearch

    space = target.load(t1_space(tmp_path))
    search = LearnedSearch(space, {"budget": 60, "budget_s": 10, "seed": 0, "in_flight": 6})
    search.tell(search.ask(1)[0], 1000.0, cost_s=2.0)
    wave = search.ask(100)
    assert len(wave) == 4                    # 8 s left at 2 s a configuration
    # 2 s spent and 4 in flight at 2 s each: the budget is expected spent, so no proposal is made
    # (asking until the told seconds reached the budget would have let 6 more start meanwhile)
    search.tell(wave[0], 1000.0, cost_s=2.0)
    assert search.ask(100) == [] and not search.stopped
    for c in wave[1:]:
        search.tell(c, 1000.0, cost_s=2.0)
    assert search.ask(100) == [] and search.stopped == "its budget of 10 GPU-seconds is spent (10.0 s)"


def test_a_gpu_seconds_budget_asks_only_for_what_its_rest_pays_for(tmp_path):
    from sweep.plan.learned import LearnedSearch

    space = target.load(t1_space(tmp_path))
    search = LearnedSearch(space, {"budget": 60, "budget_s": 10, "seed": 0, "in_flight": 6})
    search.tell(search.ask(1)[0], 1000.0, cost_s=1.5)
    second = search.ask(1)
    search.tell(second[0], 1000.0, cost_s=1.5)
    assert len(search.ask(100)) == 4          # 7 s left at 1.5 s a configuration
    assert search.ask(100) == []
    search2 = LearnedSearch(space, {"budget": 60, "budget_s": 4, "seed": 0, "in_flight": 6})
    for _ in range(2):
        search2.tell(search2.ask(100)[0], 1000.0, cost_s=1.5)
    assert search2.ask(100) == [] and search2.stopped == (
        "its budget of 4 GPU-seconds leaves no room for another configuration (3.0 s spent, 1.5 s a configuration "
        "on average)")


# -- a warm start from another recording (start_from, --start-from) ---------------------------
OTHER_GPU = DATA / "convolution_W6600.json.gz"     # the same space brute-forced on another GPU


def fastest_legal(space_path: Path, rec_path: Path, n: int) -> list[dict[str, int]]:
    """The n fastest configurations of a recording that are legal points of the space, read directly."""
    from sweep.space import check, make_config

    s = target.load(space_path)
    swept = {p.macro: set(p.values) for p in s.swept}
    timed = []
    for e in recording.load(rec_path).entries:
        macros = {k.upper(): v for k, v in e.params.items()}
        if e.status != Status.OK or any(macros[m] not in vs for m, vs in swept.items()):
            continue
        c = make_config(s, {m: macros[m] for m in swept})
        if all(c[m] == macros[m] for m in macros if m in {p.macro for p in s.parameters}) and check(s, c) is None:
            timed.append((e.measurements[0].mean_ns, {m: macros[m] for m in swept}))
    return [p for _, p in sorted(timed, key=lambda t: t[0])[:n]]


def macros_measured(tmp_path: Path, name: str = "conv") -> list[dict[str, int]]:
    out = []
    for d in sorted((tmp_path / "jobs" / name).iterdir()):
        if (d / "config.json").is_file():
            m = json.loads((d / "config.json").read_text())["macros"]
            out.append({k: m[k] for k in GRID_MACROS})
    return out


GRID_MACROS = [k.upper() for k in GRID]


def test_a_learning_sweep_started_from_another_gpus_recording_measures_its_fastest_configurations_first(tmp_path,
                                                                                                      capsys):
    space = t1_space(tmp_path)
    assert run(tmp_path, space, "--strategy", "learning", "--budget", "10", "--start-from", str(OTHER_GPU)) == 0
    err = capsys.readouterr().err
    assert "first the declared defaults; then the 9 fastest configurations recorded in convolution_W6600.json.gz" in err
    defaults = {p.macro: p.default for p in target.load(space).swept if p.macro in GRID_MACROS}
    recorded_first = [{m: p[m] for m in GRID_MACROS} for p in fastest_legal(space, OTHER_GPU, 9)]
    assert defaults not in recorded_first     # else the tenth would come from the space-filling start
    want = [defaults] + recorded_first
    got = macros_measured(tmp_path)
    assert sorted(map(sorted, (p.items() for p in got))) == sorted(map(sorted, (p.items() for p in want)))


def test_a_learning_sweep_measures_the_declared_defaults_first_so_its_pick_is_never_slower_than_them(tmp_path,
                                                                                                   capsys):
    space = t1_space(tmp_path)
    defaults = {p.macro: p.default for p in target.load(space).swept}
    assert run(tmp_path, space, "--strategy", "learning", "--budget", "1") == 0
    assert "; first the declared defaults" in capsys.readouterr().err
    assert macros_measured(tmp_path) == [{m: defaults[m] for m in GRID_MACROS}]
    best = json.loads((tmp_path / "results" / "conv" / "best.json").read_text())["choices"][0]
    assert best["values"] == {m: defaults[m] for m in best["values"]} and best["speedup_vs_default"] == 1.0


def test_a_pick_without_a_baseline_job_gets_its_speed_up_over_the_sweeps_own_measurement_of_the_defaults(tmp_path):
    space = t1_space(tmp_path)
    assert run(tmp_path, space, "--strategy", "learning", "--budget", "12") == 0
    best = json.loads((tmp_path / "results" / "conv" / "best.json").read_text())["choices"][0]
    declared = {p.macro: p.default for p in target.load(space).swept}
    defaults = {m: declared[m] for m in best["values"]}
    default = [c for c in best["candidates"] if c["values"] == defaults]
    assert len(default) == 1 and best["values"] != defaults     # the defaults are not this extract's fastest
    assert best["default_ns"] == default[0]["ns"]
    assert best["speedup_vs_default"] == pytest.approx(default[0]["ns"] / best["best"]["ns"])
    assert best["speedup_vs_default"] > 1


def test_defaults_first_off_leaves_the_start_to_the_space_filling_design(tmp_path, capsys):
    space = t1_space(tmp_path)
    defaults = {p.macro: p.default for p in target.load(space).swept if p.macro in GRID_MACROS}
    assert run(tmp_path, space, "--strategy", "learning", "--budget", "8", "--strategy-option", "defaults_first=0",
               "--strategy-option", "seed=1") == 0
    assert "declared defaults" not in capsys.readouterr().err
    assert defaults not in macros_measured(tmp_path)


def test_a_warm_started_sweep_resumes_with_the_proposals_it_would_have_made(tmp_path):
    space = t1_space(tmp_path)
    warm = ("--strategy", "learning", "--start-from", str(OTHER_GPU))
    assert run(tmp_path, space, *warm, "--budget", "16", jobs="whole") == 0
    assert run(tmp_path, space, *warm, "--budget", "6", jobs="cut") == 0
    assert run(tmp_path, space, *warm, "--budget", "16", jobs="cut") == 0
    assert [t for t, _ in measured(tmp_path, "cut")] == [t for t, _ in measured(tmp_path, "whole")]


def test_a_start_from_the_strategy_cannot_take_or_a_recording_it_cannot_read_is_refused_in_one_line(tmp_path,
                                                                                                     capsys):
    space = t1_space(tmp_path)
    assert run(tmp_path, space, "--start-from", str(OTHER_GPU)) == 1       # the T1 space's grid
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--start-from" in err and "strategy grid takes no start from" in err
    assert run(tmp_path, space, "--strategy", "learning", "--start-from", str(tmp_path / "missing.json")) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"start_from {tmp_path / 'missing.json'}: No such file" in err
    assert not (tmp_path / "jobs" / "conv").exists() or not list((tmp_path / "jobs" / "conv").glob("*/result.json"))


def test_a_start_from_in_the_space_file_is_read_from_the_files_folder():
    from sweep.pipeline import recorded

    space = target.load(DATA / "convolution_milo.T1.json")
    assert recorded.recording_path(space, "convolution_W6600.json.gz") == OTHER_GPU
    assert recorded.recording_path(space, str(OTHER_GPU)) == OTHER_GPU
    # a file it cannot read is named as start_from gave it, not as replay's --from, however the path is written
    import dataclasses
    from sweep.core.errors import SweepError
    from sweep.space import Strategy

    missing = dataclasses.replace(space, strategy=Strategy("learning", {"start_from": "../benchmark_spaces/none.json"}))
    with pytest.raises(SweepError) as e:
        recorded.start_points(missing)
    assert str(e.value).startswith(f"start_from {DATA / 'none.json'}: No such file") and "--from" not in str(e.value)


def test_validate_says_where_a_warm_start_comes_from(tmp_path, capsys):
    space = t1_space(tmp_path)
    assert cli.main(["validate", str(space), "--strategy", "learning", "--start-from", str(OTHER_GPU)]) == 0
    assert ("first the declared defaults; then the 9 fastest configurations recorded in convolution_W6600.json.gz"
            in capsys.readouterr().out)


def test_a_parameter_declared_a_choice_reaches_the_model_as_one_and_a_size_from_0_as_ordered(tmp_path):
    from sweep.plan.learned import LearnedSearch

    space = tmp_path / "space.yaml"
    space.write_text("name: kinds\ntarget: {name: t, dir: ., profile: [\"{build}/t\"]}\nstrategy: learning\nparameters:\n"
                     "  FORM: {type: choice, values: [0, 1, 2], kernels: [k]}\n"
                     "  UNROLL: {values: [0, 1, 2], min: 0, kernels: [k]}\n"
                     "  BLOCK: {values: [32, 64], kernels: [k]}\n")
    (tmp_path / "Makefile").write_text("all:\n")
    dims = {d.name: d for d in LearnedSearch(target.load(space)).model.dims}
    assert dims["FORM"].is_choice() and not dims["UNROLL"].is_choice() and not dims["BLOCK"].is_choice()


def chain_space(tmp_path: Path, rule: str = "{a} + {b} <= 1") -> Path:
    """Eight parameters of ten values (a 10^8-point grid, one group: each rule reads two neighbours);
    with the default rule the legal points are the 0/1 strings with no two 1s side by side: 55."""
    names = [f"p{i}" for i in range(8)]
    t1 = {"General": {"BenchmarkName": "chain"}, "KernelSpecification": {"KernelName": "chain"},
          "ConfigurationSpace": {
              "TuningParameters": [{"Name": n, "Type": "int", "Values": "list(range(10))", "Default": 0} for n in names],
              "Conditions": [{"Expression": rule.format(a=a, b=b), "Parameters": [a, b]}
                             for a, b in zip(names, names[1:])]}}
    path = tmp_path / "chain.T1.json"
    path.write_text(json.dumps(t1))
    return path


def test_a_legal_set_too_sparse_for_random_points_is_searched_by_its_rules_and_every_proposal_is_legal(tmp_path):
    from sweep.plan.learned import LearnedSearch
    from sweep.space import check

    space = target.load(chain_space(tmp_path))
    search = LearnedSearch(space, {**REGISTRY["learning"].values(space.strategy), "budget": 30, "patience": 0})
    assert search.legal is None                 # 10^8 points in one group: not enumerated, sampled
    proposed = []
    while (configs := search.ask(1)):
        for c in configs:
            proposed.append(c)
            search.tell(c, 1000.0 + 10 * sum(c[m] * (i + 1) for i, m in enumerate(c.as_dict())))
    assert len(proposed) == 30 == len({c for c in proposed})
    assert all(check(space, c) is None for c in proposed)
    assert search.stopped == "its budget of 30 evaluations is spent"


def test_a_model_per_group_searches_a_group_too_large_to_list_by_its_rules_beside_a_listed_one(tmp_path):
    """A 10^8-point chain of tile macros (55 legal) governing one kernel, and a block size
    governing another: the chain is searched by its rules and sampler, the block size walked whole,
    and every build is legal."""
    from sweep.plan.learned import LearnedSearch
    from sweep.space import check

    names = [f"P{i}" for i in range(8)]
    rules = "".join(f"  - \"{a} + {b} <= 1\"\n" for a, b in zip(names, names[1:]))
    params = "".join(f"  {n}: {{values: [{', '.join(map(str, range(10)))}], min: 0, kernels: [chain]}}\n" for n in names)
    space = tmp_path / "space.yaml"
    space.write_text("name: two\ntarget: {name: t, dir: ., profile: [\"{build}/t\"]}\nstrategy: learning\nparameters:\n"
                     + params + "  BLOCK: {values: [32, 64, 128, 256], kernels: [block]}\nconstraints:\n" + rules)
    (tmp_path / "Makefile").write_text("all:\n")
    sp = target.load(space)
    search = LearnedSearch(sp, {**REGISTRY["learning"].values(sp.strategy), "budget": 12, "patience": 0})
    assert "a model per parameter group (2: a 100,000,000-point grid x 4)" in search.note
    proposed = []
    while (configs := search.ask(2)):
        for c in configs:
            proposed.append(c)
            search.tell(c, 1.0, parts={tuple(names): 10.0 + sum(c[n] for n in names), ("BLOCK",): c["BLOCK"] / 32})
    assert len(proposed) == 12 and all(check(sp, c) is None for c in proposed)
    assert len({tuple(c[n] for n in names) for c in proposed}) == 12
    assert sorted({c["BLOCK"] for c in proposed}) == [32, 64, 128, 256]


def test_a_grid_whose_rules_leave_nothing_stops_saying_no_legal_point_was_found_not_that_all_were_measured(tmp_path):
    from sweep.plan.learned import LearnedSearch

    space = target.load(chain_space(tmp_path, "{a} + {b} < 0"))
    search = LearnedSearch(space, {**REGISTRY["learning"].values(space.strategy), "budget": 10})
    assert search.ask(1) == []
    assert search.stopped.startswith("no untried legal point was found")


def test_a_recording_whose_fastest_hold_the_declared_defaults_proposes_them_once_and_counts_them_once(tmp_path):
    from sweep.plan.learned import SPEC, LearnedSearch

    space = target.load(t1_space(tmp_path))
    defaults = {p.macro: p.default for p in space.swept}
    first, second = ({**defaults, **{m: p[m] for m in GRID_MACROS}} for p in fastest_legal(space.path, OTHER_GPU, 2))
    search = LearnedSearch(space, {**SPEC.values(space.strategy), "start_from": "rec.json", "budget": 20},
                           start=[first, defaults, second])     # the recording's second fastest: the defaults
    assert "first the declared defaults; then the 2 fastest configurations recorded in rec.json" in search.note
    asked = [c.as_dict() for c in search.ask(3)]
    assert [{m: a[m] for m in defaults} for a in asked] == [defaults, first, second]


TOY = Path(__file__).resolve().parents[1] / "data"


def toy_run(tmp_path: Path, *extra: str, jobs: str = "jobs", strategy: str = "learning") -> int:
    """The toy (tests/data/toy_space.yaml: two groups of 5 and 4 legal combinations, governing two
    kernels timed apart) replayed from its recorded grid; learning's defaults unless `extra` says."""
    if not (tmp_path / "toy.yaml").exists():
        (tmp_path / "toy.yaml").write_text((TOY / "toy_space.yaml").read_text())
        shutil.copytree(TOY / "toy_target", tmp_path / "toy_target")
    return cli.main(["run", str(tmp_path / "toy.yaml"), "--executor", "replay", "--from", str(TOY / "toy_results" / "toy"),
                     "--strategy", strategy, "--no-report", "--no-confirm",
                     "--jobs-dir", str(tmp_path / jobs), "--results-dir", str(tmp_path / "results"), *extra])


def toy_picks(folder: Path) -> dict[tuple[str, ...], dict]:
    return {tuple(c["kernels"]): c["values"] for c in json.loads((folder / "best.json").read_text())["choices"]}


def test_a_model_per_group_measures_every_groups_values_in_as_many_builds_as_its_largest_group_has(tmp_path, capsys):
    """The toy's two groups (5 block sizes, 4 block shapes) govern two kernels timed apart: 5 builds
    measure every value of each, and the picks are the whole 20-point grid's (the recording's)."""
    assert toy_run(tmp_path, "--budget", "20") == 0
    out = "".join(capsys.readouterr())
    assert "a model per parameter group (2: 5 x 4 legal)" in out
    assert "learning stopped after 5 evaluations: every group's model has stopped" in out
    assert len(measured(tmp_path, name="toy")) == 5
    assert toy_picks(tmp_path / "results" / "toy") == toy_picks(TOY / "toy_results" / "toy")


def test_one_model_of_the_summed_time_is_what_per_group_false_asks_for(tmp_path, capsys):
    assert toy_run(tmp_path, "--budget", "8", "--strategy-option", "per_group=false") == 0
    out = "".join(capsys.readouterr())
    assert "learning: 20 legal points; at most 8 evaluations" in out
    assert "a model per parameter group" not in out


def test_auto_sweeps_groups_small_enough_to_sweep_whole_factorized_and_says_why(tmp_path, capsys):
    """Over `whole` legal points in all, but no group has more than `whole`: every combination of
    every group, in as many builds as the largest group has: the factorized strategy's 5 builds of 20."""
    assert toy_run(tmp_path, "--strategy-option", "whole=5", strategy="auto", jobs="auto") == 0
    out = "".join(capsys.readouterr())
    assert ("auto: 20 legal points in 2 groups of macros read by different kernels, each of at most 5 legal "
            "combinations: every combination of each group (factorized: 2 groups with 5*4 legal combinations; "
            "5 builds") in out
    assert toy_run(tmp_path, jobs="factorized", strategy="factorized") == 0
    assert len(measured(tmp_path, "auto", "toy")) == 5
    assert measured(tmp_path, "auto", "toy") == measured(tmp_path, "factorized", "toy")


def test_auto_learns_a_model_per_group_where_a_group_is_too_large_to_sweep_whole(tmp_path, capsys):
    assert toy_run(tmp_path, "--strategy-option", "whole=4", strategy="auto") == 0
    out = "".join(capsys.readouterr())
    assert "auto: 20 legal points, over 4: learning: 20 legal points; a model per parameter group (2: 5 x 4 legal)" in out
    assert len(measured(tmp_path, name="toy")) == 5


def test_an_interrupted_per_group_sweep_resumes_with_the_builds_it_would_have_made(tmp_path):
    assert toy_run(tmp_path, "--budget", "20", jobs="whole") == 0
    assert toy_run(tmp_path, "--budget", "2", jobs="cut") == 0
    assert toy_run(tmp_path, "--budget", "20", jobs="cut") == 0
    assert [t for t, _ in measured(tmp_path, "cut", "toy")] == [t for t, _ in measured(tmp_path, "whole", "toy")]
