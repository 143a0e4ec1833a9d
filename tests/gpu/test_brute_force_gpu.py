"""bench/brute_force.py's one-process harness on a GPU, for each example that has one: the first
configurations of its space checked, timed and logged, and a second run resumed past them; and the
harness's own check and measurement on known cases (tests/bench/harness_check.cu)."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest

from bench import brute_force
from tests.bench.test_brute_force import BRUTE_FORCED, build_harness_check

ROOT = Path(__file__).resolve().parents[2]


def committed_problem_size(example: str) -> dict:
    """The problem size the committed brute force of the example was measured at (its default)."""
    return {"problem_size": json.loads(gzip.open(ROOT / "bench" / "data" / f"{example}_H200.json.gz").read())["problem_size"]}


@pytest.mark.parametrize("example, run_args, header", [
    ("xgemm", ["--size", "1024"], {"size": 1024}),
    *[(example, [], committed_problem_size(example)) for example in BRUTE_FORCED if example != "xgemm"],
])
def test_the_harness_checks_times_and_logs_each_configuration_and_a_second_run_resumes_past_them(
        tmp_path, capsys, example, run_args, header):
    space = ["--space", str(ROOT / "examples" / example / "space.yaml")]
    build, log = tmp_path / "build", tmp_path / "run.jsonl"
    assert brute_force.main(["build", *space, "--build", str(build), "--jobs", "4", "--limit", "4", "--chunk", "2"]) == 0
    assert brute_force.main(["run", *space, "--build", str(build), "--log", str(log), *run_args]) == 0
    rows = brute_force.logged(log)
    assert {k: rows[0][k] for k in header} == header and rows[0]["count"] == 4
    assert [r["i"] for r in rows[1:]] == [0, 1, 2, 3]
    assert all("failure" not in r and len(r["times"]) in (3, 7) and min(r["times"]) > 0 for r in rows[1:])
    assert brute_force.main(["run", *space, "--build", str(build), "--log", str(log), *run_args]) == 0
    assert "all 4 configurations logged" in capsys.readouterr().out
    assert len(brute_force.logged(log)) == 5


def test_the_harness_check_fails_a_wrong_element_anywhere_and_a_configuration_that_fails_to_start_or_check(tmp_path):
    done = subprocess.run([str(build_harness_check(tmp_path))], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "equal": True, "last_wrong": False, "last_unchecked": True, "first_nan": False, "none": True,
        "refused": "wrong result", "unstartable": "invalid argument", "measured": "measured", "times": 7}
