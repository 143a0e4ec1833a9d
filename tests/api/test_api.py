"""`from sweep import run`: a sweep from a script or notebook, returning what the command line
prints (counts, picks, the results folder), with the same refusals as one-line SweepErrors."""

from __future__ import annotations

import os

import pytest
import yaml

import sweep
from sweep.core.errors import SweepError
from tests.conftest import py_space_dict


def test_run_from_python_sweeps_a_space_and_returns_its_counts_and_picks(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")      # the py target never touches it
    space = tmp_path / "py.yaml"
    space.write_text(yaml.safe_dump(py_space_dict(), sort_keys=False))
    summary = sweep.run(space, executor="debug", jobs_dir=tmp_path / "jobs", results_dir=tmp_path / "results",
                        confirm=False, report=False)
    assert summary.counts == {"ok": 4} and summary.measured == 4
    [choice] = summary.best.choices
    assert choice.values == {"ALPHA_BLOCK": 128}                          # the py target's k_a is fastest at 128
    assert (summary.results_dir / "best" / "conf.cuh").read_text().count("#define ALPHA_BLOCK 128") == 1


def test_run_from_python_raises_the_one_line_error_the_command_line_prints(tmp_path):
    with pytest.raises(SweepError, match="cannot read space file"):
        sweep.run(tmp_path / "nope.yaml")
    assert not os.path.exists(tmp_path / "jobs")
