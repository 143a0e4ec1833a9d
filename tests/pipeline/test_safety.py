"""Nothing wrong is ever picked, nothing foreign is ever touched: what a user types never
reaches make or a shell, the tool writes only into folders it made (never through a link),
a stopped sweep can still be shown and cleaned, and bad folders or names are one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.conftest import toy_space_dict
from sweep import cli
from sweep.core import atomic, safe
from sweep.core.errors import SweepError
from sweep.node import lock, render
from sweep.pipeline import folders, manage
from sweep.records import Manifest
from sweep.space import target


def _space(tmp_path: Path, **overrides) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(toy_space_dict(**overrides), sort_keys=False))
    return path


def _run(tmp_path, capsys, space: Path, *extra: str, jobs: Path | None = None, results: Path | None = None):
    jobs = jobs if jobs is not None else tmp_path / "jobs"
    results = results if results is not None else tmp_path / "results"
    rc = cli.main(["run", str(space), "--dry-run", "--executor", "debug", "--jobs-dir", str(jobs),
                   "--results-dir", str(results), *extra])
    return rc, capsys.readouterr().err


def _one_line_error(err: str) -> str:
    lines = [l for l in err.splitlines() if l.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in sorted(root.rglob("*"))}


# item 6: make and the shell never read what a user typed


@pytest.mark.parametrize("targets, char", [(["all; touch ../pwned; true"], ";"), (["all\n\ttouch pwned"], "\n"),
                                           (["-f/etc/passwd"], "-"), (["all$(shell touch x)"], "$")])
def test_a_make_target_that_is_not_a_target_name_is_refused_at_load_naming_the_character(tmp_path, targets, char):
    with pytest.raises(SweepError) as e:
        target.load(_space(tmp_path, build={"make_targets": targets}))
    msg = str(e.value)
    assert "make_targets" in msg and repr(char) in msg or "starts with '-'" in msg
    assert "\n" not in msg and not (tmp_path.parent / "pwned").exists()


@pytest.mark.parametrize("flag, char", [("-DX=1#", "#"), ('-DX="a"', '"'), ("-O2\nall:", "\n"), ("-DX=$(HOME)", "$"),
                                        ("-DX='1'", "'"), ("-DX=`id`", "`"), ("-I\\x", "\\")])
def test_an_nvcc_flag_make_or_the_shell_would_read_is_refused_at_load_naming_the_character(tmp_path, flag, char):
    with pytest.raises(SweepError) as e:
        target.load(_space(tmp_path, build={"nvcc_flags": ["-O2", flag]}))
    assert "nvcc_flags" in str(e.value) and repr(char) in str(e.value) and "\n" not in str(e.value)


def test_ordinary_nvcc_flags_and_make_targets_still_load(tmp_path):
    flags = ["-O3", "-Xcompiler", "-Wall,-Wextra", "-gencode", "arch=compute_90,code=sm_90", "-std=c++17",
             "-DN=4", "--use_fast_math", "-I/opt/x_y/include"]
    space = target.load(_space(tmp_path, build={"nvcc_flags": flags, "make_targets": ["all", "bin/bench.x"]}))
    assert space.build.nvcc_flags == tuple(flags)


@pytest.mark.parametrize("name", ["j#1", "j$x", "j'q", "j;k", "j:k", "j k", "j\"q", "j`q`"])
def test_a_jobs_dir_make_or_the_shell_would_misread_is_refused_before_anything_is_written(tmp_path, capsys, name):
    before = _tree(tmp_path)
    rc, err = _run(tmp_path, capsys, _space(tmp_path), jobs=tmp_path / name / "jobs")
    assert rc == 1 and "--jobs-dir" in _one_line_error(err)
    assert _tree(tmp_path).keys() - before.keys() <= {"toy.yaml"} and not (tmp_path / name).exists()


@pytest.mark.parametrize("name", ["t'q", "t;k", "t#1", "t$x", "t:k"])
def test_a_target_dir_make_or_the_shell_would_misread_is_refused_at_load(tmp_path, name):
    import shutil

    from tests.conftest import TOY_TARGET

    src = tmp_path / name
    shutil.copytree(TOY_TARGET, src)
    with pytest.raises(SweepError) as e:
        target.load(_space(tmp_path, target={**toy_space_dict()["target"], "dir": str(src)}))
    assert "target.dir" in str(e.value) and repr(name[1]) in str(e.value)


def test_a_newline_in_the_space_files_path_stays_inside_the_generated_comments(tmp_path):
    d = tmp_path / "odd\nall:;touch pwned"
    d.mkdir()
    space = target.load(_space(d))
    jc = render.job_config(space, None, "default", "h", "c")
    job = render.render_job(space, jc, tmp_path / "jobs", tmp_path / "cache")
    for name in ("Makefile", "conf.cuh", "job.sbatch"):
        assert "\nall:;touch pwned" not in job.files[name]


# item 7: a folder the tool did not make is never adopted, and clean deletes only what it wrote


def test_a_run_into_a_folder_holding_the_users_files_is_refused_and_they_stay(tmp_path, capsys):
    x = tmp_path / "x"
    (x / "jobs" / "cpu").mkdir(parents=True)
    (x / "jobs" / "cpu" / "notes.txt").write_text("mine")
    rc, err = _run(tmp_path, capsys, _space(tmp_path), "--name", "cpu", jobs=x / "jobs", results=x / "results")
    assert rc == 1 and "did not write" in _one_line_error(err)
    assert os.listdir(x / "jobs" / "cpu") == ["notes.txt"] and not (x / "results" / "cpu").exists()


@pytest.mark.parametrize("results", ["same", "inside", "outside"])
def test_jobs_and_results_folders_that_are_the_same_or_nested_are_refused(tmp_path, capsys, results):
    jobs = tmp_path / "w"
    res = {"same": jobs, "inside": jobs / "r", "outside": tmp_path}[results]
    rc, err = _run(tmp_path, capsys, _space(tmp_path), "--name", "cpu", jobs=jobs, results=res)
    assert rc == 1 and "one holds the other" in _one_line_error(err) and not jobs.exists()


def test_clean_all_over_a_shared_folder_is_refused_and_deletes_nothing(tmp_path, capsys):
    x = tmp_path / "x"
    (x / "cpu").mkdir(parents=True)
    Manifest("cpu", "/s.yaml", "grid", "events", "local", 1, "1", "c", "d", "t").save(x / "cpu")
    (x / "cpu" / "notes.txt").write_text("mine")
    assert cli.main(["clean", "cpu", "--all", "--jobs-dir", str(x), "--results-dir", str(x)]) == 1
    assert "one holds the other" in _one_line_error(capsys.readouterr().err)
    assert (x / "cpu" / "notes.txt").read_text() == "mine"


def test_clean_all_deletes_what_the_sweep_wrote_and_leaves_a_file_of_the_users(tmp_path):
    jobs, results = tmp_path / "jobs", tmp_path / "results"
    sweep_dir, results_dir = folders.claim("cpu", jobs, results)
    Manifest("cpu", "/s.yaml", "grid", "events", "local", 1, "1", "c", "d", "t", tags=("A1",)).save(sweep_dir)
    atomic.write_json(sweep_dir / "A1" / "config.json", {"sweep": "cpu", "tag": "A1"})
    atomic.write_text(sweep_dir / "A1" / "conf.cuh", "#define A 1\n")
    atomic.write_json(results_dir / "best.json", {})
    atomic.write_text(results_dir / "best" / "conf.cuh", "")
    for d in (sweep_dir, results_dir, sweep_dir / "A1"):
        (d / "notes.txt").write_text("mine")
    (results_dir / "mine").mkdir()
    manage.clean("cpu", jobs, results, everything=True)
    assert sorted(os.listdir(sweep_dir)) == [safe.MARKER, "notes.txt"]   # the job folder went whole: it is the tool's
    assert sorted(os.listdir(results_dir)) == [safe.MARKER, "mine", "notes.txt"]
    assert safe.recorded(sweep_dir) == safe.recorded(results_dir) == []


def test_a_sweep_from_before_the_marker_is_still_the_tools(tmp_path):
    jobs, results = tmp_path / "jobs", tmp_path / "results"
    Manifest("old", "/s.yaml", "grid", "events", "local", 1, "1", "c", "d", "t").save(jobs / "old")
    (jobs / "old" / "A1").mkdir()
    (results / "old").mkdir(parents=True)
    Manifest("old", "/s.yaml", "grid", "events", "local", 1, "1", "c", "d", "t").save(results / "old")
    (results / "old" / "sweep.json").rename(results / "old" / "manifest.json")
    sweep_dir, results_dir = folders.claim("old", jobs, results)
    assert safe.has_marker(sweep_dir) and safe.has_marker(results_dir)


# item 8: nothing is written through a link


def test_a_run_through_a_linked_sweep_folder_is_refused_before_touching_what_it_points_at(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "space.yaml").write_text("theirs")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "toy").symlink_to(elsewhere)
    before = _tree(elsewhere)
    rc, err = _run(tmp_path, capsys, _space(tmp_path))
    assert rc == 1 and "is a link" in _one_line_error(err)
    assert _tree(elsewhere) == before


@pytest.mark.parametrize("linked", ["jobs", "results"])
def test_a_run_refused_for_a_linked_sweep_folder_creates_no_folder(tmp_path, capsys, linked):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / linked).mkdir()
    (tmp_path / linked / "toy").symlink_to(elsewhere)
    space = _space(tmp_path)
    before = _tree(tmp_path)
    rc, err = _run(tmp_path, capsys, space)
    assert rc == 1 and "is a link" in _one_line_error(err)
    assert _tree(tmp_path) == before      # neither results/ nor jobs/ (nor anything in them) was made


def test_a_linked_driver_lock_is_refused_and_its_target_keeps_its_content(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / lock.LOCK).symlink_to(victim)
    with pytest.raises(SweepError, match="is a link"):
        with lock.DriverLock(tmp_path / "s", "s"):
            pass
    assert victim.read_text() == "precious" and lock.holder(tmp_path / "s") is None


def test_an_atomic_write_through_a_link_inside_a_sweep_folder_is_refused(tmp_path):
    sweep_dir = safe.claim(tmp_path / "jobs" / "s", "jobs folder")
    outside = tmp_path / "outside"
    outside.mkdir()
    (sweep_dir / "A1").symlink_to(outside)
    with pytest.raises(SweepError, match="is a link"):
        atomic.write_json(sweep_dir / "A1" / "config.json", {})
    assert not any(outside.iterdir())


def test_a_build_log_that_is_a_link_is_refused_and_its_target_keeps_its_content(tmp_path):
    from sweep.node import build

    victim = tmp_path / "victim"
    victim.write_text("precious")
    job = tmp_path / "job"
    job.mkdir()
    (job / "build.log").symlink_to(victim)
    with pytest.raises(SweepError, match="is a link"):
        build.build(job, "sm_90", timeout_s=5)
    assert victim.read_text() == "precious"


# item 11: the manifest comes first


def test_a_sweep_interrupted_while_rendering_can_be_shown_and_cleaned(tmp_path, monkeypatch, capsys):
    written = []
    real = render.write_job

    def stop_after_two(job):
        if len(written) == 2:
            raise KeyboardInterrupt
        written.append(job.tag)
        return real(job)

    monkeypatch.setattr(render, "write_job", stop_after_two)
    rc, _ = _run(tmp_path, capsys, _space(tmp_path))
    assert rc == 130 and len(written) == 2
    jobs = tmp_path / "jobs"
    assert (jobs / "toy" / "sweep.json").is_file()
    assert manage.status("toy", jobs)["sweep"] == "toy"
    manage.clean("toy", jobs, tmp_path / "results", everything=True)
    assert not (jobs / "toy").exists() and not (tmp_path / "results" / "toy").exists()


# item 12: folders that cannot be written are one line, before anything runs


@pytest.mark.parametrize("which", ["--jobs-dir", "--results-dir"])
def test_a_jobs_or_results_dir_that_is_a_file_is_one_line_before_anything_runs(tmp_path, capsys, which):
    f = tmp_path / "afile"
    f.write_text("x")
    kw = {"jobs": f / "sub"} if which == "--jobs-dir" else {"results": f}
    rc, err = _run(tmp_path, capsys, _space(tmp_path), **kw)
    line = _one_line_error(err)
    assert rc == 1 and which in line and "is a file" in line
    assert not (tmp_path / "jobs" / "toy").exists()      # nothing rendered, nothing built


def test_a_results_dir_on_a_read_only_filesystem_is_one_line_before_anything_runs(tmp_path, capsys, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == ro else real_access(p, mode, **kw))
    real_statvfs = os.statvfs

    class RO:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", lambda p: RO() if Path(p) == ro else real_statvfs(p))
    rc, err = _run(tmp_path, capsys, _space(tmp_path), results=ro)
    line = _one_line_error(err)
    assert rc == 1 and "--results-dir" in line and "read-only" in line
    assert not (tmp_path / "jobs" / "toy").exists()


# item 13: names that would be too long for a folder


def test_a_sweep_name_over_the_limit_is_refused_at_load_naming_the_limit(tmp_path, capsys):
    rc, err = _run(tmp_path, capsys, _space(tmp_path, name="s" * 300))
    line = _one_line_error(err)
    assert rc == 1 and "300 characters" in line and "100" in line
    rc, err = _run(tmp_path, capsys, _space(tmp_path), "--name", "n" * 300)
    assert rc == 1 and "100" in _one_line_error(err)


def test_forty_one_parameters_make_a_short_stable_tag_and_a_job_folder_that_can_be_written(tmp_path):
    from sweep.space import make_config, tag

    params = {f"P{i}_LONG_NAME": {"tag": f"Tg{i}", "values": [1000 + i]} for i in range(41)}
    d = toy_space_dict()
    d["parameters"] = params
    path = tmp_path / "wide.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    space = target.load(path)
    c = make_config(space, {m: 1000 + i for i, m in enumerate(params)})
    t = tag(space, c)
    assert len(t) <= 120 and t.startswith("Tg01000_Tg11001_") and t == tag(space, c)
    jc = render.job_config(space, c, t, "h", "c")
    d = render.write_job(render.render_job(space, jc, tmp_path / "jobs", tmp_path / "cache"))
    assert (d / "config.json").is_file()
