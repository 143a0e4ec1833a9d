"""`config-sweep choose` (sweep.pipeline.choose): strategies replayed from a recording, no GPU."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import pytest

from sweep import cli
from sweep.dispatch import recording, replay
from sweep.pipeline import choose, recorded
from sweep.records import Status
from sweep.space import target
from tests.dispatch.test_replay import BENCH, DATA, GRID, KT, MISSING, t1_space

W6600 = BENCH / "convolution_W6600.json.gz"       # every configuration of the W6600 space, "time" only
MACROS = ["block_size_x", "block_size_y", "tile_size_x", "tile_size_y", "read_only", "use_padding", "use_shmem"]


def recorded_best_ns(path: Path, values: dict[str, list[int]]) -> float:
    """The fastest recorded time (ns) among configurations with these parameter values, read from the file alone."""
    rec = recording.load(path)
    return min(e.measurements[0].total_median_ns for e in rec.entries
               if e.status == Status.OK and all(e.params[n] in v for n, v in values.items()))


def test_the_reference_is_the_recordings_best_legal_configuration_and_says_when_that_is_the_optimum(tmp_path):
    space = target.load(t1_space(tmp_path))
    idx = replay.index(space, KT)
    ref = choose.reference(space, idx, recorded.answerer(space, idx))
    assert ref.best_ns == pytest.approx(recorded_best_ns(KT, GRID))
    assert (ref.legal, ref.recorded_legal) == (64, 62)          # the extract lacks two points of the grid
    out = choose.lines(space, KT, ref, [], [10])
    assert "62 of them recorded (97%)" in out[0] and "the best recorded (not a proven optimum)" in out[1]


def test_the_recordings_cost_is_told_by_kind_so_compile_seconds_are_not_read_as_gpu_time(tmp_path):
    space = target.load(t1_space(tmp_path))
    idx = replay.index(space, KT)
    ref = choose.reference(space, idx, recorded.answerer(space, idx))
    held = {tuple(e[m] for m in MACROS): e for e in json.loads(gzip.open(KT).read())["cache"].values()}
    held = [e for k, e in held.items() if all(v in GRID[m] for m, v in zip(MACROS, k) if m in GRID)]
    assert len(held) == 62
    for kind, field in (("compile", "compile_time"), ("runs", "benchmark_time"), ("framework", "framework_time")):
        assert ref.recording_costs[kind] == pytest.approx(sum(e[field] for e in held) / 1e3)
    fields = ("compile_time", "benchmark_time", "framework_time", "verification_time")
    assert ref.recording_cost_s == pytest.approx(sum(e[f] for e in held for f in fields) / 1e3)   # every kind, together
    line = choose.lines(space, KT, ref, [], [10])[1]
    assert f"({replay.cost_parts(ref.recording_costs, ',.0f', skip_zero=True)})" in line
    assert line.index("compile") < line.index("runs") and "verify" not in line     # none recorded: not told


def test_every_answer_is_the_recordings_and_a_seed_replays_the_same_run(tmp_path):
    space = target.load(t1_space(tmp_path))
    idx = replay.index(space, KT)
    answer = recorded.answerer(space, idx)
    one = choose.replay_run(choose.strategy_space(space, "learning", 3, 30), answer, 30, 4)
    again = choose.replay_run(choose.strategy_space(space, "learning", 3, 30), answer, 30, 4)
    assert one == again and len(one[0]) == 30
    rec = {tuple(e.params[n] for n in MACROS): e for e in recording.load(KT).entries}
    for a in one[0]:
        assert a.recorded == (a.failure != "skipped")
    # the two points the extract lacks come back "skipped", costing nothing, never with a time
    plan = choose.replay_run(choose.strategy_space(space, "grid", 0, 64), answer, 64, 64)[0]
    lacking = [a for a in plan if not a.recorded]
    assert len(plan) == 64 and len(lacking) == len(MISSING)
    assert all(a.objective_ns is None and a.cost_s == 0.0 and a.failure == "skipped" for a in lacking)
    assert sum(a.cost_s for a in plan) == pytest.approx(
        sum(e.cost_s for k, e in rec.items() if all(v in GRID[n] for n, v in zip(MACROS, k))))


def test_recorded_failures_reach_the_strategy_with_their_kind(tmp_path):
    values = {"block_size_x": [32], "block_size_y": [16], "tile_size_x": [3, 4], "tile_size_y": [1, 4],
              "read_only": [1], "use_padding": [0], "use_shmem": [0]}
    space = target.load(t1_space(tmp_path, values))
    answer = recorded.answerer(space, replay.index(space, KT))
    got = choose.replay_run(choose.strategy_space(space, "grid", 0, 4), answer, 4, 4)[0]
    assert sorted(str(a.failure) for a in got) == ["runtime_failed", "runtime_failed", "skipped", "skipped"]


def test_choose_prints_a_row_per_strategy_and_the_lowest_median_at_each_budget(tmp_path, capsys):
    space = t1_space(tmp_path, {n: v for n, v in GRID.items()})
    rc = cli.main(["choose", str(space), "--from", str(KT), "--strategies", "learning,random,grid", "--seeds", "3",
                   "--budgets", "5,20,64", "--json", str(tmp_path / "runs.json")])
    out = capsys.readouterr().out
    assert rc == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()[:1] in (["learning"], ["random"], ["grid"])}
    assert [rows[n].split()[1] for n in ("learning", "random", "grid")] == ["3", "3", "1"]   # grid takes no seed
    data = json.loads((tmp_path / "runs.json").read_text())
    ref = data["reference"]["best_ns"]
    # the grid run measures every legal point: at its full budget it holds the reference itself
    grid = next(r for r in data["runs"] if r["strategy"] == "grid")
    assert min(t for t in grid["objective_ns"] if t is not None) == ref and len(grid["objective_ns"]) == 64
    assert "1.000 [ 1.000,  1.000]" in rows["grid"]
    # the table's medians are the runs' own: learning's best@20
    learning = [r for r in data["runs"] if r["strategy"] == "learning"]
    bests = sorted(min([t for t in r["objective_ns"][:20] if t is not None], default=math.inf) / ref for r in learning)
    assert rows["learning"].split("[")[1].split("]")[1].split()[0] == f"{bests[1]:.3f}"
    assert "lowest median best-found / reference: at 5," in out
    # the proposals the extract could not answer are counted, out of all the runs made
    missing = sum(not x for r in data["runs"] for x in r["recorded"])
    asked = sum(len(r["recorded"]) for r in data["runs"])
    assert missing >= 2 and f"{missing} of the {asked} proposals" in out   # the grid alone asks for both


def test_the_optimum_of_a_whole_recording_is_named_and_strategies_reach_it(tmp_path, capsys):
    rc = cli.main(["choose", str(BENCH / "convolution_milo.T1.json"), "--from", str(W6600), "--strategies", "learning",
                   "--seeds", "2", "--budgets", "10,40"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "4,362 legal configurations, all of them recorded" in out and "reference: the optimum" in out
    assert "BLOCK_SIZE_X=128 BLOCK_SIZE_Y=1 TILE_SIZE_X=1 TILE_SIZE_Y=4" in out   # W6600's brute-forced optimum


def test_a_warm_start_from_another_recording_runs_beside_the_cold_one_and_starts_at_that_recordings_best(tmp_path,
                                                                                                       capsys):
    A4000 = BENCH / "convolution_A4000.json.gz"
    rc = cli.main(["choose", str(BENCH / "convolution_milo.T1.json"), "--from", str(W6600), "--start-from", str(A4000),
                   "--strategies", "learning,random", "--seeds", "2", "--budgets", "5,20", "--jobs", "1",
                   "--json", str(tmp_path / "runs.json")])
    out = capsys.readouterr().out
    assert rc == 0
    names = [line.split()[0] for line in out.splitlines() if line.split()[:1] and line.split()[0].startswith(
        ("learning", "random"))]
    assert names == ["learning", "learning+start", "random"]          # random takes no warm start: run cold only
    assert "+start: the same strategy, its first proposals after the declared defaults the fastest legal " \
           "configurations recorded in convolution_A4000.json.gz" in out
    runs = json.loads((tmp_path / "runs.json").read_text())["runs"]
    warm = [r for r in runs if r["strategy"] == "learning+start"]
    # the T1 file's declared defaults first, in every run; then, warm, A4000's fastest configuration,
    # answered from the W6600 recording
    w6600 = {tuple(e.params[n] for n in MACROS): e for e in recording.load(W6600).entries}
    declared = target.load(BENCH / "convolution_milo.T1.json").declared_defaults(n.upper() for n in MACROS)
    default = w6600[tuple(declared[n.upper()] for n in MACROS)].measurements[0].total_median_ns
    a4000_best = min((e for e in recording.load(A4000).entries if e.status == Status.OK),
                     key=lambda e: e.measurements[0].total_median_ns)
    second = w6600[tuple(a4000_best.params[n] for n in MACROS)].measurements[0].total_median_ns
    assert default != pytest.approx(second)
    assert all(r["objective_ns"][0] == pytest.approx(default) for r in runs if r["strategy"].startswith("learning"))
    assert len(warm) == 2 and all(r["objective_ns"][1] == pytest.approx(second) for r in warm)
    cold = [r for r in runs if r["strategy"] == "learning"]
    assert all(r["objective_ns"][1] != pytest.approx(second) for r in cold)


def test_a_start_from_no_strategy_can_take_is_refused_in_one_line(tmp_path, capsys):
    rc = cli.main(["choose", str(t1_space(tmp_path)), "--from", str(KT), "--strategies", "random,grid",
                   "--start-from", str(W6600)])
    err = capsys.readouterr().err
    assert rc == 1 and "--start-from" in err and "none of random, grid takes a warm start" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    (["--strategies", "learning,annealing"], "--strategies annealing: not a strategy; choose from"),
    (["--seeds", "0"], "--seeds, --parallel, --jobs and every budget must be at least 1"),
    (["--jobs", "0"], "--seeds, --parallel, --jobs and every budget must be at least 1"),
])
def test_bad_choices_are_refused_in_one_line_before_any_run(tmp_path, capsys, args, message):
    rc = cli.main(["choose", str(t1_space(tmp_path)), "--from", str(KT), *args])
    err = capsys.readouterr().err
    assert rc == 1 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_an_existing_json_file_is_never_overwritten(tmp_path, capsys):
    kept = tmp_path / "mine.json"
    kept.write_text("precious")
    rc = cli.main(["choose", str(t1_space(tmp_path)), "--from", str(KT), "--json", str(kept)])
    assert rc == 1 and "choose never overwrites a file" in capsys.readouterr().err and kept.read_text() == "precious"


def test_an_earlier_sweeps_results_replay_the_strategies_on_its_own_measurements(tmp_path, capsys):
    shutil.copy(DATA / "toy_space.yaml", tmp_path / "toy.yaml")
    shutil.copytree(DATA / "toy_target", tmp_path / "toy_target")
    rc = cli.main(["choose", str(tmp_path / "toy.yaml"), "--from", str(DATA / "toy_results" / "toy"),
                   "--strategies", "grid", "--budgets", "1000"])
    out = capsys.readouterr().out
    assert rc == 0 and "(sweep" in out.splitlines()[0]
    grid = next(line for line in out.splitlines() if line.startswith("grid"))
    assert "1.000 [ 1.000,  1.000]" in grid          # the grid holds the recording's best


def test_runs_on_several_processes_are_the_runs_of_one(tmp_path):
    space = target.load(t1_space(tmp_path))
    one = choose.compare(space, KT, ("learning", "random"), seeds=2, budgets=(12,), jobs=1)
    two = choose.compare(space, KT, ("learning", "random"), seeds=2, budgets=(12,), jobs=2)
    assert one == two and [(r.strategy, r.seed) for r in two[1]] == [("learning", 0), ("learning", 1), ("random", 0),
                                                                       ("random", 1)]


def test_each_budget_runs_every_budget_on_its_own_and_reads_each_column_from_the_runs_told_it(tmp_path, capsys):
    space_path = t1_space(tmp_path)
    rc = cli.main(["choose", str(space_path), "--from", str(KT), "--strategies", "learning", "--seeds", "3",
                   "--budgets", "8,30", "--each-budget", "--jobs", "1", "--json", str(tmp_path / "runs.json")])
    out = capsys.readouterr().out
    assert rc == 0 and "runs told that budget (--each-budget)" in out
    data = json.loads((tmp_path / "runs.json").read_text())
    assert data["each_budget"] is True
    assert sorted((r["budget"], r["seed"]) for r in data["runs"]) == [(8, 0), (8, 1), (8, 2), (30, 0), (30, 1), (30, 2)]
    # a run told 8 is the run a sweep with `budget: 8` makes (the strategy plans for it), not a prefix of one of 30
    space = target.load(space_path)
    answer = recorded.answerer(space, replay.index(space, KT))
    for r in data["runs"]:
        told = choose.strategy_space(space, "learning", r["seed"], r["budget"])
        mine = choose.replay_run(told, answer, r["budget"], 10)
        assert r["objective_ns"] == [a.objective_ns for a in mine[0]]
    # the table's best@8 is the median of the runs told 8; the runs told 30 give best@30
    ref = data["reference"]["best_ns"]
    row = next(line for line in out.splitlines() if line.startswith("learning"))
    for budget, cell in ((8, row.split()[2]), (30, row.split("]")[1].split()[0])):
        bests = sorted(min([t for t in r["objective_ns"] if t is not None], default=math.inf) / ref
                       for r in data["runs"] if r["budget"] == budget)
        assert cell == f"{bests[1]:.3f}"


def test_by_default_every_run_is_told_the_largest_budget_and_says_so(tmp_path, capsys):
    rc = cli.main(["choose", str(t1_space(tmp_path)), "--from", str(KT), "--strategies", "random", "--seeds", "2",
                   "--budgets", "4,9", "--jobs", "1", "--json", str(tmp_path / "runs.json")])
    out = capsys.readouterr().out
    data = json.loads((tmp_path / "runs.json").read_text())
    assert rc == 0 and data["each_budget"] is False and {r["budget"] for r in data["runs"]} == {9}
    assert "every run was told 9, the smaller budgets read off its first evaluations" in out


def test_a_recording_that_ranked_by_another_objective_is_noted_above_the_table(tmp_path, capsys):
    import gzip
    data = json.loads(gzip.open(KT).read())
    data["objective"] = "GFLOP/s"
    rate = tmp_path / "rate.json"
    rate.write_text(json.dumps(data))
    rc = cli.main(["choose", str(t1_space(tmp_path)), "--from", str(rate), "--strategies", "random", "--seeds", "1",
                   "--budgets", "5", "--jobs", "1"])
    out = capsys.readouterr().out
    assert rc == 0 and "note: rate.json declares its objective as 'GFLOP/s'" in out.split("strategy")[0]
    assert "smaller budgets" not in out           # one budget: nothing read off a longer run


def test_a_recordings_own_words_reach_the_terminal_escaped(tmp_path, capsys):
    import gzip
    data = json.loads(gzip.open(KT).read())
    data["device_name"] = "A4000\x1b]0;owned\x07"
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(data))
    assert recording.load(odd).device == "A4000\x1b]0;owned\x07"
    rc = cli.main(["choose", str(t1_space(tmp_path)), "--from", str(odd), "--strategies", "random", "--seeds", "1",
                   "--budgets", "5", "--jobs", "1"])
    out = capsys.readouterr().out
    assert rc == 0 and "\x1b" not in out and "A4000\\x1b]0;owned\\x07" in out


def test_the_start_line_names_the_defaults_only_where_the_warm_strategy_proposes_them(tmp_path, capsys):
    examples = Path(__file__).resolve().parents[2] / "examples" / "tiled_gemm"
    data = Path(__file__).resolve().parents[2] / "bench" / "data"
    text = (examples / "space_large.yaml").read_text().replace("  dir: .\n", f"  dir: {examples}\n")
    for strategy, said in (("learning", True), ("{name: learning, defaults_first: false}", False)):
        space = tmp_path / f"{said}.yaml"
        space.write_text(text.replace("strategy: grid\n", f"strategy: {strategy}\n"))
        assert cli.main(["choose", str(space), "--from", str(data / "tiled_gemm_large_H200.json.gz"), "--start-from",
                         str(data / "tiled_gemm_large_H100.json.gz"), "--strategies", "learning", "--seeds", "1",
                         "--budgets", "3", "--jobs", "1"]) == 0
        out = capsys.readouterr().out
        assert "+start: the same strategy, its first proposals" in out
        assert ("its first proposals after the declared defaults the fastest" in out) == said
