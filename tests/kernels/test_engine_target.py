"""The engine plugin's Target (gpt2_engine.target): its default program, gpt2_forward,
and its named program `generate`, gpt2_generate, rendered as a job renders them."""

from __future__ import annotations

import string

import pytest

import gpt2_engine
from sweep.pipeline.preflight import JOB_PLACEHOLDERS
from sweep.node.process import expand
from sweep.space import Program

VALUES = {"build": "/j/build", "job": "/j", "batch": 1, "seq_len": 32, "iterations": 20, "warmup": 5,
          "events_json": "/j/events.json", "weights": "/m/gpt2.bin", "reference": "/m/reference.bin"}


def rendered(program: Program, *, check: bool, events: bool, args: list[str] | None = None) -> list[str]:
    """The command a job runs (sweep.node.job.Job.program): profile, check args, events args."""
    words = [*program.profile, *(program.check_args if check else ()), *(program.events if events else ())]
    return expand(words, VALUES, list(args or []))


def test_the_generate_program_renders_gpt2_generate_with_every_placeholder_filled():
    g = gpt2_engine.target().program("generate")
    assert rendered(g, check=True, events=True, args=["--prompt-len", "64"]) == [
        "/j/build/gpt2_generate", "--weights", "/m/gpt2.bin", "-b", "1", "--new", "32", "-n", "20", "-w", "5",
        "--prompt-len", "64", "--ref", "/m/reference.bin", "--kernel-timing", "--json", "/j/events.json"]


def test_the_generate_program_without_the_check_times_the_same_command_less_the_reference():
    g = gpt2_engine.target().program("generate")
    checked, unchecked = rendered(g, check=True, events=False), rendered(g, check=False, events=False)
    assert checked == unchecked + ["--ref", "/m/reference.bin"]


def test_the_generate_program_passes_the_batch_so_gpt2_generate_refuses_one_other_than_1():
    g = gpt2_engine.target().program("generate")
    i = g.profile.index("-b")
    assert g.profile[i + 1] == "{batch}"


def test_the_default_program_is_still_gpt2_forward_with_the_same_check_and_events():
    t = gpt2_engine.target()
    assert t.program() == Program(t.profile, t.events, t.check_args)
    assert t.profile[0] == "{build}/gpt2_forward" and "-t" in t.profile
    assert t.program("generate").check_args == t.check_args and t.program("generate").events == t.events


def test_every_placeholder_of_the_generate_program_is_one_a_job_or_the_model_export_fills():
    t = gpt2_engine.target()
    known = set(JOB_PLACEHOLDERS) | set(t.plugin.values("/jobs"))
    g = t.program("generate")
    used = {f for word in (*g.profile, *g.events, *g.check_args) if word != "{args}"
            for _, f, _, _ in string.Formatter().parse(word) if f}
    assert used and used <= known


def test_an_unknown_program_names_the_ones_the_engine_has():
    with pytest.raises(KeyError, match="has no program 'decode' .*it has: generate"):
        gpt2_engine.target().program("decode")
