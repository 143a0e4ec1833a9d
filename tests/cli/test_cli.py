"""The command line: thin over sweep.pipeline.driver; user errors are one line and exit 1."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sweep import cli

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args, env=None, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "config_sweep.py"), *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=1800)


def no_gpu_env(tmp_path):
    import os

    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def test_no_arguments_without_a_gpu_says_what_is_missing_in_one_line(tmp_path):
    p = run_cli("--jobs-dir", str(tmp_path / "j"), env=no_gpu_env(tmp_path))
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: ")
    assert "no GPU visible here" in p.stderr and "--dry-run" in p.stderr
    assert not (tmp_path / "j" / "seed").exists() or not any((tmp_path / "j" / "seed").glob("R*"))


def test_help_explains_the_default_sweep_and_shows_examples():
    p = run_cli("--help")
    assert p.returncode == 0
    assert "spaces/seed.yaml" in p.stdout and "examples:" in p.stdout and "--dry-run" in p.stdout


@pytest.mark.parametrize("body, fragment", [
    ("parameters: {A: {values: [1]}}\nstrategy: magic\n", "not a strategy; choose one of tuples, grid"),
    ("parameters: {a_lower: {values: [1]}}\n", "is not a macro name"),
    ("parameters: {A: {values: [1, 1.5]}}\n", "1.5 is not an integer"),
], ids=["strategy", "macro", "float"])
def test_bad_space_file_exits_1_naming_the_file_and_renders_nothing(tmp_path, body, fragment):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ntarget: engine\n" + body)
    p = run_cli("run", str(bad), "--jobs-dir", str(tmp_path / "j"), "--dry-run", "--arch", "sm_90")
    assert p.returncode == 1 and str(bad) in p.stderr and fragment in p.stderr
    assert not (tmp_path / "j").exists()


def test_a_jobs_dir_with_a_space_is_refused_before_anything_is_rendered(tmp_path):
    jobs = tmp_path / "my jobs"
    p = run_cli("run", "spaces/seed.yaml", "--dry-run", "--arch", "sm_90", "--jobs-dir", str(jobs))
    assert p.returncode == 1 and "contains whitespace" in p.stderr and "my jobs" in p.stderr
    assert not jobs.exists()


def test_a_slurm_option_an_sbatch_line_cannot_carry_is_refused_before_anything_is_rendered(tmp_path):
    jobs = tmp_path / "jobs"
    p = run_cli("run", "spaces/seed.yaml", "--executor", "slurm", "--partition", "gpu\n#SBATCH --account=other",
                "--jobs-dir", str(jobs))
    assert p.returncode == 1 and "slurm partition" in p.stderr and "cannot carry" in p.stderr
    assert not jobs.exists()


def test_missing_space_file_is_one_line(tmp_path):
    p = run_cli("run", str(tmp_path / "nope.yaml"))
    assert p.returncode == 1 and "cannot read space file" in p.stderr


def test_status_reads_a_sweep_from_its_files_alone(toy_sweep, capsys):
    _, jobs, _, _ = toy_sweep
    assert cli.main(["status", "toy", "--jobs-dir", str(jobs)]) == 0
    out = capsys.readouterr().out
    assert "toy: ok 14, skipped 4, verify_failed 4" in out
    assert "A96_B32x1: verify_failed (verify: toy_check exit 1" in out


def test_status_json_is_machine_readable(toy_sweep, capsys):
    _, jobs, _, _ = toy_sweep
    cli.main(["status", "toy", "--jobs-dir", str(jobs), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert data[0]["counts"]["ok"] == 14 and len(data[0]["failures"]) == 4


def test_best_prints_the_best_conf_cuh(toy_sweep, capsys):
    _, _, results, _ = toy_sweep
    assert cli.main(["best", "toy", "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out
    assert "#define ALPHA_BLOCK 128" in out and "#define BETA_X 64" in out


def test_best_of_an_unknown_sweep_names_the_command_to_run(tmp_path, capsys):
    assert cli.main(["best", "nope", "--results-dir", str(tmp_path)]) == 1
    assert "config-sweep collect nope" in capsys.readouterr().err


def test_clean_keeps_measurements_unless_asked(toy_sweep, tmp_path, capsys):
    _, jobs, results, _ = toy_sweep
    copy = tmp_path / "jobs"
    shutil.copytree(jobs / "toy", copy / "toy")
    assert cli.main(["clean", "toy", "--jobs-dir", str(copy), "--results-dir", str(tmp_path / "r")]) == 0
    assert not any(copy.glob("toy/*/build")) and len(list(copy.glob("toy/*/result.json"))) == 22
    assert cli.main(["clean", "toy", "--all", "--jobs-dir", str(copy), "--results-dir", str(tmp_path / "r")]) == 0
    assert not (copy / "toy").exists()


def test_a_profiler_path_that_is_not_a_program_is_one_line(tmp_path):
    p = run_cli("run", "spaces/seed.yaml", "--nsys", str(tmp_path / "nsys"), "--jobs-dir", str(tmp_path / "j"))
    assert p.returncode == 1 and "--nsys" in p.stderr and "no executable there" in p.stderr


def test_profiler_flags_reach_the_jobs_config(monkeypatch, tmp_path):
    from sweep.core.errors import SweepError

    fake = tmp_path / "nsys"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.delenv("NSYS", raising=False)
    seen = {}

    def stop_at_run(space, opts, **kwargs):  # the flag's effect is all this test needs
        seen["nsys"] = opts.nsys
        raise SweepError("stopped before running")

    monkeypatch.setattr(cli.pipeline, "run", stop_at_run)
    assert cli.main(["run", "spaces/seed.yaml", "--nsys", str(fake)]) == 1
    assert seen["nsys"] == str(fake.resolve()) and "NSYS" not in __import__("os").environ


@pytest.mark.parametrize("flag, value, strategy, fragment", [
    ("--samples", "-1", "random", "--samples: -1 must be an integer from 1"),
    ("--samples", "0", "random", "--samples: 0 must be an integer from 1"),
    ("--samples", "5", None, "--samples 5: strategy grid takes no samples"),
    ("--budget", "0", "learning", "--budget: 0 must be an integer from 1"),
    ("--budget", "5", None, "--budget 5: strategy grid takes no budget (it plans its own points); add --strategy "
                            "learning or --strategy auto"),
], ids=["negative", "zero", "grid", "zero budget", "grid budget"])
def test_a_samples_or_budget_the_strategy_cannot_use_is_refused_in_one_line_naming_the_flag(
        write_space, tmp_path, capsys, flag, value, strategy, fragment):
    args = ["run", str(write_space()), flag, value, "--dry-run", "--arch", "sm_90",
            "--jobs-dir", str(tmp_path / "j")] + (["--strategy", strategy] if strategy else [])
    assert cli.main(args) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err
    assert not (tmp_path / "j").exists()


@pytest.mark.parametrize("command", ["best", "collect"])
def test_a_command_that_needs_a_sweep_name_says_so_in_one_line(tmp_path, capsys, command):
    assert cli.main([command, "--jobs-dir", str(tmp_path / "j"), "--results-dir", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"config-sweep {command} SWEEP" in err


def test_output_piped_into_a_reader_that_stops_early_ends_quietly_with_141(tmp_path):
    p = subprocess.Popen([sys.executable, str(ROOT / "config_sweep.py"), "status", "--jobs-dir", "nowhere"],
                         stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=tmp_path)
    p.stdout.close()                      # as `| head -1` does once it has its line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == cli.EXIT_BROKEN_PIPE == 141
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err


def test_a_dry_run_of_a_space_with_no_legal_point_exits_3_naming_the_rule_that_rejects_most(write_space, tmp_path,
                                                                                            capsys, monkeypatch):
    from sweep.pipeline import driver

    monkeypatch.setattr(driver, "preflight", lambda space, opts: None)   # no compiler needed: nothing is built
    space = write_space(constraints=["BETA_X * BETA_Y <= 64", "ALPHA_BLOCK > 5000"])
    rc = cli.main(["run", str(space), "--dry-run", "--arch", "sm_90", "--jobs-dir", str(tmp_path / "j"),
                   "--results-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_NOTHING_MEASURED
    line = next(l for l in err.splitlines() if "no configuration is legal" in l)
    assert "ALPHA_BLOCK > 5000" in line and "20 of the 20 points" in line
