"""sweep.pipeline.finish: what a sweep leaves in results/ when its GPU steps after the measuring
(the certification race, the end-to-end confirmation) are stopped part way."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from sweep.decide import select
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


def test_a_combined_pick_slower_than_the_defaults_end_to_end_beyond_noise_is_flagged_and_kept_in_results(tmp_path,
                                                                                                        monkeypatch):
    # The job "best" (every pick at once) runs its kernels 1.5x slower than the sweep's job of the
    # same values did: the picks interact. The pick stays (best/conf.cuh is what the sweep chose
    # and measured), but best.json and the summary say the defaults won end to end.
    monkeypatch.setenv("PY_BENCH_SLOWER_IN", "best:1.5")
    _, results, s = run_py_sweep(tmp_path, py_space_dict("interacts"), confirm=True, certify=False)
    assert s.best.config["ALPHA_BLOCK"] == 128 and s.confirmation.speedup_vs_default < 1
    assert s.confirmation.vs_default["verdict"] == "slower" and s.confirmation.vs_default["ci_high"] < 0
    best = json.loads((results / "interacts" / "best.json").read_text())
    (warning,) = [n for n in best["notes"] if "slower than the default launch sizes" in n]
    assert warning.startswith("end to end, the combined pick ran 15.4% slower")   # 1.5 x 1000 against 1300
    assert "keep the program's defaults" in warning
    assert json.loads((results / "interacts" / "confirmation.json").read_text())["vs_default"]["verdict"] == "slower"


def test_a_pick_that_beats_the_defaults_per_group_and_end_to_end_carries_no_warning(tmp_path):
    _, results, s = run_py_sweep(tmp_path, py_space_dict("adds_up"), confirm=True, certify=False)
    assert s.confirmation.vs_default["verdict"] == "faster" and s.confirmation.speedup_vs_default > 1.2
    assert s.best.choices[0].speedup_vs_default > 1.2 and s.best.choices[0].default_verdict == "faster"
    assert "1.30x vs default (faster beyond noise)" in select.summary_lines(s.best)[0]
    best = json.loads((results / "adds_up" / "best.json").read_text())
    assert not any("end to end" in n or "the program's own launch sizes" in n for n in best["notes"])


def test_a_pick_the_programs_own_launch_sizes_beat_beyond_noise_says_to_keep_them(tmp_path):
    # As the engine's encoder under spaces/seed.yaml: the space sweeps values that never reach the
    # program's own launch size (k_a's 256, 1.3x its best), so its pick (32, 1.6x) loses to the
    # baseline job. The sweep can only pick among its values; the note names what to do.
    space = py_space_dict("narrow", ALPHA_BLOCK={"tag": "A", "values": [16, 32], "kernels": ["k_a"]})
    _, _, s = run_py_sweep(tmp_path, space, confirm=True, certify=False)
    (c,) = s.best.choices
    assert c.values == {"ALPHA_BLOCK": 32} and c.speedup_vs_default == pytest.approx(1300 / 1600, rel=0.01)
    assert c.default_verdict == "slower" and "0.81x vs default (SLOWER beyond noise)" in select.summary_lines(s.best)[0]
    (note,) = [n for n in s.best.notes if "the program's own launch sizes (job 'default')" in n]
    assert note.startswith("k_a: the program's own launch sizes (job 'default') ran these kernels 23.1% faster than "
                           "the pick, beyond noise") and "Keep the program's own launch sizes" in note
    # end to end it loses too, for the reason that note gives: no second note guessing at interactions
    assert s.confirmation.vs_default["verdict"] == "slower" and not any("end to end" in n for n in s.best.notes)



def test_a_measured_kernel_whose_code_reads_a_macro_its_kernels_list_misses_is_a_note_naming_both(tmp_path):
    """tests/data/source_facts: its sources read SCALE_BLOCK in scale_kernel; a space listing
    row_sum instead, whose sweep measured scale_kernel, is told so. copy_kernel reads VEC and is
    unlisted too, but the sweep never measured it: no note of it (a kernel never run adds nothing)."""
    import pandas as pd
    import yaml

    from sweep.decide.collect import Collected
    from sweep.pipeline import finish
    from sweep.records.manifest import Manifest
    from sweep.space import target

    program = Path(__file__).resolve().parents[1] / "data" / "source_facts"
    space_file = tmp_path / "s.yaml"
    space_file.write_text(yaml.safe_dump({
        "name": "facts", "target": {"name": "program", "dir": str(program), "profile": ["{build}/program"]},
        "parameters": {"SCALE_BLOCK": {"values": [64, 128], "default": 128, "kernels": ["row_sum"]},
                       "VEC": {"values": [1, 4], "default": 4, "kernels": ["row_sum"]},
                       "SUM_THREADS": {"values": [128, 256], "default": 256, "kernels": ["row_sum"]}}}))
    space = target.load(space_file)
    measured = pd.DataFrame({"kernel": ["row_sum", "scale_kernel", "copy_kernel"], "status": ["ok", "ok", "failed"]})
    manifest = Manifest("facts", str(space_file), "grid", "cupti", "local", 8, "2*2*2", "", "", "")
    (note,) = finish._notes(space, Collected(pd.DataFrame(), measured, manifest), False)
    assert "SCALE_BLOCK is read in scale_kernel. Those kernels' times are not in the picks" in note
    assert "VEC" not in note and "SUM_THREADS" not in note and f"validate {space_file}" in note
    listed = target.load(space_file)
    fixed = dataclasses.replace(listed, parameters=tuple(
        dataclasses.replace(p, kernels=("scale_kernel",)) if p.macro == "SCALE_BLOCK" else p for p in listed.parameters))
    assert finish._notes(fixed, Collected(pd.DataFrame(), measured, manifest), False) == ()
