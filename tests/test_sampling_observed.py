"""Samples from what the program showed, not what the space said (no GPU): a recorded CUPTI
capture of a program without NVTX iteration ranges (tests/data/h100/cupti/gemm_shapes.txt: all
74 launches in one iteration) replayed under a space that says `iterations: 20`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sweep.node import sampling
from sweep.profile import Invocation, cupti

DATA = Path(__file__).parent / "data" / "h100" / "cupti"
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
