"""sweep.pipeline.finish: what a sweep leaves in results/ when its GPU steps after the measuring
(the certification race, the end-to-end confirmation) are stopped part way."""

from __future__ import annotations

import json

import pytest

from tests.conftest import py_space_dict, run_py_sweep


def _stopped(*_args, **_kwargs):
    raise KeyboardInterrupt   # as a Slurm time limit or ^C ends the sweep mid-step


@pytest.mark.parametrize("step", ["race", "confirmation"])
def test_a_sweep_stopped_in_its_race_or_confirmation_leaves_its_tables_and_provisional_picks(tmp_path, monkeypatch,
                                                                                             step):
    from sweep.decide import certify
    from sweep.pipeline import finish

    if step == "race":
        monkeypatch.setattr(certify, "run", _stopped)
    else:   # certify off, so the first GPU step after the measuring is the confirmation
        monkeypatch.setattr(finish, "_confirm", _stopped)
    with pytest.raises(KeyboardInterrupt):
        run_py_sweep(tmp_path, py_space_dict("stopped"), confirm=True, certify=step == "race")
    out = tmp_path / "results" / "stopped"
    assert (out / "measurements.csv").is_file() and (out / "configs.csv").is_file()
    best = json.loads((out / "best.json").read_text())
    assert best["config"]["ALPHA_BLOCK"] == 128                      # the sweep's own pick
    assert "#define ALPHA_BLOCK 128" in (out / "best" / "conf.cuh").read_text()
    assert best["notes"][0].startswith("provisional")
    assert all(c["certification"] is None and "had not run" in c["not_raced"] for c in best["choices"])
    assert json.loads((out / "confirmation.json").read_text())["best_total_ns"] is None


def test_a_finished_sweep_rewrites_the_provisional_picks(tmp_path, monkeypatch):
    from sweep.decide import certify

    monkeypatch.setattr(certify, "run", lambda *a, **k: ({}, "the race failed (test)"))
    run_py_sweep(tmp_path, py_space_dict("done"), confirm=True, certify=True)
    best = json.loads((tmp_path / "results" / "done" / "best.json").read_text())
    assert not any(n.startswith("provisional") for n in best["notes"])
    assert all("had not run" not in c["not_raced"] for c in best["choices"])
    conf = json.loads((tmp_path / "results" / "done" / "confirmation.json").read_text())
    assert conf["best_total_ns"] is not None                         # the confirmation ran and is recorded
