"""Samples from what the program showed, not what the space said (no GPU): a recorded CUPTI
capture of a program without NVTX iteration ranges (tests/data/h100/cupti/gemm_shapes.txt: all
74 launches in one iteration) replayed under a space that says `iterations: 20`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sweep.node import sampling
from sweep.profile import Invocation, cupti

DATA = Path(__file__).resolve().parents[1] / "data" / "h100" / "cupti"
RUN = {"batch": 1, "seq_len": 1, "warmup": 2, "iterations": 20, "args": [], "verify": True}


def replayed(name: str, run: dict = RUN, observe: bool = True) -> tuple[sampling.Sampler, list]:
    """A sampler whose every run is the recorded capture `name`, parsed by the cupti backend."""
    inv = Invocation([], DATA / name)
    parses: list = []
    plan = replace(sampling.Plan.of(run, {"kernels": ["gemm_tiled_kernel"]}), observe=observe)
    return sampling.Sampler(plan, lambda: "run", lambda cap: parses.append(cap) or cupti.BACKEND.parse(inv, "")), parses


def test_a_one_iteration_program_under_a_space_of_20_iterations_is_repeated_to_5_samples():
    s, _ = replayed("gemm_shapes.txt")
    assert s.plan.single                                  # the space's word: one run of 20 iterations
    ms, rec = s.finish(s.take())
    assert rec.runs >= 5 and rec.samples >= 5 and rec.source == "runs" and rec.adaptive
    assert rec.stopped is not None and rec.noise is not None
    assert rec.reason == ("the program showed 1 iteration a run (no NVTX iteration ranges, or it ignores the "
                          f"iteration count), not run.iterations' 20: repeated to {rec.runs} runs")
    assert all(m.runs == (1,) * rec.runs for m in ms)


def test_a_program_with_its_20_nvtx_iterations_still_runs_once():
    s, parses = replayed("gemm_nvtx.txt")
    ms, rec = s.finish(s.take())
    assert (rec.runs, rec.samples, rec.source, rec.reason) == (1, 20, "iterations", "")
    assert len(parses) == 1


def test_run_settings_still_decide_the_runs_of_a_short_program_as_if_its_iterations_were_known():
    s, _ = replayed("gemm_shapes.txt", RUN | {"repeats": 2, "stopping": {"when": "never"}})
    _, rec = s.finish(s.take())
    assert (rec.runs, rec.samples, rec.adaptive) == (2, 2, False)
    assert rec.reason.endswith("repeated to 2 runs")


def test_a_short_run_parsed_only_once_the_gpu_is_released_says_its_noise_is_unknown_and_how_to_repeat_it():
    s, _ = replayed("gemm_shapes.txt", observe=False)    # a backend whose parse waits (nsys: its export)
    taken = s.take()
    assert taken.pending is not None
    _, rec = s.finish(taken)
    assert (rec.runs, rec.samples, rec.source, rec.noise) == (1, 1, "unknown", None)
    assert rec.reason == ("the program showed 1 iteration a run (no NVTX iteration ranges, or it ignores the "
                          "iteration count), not run.iterations' 20: not repeated (this backend parses a run once "
                          "the GPU is released), so its noise is unknown; run.iterations: 1 in the space repeats it")


def test_a_space_that_already_says_one_iteration_gives_no_reason():
    s, _ = replayed("gemm_shapes.txt", RUN | {"iterations": 1})
    _, rec = s.finish(s.take())
    assert rec.runs >= 5 and rec.reason == ""


# --- end to end: the CPU toy target as a program that ignores the iteration count ----------------

@pytest.mark.slow
def test_a_sweep_of_a_one_iteration_program_repeats_it_says_so_once_and_certifies_by_default(
        tmp_path, monkeypatch, capsys):
    from sweep.decide import select
    from sweep.records import JobResult
    from tests.conftest import run_toy_sweep, toy_space_dict

    monkeypatch.setenv("TOY_BENCH_ITERATIONS", "1")          # toy_bench ignores -n: one iteration a run
    d = toy_space_dict(strategy="tuples", tuples={"columns": ["ALPHA_BLOCK", "BETA_X"],
                                                  "rows": [[64, 32], [128, 64], [256, 32]]},
                       run={"iterations": 20, "stopping": {"budget_s": 0.5}})   # 5 runs, then the budget
    d["parameters"]["BETA_Y"] = {"tag": "B", "values": [4], "default": 4, "kernels": ["beta_kernel"]}
    _, jobs, _, summary = run_toy_sweep(tmp_path, d, report=False)
    err = capsys.readouterr().err
    r = JobResult.from_dict(json.loads((jobs / "toy" / "A128_B64x4" / "result.json").read_text()))
    assert r.sampling.runs >= 5 and r.sampling.samples >= 5 and r.sampling.source == "runs"
    assert r.sampling.reason.startswith("the program showed 1 iteration a run") and "repeated to" in r.sampling.reason
    said = [line for line in err.splitlines() if "each configuration runs it about" in line]
    assert len(said) == 1 and said[0].startswith("toy: the program showed 1 iteration a run")
    assert "certify: not racing" not in err                        # the toy's race costs seconds: under the cap
    for line in select.summary_lines(summary.best):
        assert "  certified (" in line or "  tie: " in line or "  not raced: " in line, line
