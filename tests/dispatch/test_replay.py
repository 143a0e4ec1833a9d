"""The replay executor (sweep.dispatch.replay) and its recordings (sweep.dispatch.recording): no GPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sweep import cli
from sweep.decide import collect as collect_mod
from sweep.dispatch import recording, replay
from sweep.records import Status, read_result

DATA = Path(__file__).resolve().parents[1] / "data"
BENCH = DATA / "benchmark_spaces"
KT = BENCH / "A4000_extract.json.gz"
T4 = BENCH / "A4000_T4_extract.json"
# The extract's grid (tests/data/benchmark_spaces/README.md) and the two points it leaves out
GRID = {"block_size_x": [16, 32], "block_size_y": [1, 2], "tile_size_x": [1, 2], "tile_size_y": [1, 2],
        "read_only": [0, 1], "use_padding": [0], "use_shmem": [0, 1]}
MISSING = [(16, 1, 1, 2, 0, 0, 1), (32, 1, 2, 1, 0, 0, 0)]


def t1_space(tmp_path: Path, values: dict[str, list[int]] | None = None, name: str = "conv") -> Path:
    """The convolution T1 space cut to `values` (default: the extract's grid), as tmp_path/NAME.T1.json."""
    t1 = json.loads((BENCH / "convolution_milo.T1.json").read_text())
    t1["General"]["BenchmarkName"] = name
    for p in t1["ConfigurationSpace"]["TuningParameters"]:
        if p["Name"] in (values or GRID):
            p["Values"] = str((values or GRID)[p["Name"]])
            p["Default"] = (values or GRID)[p["Name"]][0]
    path = tmp_path / f"{name}.T1.json"
    path.write_text(json.dumps(t1))
    return path


def run(tmp_path: Path, space: Path, source: Path, *extra: str) -> int:
    return cli.main(["run", str(space), "--executor", "replay", "--from", str(source), "--no-report",
                     "--jobs-dir", str(tmp_path / "jobs"), "--results-dir", str(tmp_path / "results"), *extra])


def test_a_kernel_tuner_cache_reads_times_samples_failures_and_costs():
    rec = recording.load(KT)
    assert rec.kind == "kernel_tuner" and rec.device == "NVIDIA RTX A4000" and rec.kernel == "convolution_kernel"
    by = {tuple(e.params[n] for n in GRID): e for e in rec.entries}
    ok = by[(16, 1, 1, 1, 0, 0, 0)]
    m = ok.measurements[0]
    assert ok.status == Status.OK and m.mean_ns == pytest.approx(5.900492995977402e6)   # "time", ms -> ns
    assert len(m.iter_total_ns) == 32 and m.iter_total_ns[0] == pytest.approx(5.302271842956543e6)
    # compile 892.9 + benchmark 190.5 + verification 0 + framework 81.5 ms; strategy_time is not the GPU's
    assert ok.cost_s == pytest.approx((892.914007185027 + 190.531549975276 + 81.5494388807565) / 1e3)
    statuses = sorted(str(e.status) for e in rec.entries if e.status != Status.OK)
    assert statuses == ["compile_failed", "compile_failed", "runtime_failed", "runtime_failed"]
    failed = next(e for e in rec.entries if e.status == Status.COMPILE_FAILED)
    assert "CompilationFailedConfig" in failed.reason and not failed.measurements and failed.cost_s > 0


def test_a_t4_file_reads_as_the_same_recording_as_its_kernel_tuner_cache():
    kt, t4 = recording.load(KT), recording.load(T4)
    assert t4.kind == "t4" and len(t4.entries) == len(kt.entries) == 66
    a = {tuple(sorted(e.params.items())): e for e in kt.entries}
    for e in t4.entries:
        k = a[tuple(sorted(e.params.items()))]
        assert e.status == k.status
        if e.status == Status.OK:
            assert e.measurements[0].mean_ns == pytest.approx(k.measurements[0].mean_ns)
            assert e.measurements[0].iter_total_ns == pytest.approx(k.measurements[0].iter_total_ns)
            # T4 keeps the runs' own times, not Kernel Tuner's benchmark_time (which also counts the launch overhead)
            assert e.costs["runs"] == pytest.approx(sum(e.measurements[0].iter_total_ns) / 1e9)
            assert e.costs["compile"] == pytest.approx(k.costs["compile"])


def test_a_file_that_is_no_recording_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"foo": 1}')
    with pytest.raises(Exception, match="neither a Kernel Tuner cache"):
        recording.load(bad)


def test_replaying_a_t1_space_from_a_kernel_tuner_cache_answers_every_point_from_it(tmp_path, capsys):
    assert run(tmp_path, t1_space(tmp_path), KT, "--no-confirm") == 0
    err = capsys.readouterr().err
    c = collect_mod.collect(tmp_path / "jobs" / "conv").configs
    sweep = c[c["role"] == "sweep"]
    assert len(sweep) == 64 and (sweep["status"] == "ok").sum() == 62
    missing = sweep[sweep["status"] == "skipped"]
    assert set(missing["reason"]) == {"not in the recording (A4000_extract.json.gz)"}
    macros = ["BLOCK_SIZE_X", "BLOCK_SIZE_Y", "TILE_SIZE_X", "TILE_SIZE_Y", "READ_ONLY", "USE_PADDING", "USE_SHMEM"]
    assert sorted(tuple(int(v) for v in r) for r in missing[macros].itertuples(index=False)) == sorted(MISSING)
    # the cost: what the recording says the 62 found configurations took, summed; nothing for the missing
    rec = recording.load(KT)
    want = sum(e.cost_s for e in rec.entries if e.status == Status.OK and all(e.params[n] in v for n, v in GRID.items()))
    assert sweep["total_s"].fillna(0).sum() == pytest.approx(want)
    assert f"{want:.1f} GPU seconds as recorded" in err and "(2 not in the recording)" in err
    job = tmp_path / "jobs" / "conv" / sweep[sweep["status"] == "ok"]["tag"].iloc[0]
    r = read_result(job)
    assert r.measurements[0].kernel == "convolution_kernel" and r.env["gpu"] == "NVIDIA RTX A4000"


def test_a_cache_declaring_another_objective_than_time_is_noted_once(tmp_path, capsys):
    import gzip
    data = json.loads(gzip.open(KT).read())
    data["objective"] = "GFLOP/s"
    rate = tmp_path / "rate.json"
    rate.write_text(json.dumps(data))
    assert recording.load(rate).objective == "GFLOP/s" and recording.load(KT).objective == "time"
    assert run(tmp_path / "a", t1_space(tmp_path), rate, "--no-confirm") == 0
    err = capsys.readouterr().err
    assert err.count("note: rate.json declares its objective as 'GFLOP/s'") == 1
    assert "the fastest configuration" in err
    assert run(tmp_path / "b", t1_space(tmp_path), KT, "--no-confirm") == 0
    assert "declares its objective" not in capsys.readouterr().err


def test_recorded_failures_come_back_with_their_kind(tmp_path):
    values = {"block_size_x": [32], "block_size_y": [16], "tile_size_x": [3, 4], "tile_size_y": [1, 4],
              "read_only": [1], "use_padding": [0], "use_shmem": [0]}
    assert run(tmp_path, t1_space(tmp_path, values), KT, "--no-confirm") == 3    # nothing measured
    c = collect_mod.collect(tmp_path / "jobs" / "conv").configs.set_index(["TILE_SIZE_X", "TILE_SIZE_Y"])
    assert c.loc[(3, 4), "status"] == "runtime_failed" and "RuntimeFailedConfig" in c.loc[(3, 4), "reason"]
    assert c.loc[(4, 1), "status"] == "runtime_failed"
    assert c.loc[(3, 1), "status"] == "skipped" and c.loc[(3, 1), "reason"].startswith("not in the recording")


def test_replaying_from_t4_results_picks_what_the_kernel_tuner_cache_picks(tmp_path, capsys):
    assert run(tmp_path / "a", t1_space(tmp_path), KT) == 0
    a = json.loads((tmp_path / "a" / "results" / "conv" / "best.json").read_text())
    assert run(tmp_path / "b", t1_space(tmp_path), T4) == 0
    b = json.loads((tmp_path / "b" / "results" / "conv" / "best.json").read_text())
    assert a["config"] == b["config"]
    # the baseline (the space's defaults) and the combined best were replayed too
    conf = json.loads((tmp_path / "b" / "results" / "conv" / "confirmation.json").read_text())
    assert conf["best_total_ns"] and conf["default_total_ns"]


def test_replaying_a_previous_sweeps_results_gives_back_its_measurements(tmp_path):
    space = DATA / "toy_space.yaml"
    shutil.copy(space, tmp_path / "toy.yaml")
    shutil.copytree(DATA / "toy_target", tmp_path / "toy_target")
    assert run(tmp_path, tmp_path / "toy.yaml", DATA / "toy_results" / "toy", "--no-confirm") == 0
    got = collect_mod.collect(tmp_path / "jobs" / "toy")
    old = collect_mod.load_tables(DATA / "toy_results" / "toy")
    key = ["ALPHA_BLOCK", "BETA_X", "BETA_Y", "kernel"]
    merged = got.measurements.merge(old.measurements[old.measurements["role"] == "sweep"], on=key)
    assert len(merged) == len(got.measurements) > 0
    assert (merged["median_ns_x"] == merged["median_ns_y"]).all()
    skipped = got.configs[got.configs["status"] == "skipped"]
    assert skipped["reason"].str.contains("static_assert").all() and len(skipped) > 0   # recorded, not invented


def test_replaying_a_previous_sweeps_job_folders_reads_their_result_files(tmp_path):
    assert run(tmp_path / "a", t1_space(tmp_path), KT, "--no-confirm") == 0
    rec = recording.load(tmp_path / "a" / "jobs" / "conv")
    assert rec.kind == "sweep" and len(rec.entries) == 62        # the two "not in the recording" are not recordings
    assert run(tmp_path / "b", t1_space(tmp_path), tmp_path / "a" / "jobs" / "conv", "--no-confirm") == 0
    c = collect_mod.collect(tmp_path / "b" / "jobs" / "conv").configs
    assert (c["status"] == "ok").sum() == 62


def test_a_space_whose_macros_the_recording_lacks_is_refused_naming_the_mapping(tmp_path, capsys):
    shutil.copytree(DATA / "toy_target", tmp_path / "toy_target")
    shutil.copy(DATA / "toy_space.yaml", tmp_path / "toy.yaml")
    assert run(tmp_path, tmp_path / "toy.yaml", KT) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ALPHA_BLOCK" in err and "replay: {params:" in err
    assert not (tmp_path / "jobs" / "toy").exists()


def test_a_yaml_space_maps_its_macros_and_holds_unswept_recorded_parameters(tmp_path):
    shutil.copytree(DATA / "toy_target", tmp_path / "toy_target")
    (tmp_path / "conv.yaml").write_text("""
name: convy
target: {name: toy, dir: toy_target, profile: ["{build}/toy_bench"]}
parameters:
  BX: {values: [16, 32], kernels: [convolution_kernel]}
  BY: {values: [1, 2], kernels: [convolution_kernel]}
replay:
  params: {BX: block_size_x, BY: block_size_y}
  fixed: {tile_size_x: 1, tile_size_y: 1, read_only: 0, use_padding: 0, use_shmem: 0}
""")
    assert run(tmp_path, tmp_path / "conv.yaml", KT, "--no-confirm") == 0
    c = collect_mod.collect(tmp_path / "jobs" / "convy").configs
    assert (c["status"] == "ok").sum() == 4


def test_recorded_parameters_left_free_are_refused_as_ambiguous(tmp_path, capsys):
    shutil.copytree(DATA / "toy_target", tmp_path / "toy_target")
    (tmp_path / "conv.yaml").write_text("""
name: convy
target: {name: toy, dir: toy_target, profile: ["{build}/toy_bench"]}
parameters:
  BX: {values: [16, 32], kernels: [convolution_kernel]}
replay: {params: {BX: block_size_x}}
""")
    assert run(tmp_path, tmp_path / "conv.yaml", KT) == 1
    assert "several recorded configurations match" in capsys.readouterr().err


def test_replay_needs_from_and_from_needs_replay(tmp_path, capsys):
    space = t1_space(tmp_path)
    base = ["run", str(space), "--jobs-dir", str(tmp_path / "j"), "--results-dir", str(tmp_path / "r")]
    assert cli.main([*base, "--executor", "replay"]) == 1
    assert "needs --from" in capsys.readouterr().err
    assert cli.main([*base, "--executor", "debug", "--from", str(KT)]) == 1
    assert "add --executor replay" in capsys.readouterr().err


def test_a_replayed_result_never_passes_for_a_gpu_measurement():
    assert replay.identity("abc", KT) != "abc" and replay.identity("abc", KT) != replay.identity("abc", T4)


def _renamed_space(tmp_path: Path, kernel: str, replay_kernel: str = "") -> Path:
    shutil.copytree(DATA / "toy_target", tmp_path / "toy_target", dirs_exist_ok=True)
    (tmp_path / "conv.yaml").write_text(f"""
name: convy
target: {{name: toy, dir: toy_target, profile: ["{{build}}/toy_bench"]}}
parameters:
  BX: {{values: [16, 32], kernels: [{kernel}]}}
  BY: {{values: [1, 2], kernels: [{kernel}]}}
replay:
  params: {{BX: block_size_x, BY: block_size_y}}
  fixed: {{tile_size_x: 1, tile_size_y: 1, read_only: 0, use_padding: 0, use_shmem: 0}}
""" + (f"  kernel: {replay_kernel}\n" if replay_kernel else ""))
    return tmp_path / "conv.yaml"


def test_recorded_times_named_after_no_swept_kernel_are_the_one_swept_kernels(tmp_path):
    """A cache naming its program, not its kernel (bench/kt_cache.py's before 2026-11-29), still
    drives the pick: its times are the one kernel the space sweeps (else nothing is learned)."""
    from sweep.space import load_space

    rec = recording.load(KT)
    assert rec.kernel == "convolution_kernel"
    assert replay.replayed_kernel(rec, load_space(_renamed_space(tmp_path, "conv*"))) == "convolution_kernel"
    assert replay.replayed_kernel(rec, load_space(_renamed_space(tmp_path, "my_conv"))) == "my_conv"
    assert replay.replayed_kernel(rec, load_space(_renamed_space(tmp_path, "conv*", "other"))) == "other"
    assert run(tmp_path, _renamed_space(tmp_path, "my_conv"), KT, "--no-confirm") == 0
    m = collect_mod.collect(tmp_path / "jobs" / "convy").measurements
    assert set(m["kernel"]) == {"my_conv"} and len(m) == 4
    best = json.loads((tmp_path / "results" / "convy" / "best.json").read_text())
    assert "my_conv" in json.dumps(best)
