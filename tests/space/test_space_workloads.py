"""workloads: and target.programs in space files: good files become the runs they say, every bad
one stops with one SweepError naming the file, the workload and the key (a plugin target's program
names before a run, in preflight); spaces/inference.yaml and spaces/decode.yaml load, and pass
preflight once the engine has its `generate` program."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sweep.space import groups
import yaml

from sweep.pipeline import driver as pipeline, preflight
from sweep.space import target
from sweep.core.errors import SweepError
from sweep.space import DEFAULT_WORKLOAD, Program, Workload, config_hash, make_config
from sweep.space.workloads import check_programs, measured, weights

ROOT = Path(__file__).resolve().parents[2]
TOY_TARGET = Path(__file__).resolve().parents[1] / "data" / "toy_target"


def toy(tmp_path: Path, workloads=None, programs=None, run=None) -> Path:
    """A toy space file with these workloads, target programs and run: section."""
    d = {"name": "wl", "target": {"name": "toy", "dir": str(TOY_TARGET), "profile": ["{build}/toy_bench", "{args}"]},
         "parameters": {"ALPHA_BLOCK": {"values": [64, 128], "kernels": ["alpha_kernel"]}},
         "run": run or {"batch": 2, "seq_len": 32, "iterations": 7, "warmup": 1, "args": ["-n", "{iterations}"]}}
    if programs is not None:
        d["target"]["programs"] = programs
    if workloads is not None:
        d["workloads"] = workloads
    path = tmp_path / "wl.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


SMALL = {"small": {"profile": ["{build}/toy_bench", "--size", "64", "{args}"], "events": ["--json", "{events_json}"]}}


def test_workloads_take_their_sizes_from_run_unless_they_set_them(tmp_path):
    space = target.load(toy(tmp_path, [{"name": "long", "seq_len": 1024, "weight": 2.5},
                                       {"name": "short", "batch": 1, "iterations": 3, "args": ["--x"]}]))
    long, short = space.workloads
    assert long == Workload("long", 2.5, 2, 1024, 7, 1, ("-n", "{iterations}"), None)
    assert short == Workload("short", 1.0, 1, 32, 3, 1, ("--x",), None)
    assert weights(space) == {"long": 2.5, "short": 1.0}


def test_a_workload_naming_a_program_gets_its_command_and_no_args_of_the_default_program(tmp_path):
    space = target.load(toy(tmp_path, [{"name": "s", "program": "small"}], programs=SMALL))
    (w,) = space.workloads
    assert w.program == "small" and w.args == ()
    assert space.target.program("small") == Program(("{build}/toy_bench", "--size", "64", "{args}"),
                                                    ("--json", "{events_json}"))


def test_a_self_checking_target_and_its_programs_declare_their_check_arguments(tmp_path):
    checking = {"small": {**SMALL["small"], "check_args": ["--check", "{seq_len}"]}}
    path = toy(tmp_path, [{"name": "s", "program": "small"}], programs=checking)
    d = yaml.safe_load(path.read_text())
    d["target"] |= {"verify": "profile", "check_args": "--check"}
    path.write_text(yaml.safe_dump(d))
    space = target.load(path)
    assert space.target.program().check_args == ("--check",)
    assert space.target.program("small").check_args == ("--check", "{seq_len}")


@pytest.mark.parametrize("where", ["target", "program"])
def test_check_arguments_without_verify_profile_are_refused_naming_the_key_and_the_fix(tmp_path, where):
    programs = {"small": {**SMALL["small"], "check_args": ["--check"]}} if where == "program" else SMALL
    path = toy(tmp_path, programs=programs)
    d = yaml.safe_load(path.read_text())
    d["target"]["verify"] = [["{build}/toy_check"]]
    if where == "target":
        d["target"]["check_args"] = ["--check"]
    path.write_text(yaml.safe_dump(d))
    with pytest.raises(SweepError) as e:
        target.load(path)
    key = "target.check_args" if where == "target" else "target.programs.small.check_args"
    assert str(e.value).startswith(f"{path}: {key}: ") and "set target.verify: profile" in str(e.value), str(e.value)


def test_a_space_without_workloads_measures_run_as_the_one_default_workload(tmp_path):
    space = target.load(toy(tmp_path))
    assert space.workloads == ()
    (w,) = measured(space)
    assert w.name == DEFAULT_WORKLOAD == "" and (w.batch, w.seq_len, w.iterations) == (2, 32, 7)


def test_weights_are_not_part_of_the_config_hash_but_sizes_are(tmp_path):
    def hash_of(workloads):
        space = target.load(toy(tmp_path, workloads))
        return config_hash(space, make_config(space, {"ALPHA_BLOCK": 64}), "src")

    plain = hash_of(None)
    one = hash_of([{"name": "a", "weight": 1}])
    assert one != plain
    assert hash_of([{"name": "a", "weight": 7}]) == one            # re-weighting re-selects, it measures nothing anew
    assert hash_of([{"name": "a", "seq_len": 64}]) != one


def test_the_config_hash_of_a_space_without_workloads_is_what_it_was_before_workloads():
    space = target.load(ROOT / "tests" / "data" / "toy_space.yaml")
    c = make_config(space, {"ALPHA_BLOCK": 128, "BETA_X": 64, "BETA_Y": 4})
    one_iteration = dataclasses.replace(space, run=dataclasses.replace(space.run, iterations=1))   # adaptive sampling
    assert space.workloads == ()
    assert (config_hash(space, c, "d"), config_hash(one_iteration, c, "d")) == ("136842b596a58344", "995dc02b41e6bd43")


BAD = [
    pytest.param([{"name": "d", "program": "smal"}], SMALL,
                 ["workloads[0] (d).program", "'smal' is not a program of the target toy", "its programs: small",
                  "declare it under target.programs"], id="unknown-program"),
    pytest.param([{"name": "d", "program": "small"}], None,
                 ["none besides its default program"], id="program-of-a-target-without-programs"),
    pytest.param([{"name": "a"}, {"name": "a", "batch": 1}], None,
                 ["workloads[1] (a).name", "'a' is also the name of workloads[0]", "name each run once"],
                 id="duplicate-names"),
    pytest.param([{"name": "a", "weight": 0}], None, ["workloads[0] (a).weight", "0 must be a number > 0"],
                 id="weight-zero"),
    pytest.param([{"name": "a", "weight": -2}], None, ["(a).weight", "-2 must be a number > 0"], id="weight-negative"),
    pytest.param([{"name": "a", "weight": "often"}], None, ["(a).weight", "'often' must be a number > 0"],
                 id="weight-not-a-number"),
    pytest.param([{"name": "a", "sequence": 5}], None,
                 ["workloads[0] (a): unknown key(s) sequence", "valid keys are: name, weight, program"],
                 id="unknown-key"),
    pytest.param([{"weight": 2}], None, ["workloads[0]: missing 'name'"], id="missing-name"),
    pytest.param([{"name": "a b"}], None, ["workloads[0] (a b).name", "'a b' is not a workload name"], id="bad-name"),
    pytest.param([{"name": "a", "batch": 0}], None, ["(a).batch", "0 must be an integer from 1"], id="batch-zero"),
    pytest.param([], None, ["workloads: the list is empty"], id="empty"),
    pytest.param({"a": {}}, None, ["workloads: expected a list of runs"], id="not-a-list"),
    pytest.param(None, {"small": {"events": ["x"]}}, ["target.programs.small.profile: missing"],
                 id="program-without-a-command"),
    pytest.param(None, {"sm all": {"profile": ["x"]}}, ["target.programs", "'sm all' is not a program name"],
                 id="bad-program-name"),
    pytest.param(None, ["small"], ["target.programs: expected a mapping"], id="programs-not-a-mapping"),
    pytest.param(None, {"small": {"profile": ["x"], "args": []}},
                 ["target.programs.small: unknown key(s) args", "valid keys are: profile, events, check_args"],
                 id="unknown-program-key"),
]


@pytest.mark.parametrize("workloads, programs, fragments", BAD)
def test_a_bad_workload_or_program_is_one_error_naming_the_file_and_the_key(tmp_path, workloads, programs, fragments):
    path = toy(tmp_path, workloads, programs)     # workloads None: no workloads: key (the case is about programs)
    with pytest.raises(SweepError) as e:
        target.load(path)
    message = str(e.value)
    assert "\n" not in message and message.startswith(str(path))
    for fragment in fragments:
        assert fragment in message, message


def test_an_engine_workload_naming_a_program_the_engine_lacks_loads_but_is_refused_before_a_run(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text("target: engine\nparameters:\n  GELU_BLOCK_SIZE: {values: [128]}\n"
                    "workloads: [{name: decode, program: generat}]\n")
    space = target.load(path)                  # the snapshot of a sweep must load whatever the plugin offers now
    with pytest.raises(SweepError, match=r"e.yaml: workloads\[0\] \(decode\)\.program: 'generat' is not a program "
                                         r"of the target gpt2-engine .*the gpt2-engine plugin declares its programs"):
        preflight.preflight(space, pipeline.Options(executor="slurm", jobs_root=tmp_path / "jobs"))
    assert not (tmp_path / "jobs").exists()


# ---------------------------------------------------------------------------
# spaces/inference.yaml and spaces/decode.yaml name the engine's `generate` program
# ---------------------------------------------------------------------------

def _engine_with(programs: tuple[str, ...]):
    import gpt2_engine

    real = gpt2_engine.target

    def engine(model=None):
        t = real(model)
        extra = {p: Program(("{build}/gpt2_generate", "--weights", "{weights}", "--new", "{seq_len}"))
                 for p in programs if p not in t.programs}
        return dataclasses.replace(t, programs={**t.programs, **extra})
    return engine


def _engine_has_generate() -> bool:
    import gpt2_engine

    return "generate" in gpt2_engine.target().programs


def _check_inference(space) -> None:
    assert space.target.name == "gpt2-engine" and space.strategy.name == "factorized"
    assert [(w.name, w.batch, w.seq_len, w.program) for w in space.workloads] == [
        ("prefill_long", 4, 1024, None), ("prefill_short", 1, 64, None), ("decode", 1, 64, "generate")]
    assert all(w.weight > 0 for w in space.workloads)
    full = target.load(ROOT / "spaces" / "full.yaml")
    assert [[p.macro for p in g] for g in groups(space)] == [[p.macro for p in g] for g in groups(full)]
    assert space.constraints == full.constraints


def _check_decode(space) -> None:
    assert [(w.name, w.program, w.batch, w.args) for w in space.workloads] == [
        ("decode", "generate", 1, ()), ("decode_long", "generate", 1, ("--prompt-len", "400"))]
    macros = {p.macro for p in space.parameters}
    assert macros == {"MATVEC_DECODE_BLOCK_SIZE", "ATTENTION_DECODE_BLOCK_SIZE", "ATTENTION_DECODE_CHUNK"}
    v = {p.macro: p.values for p in space.parameters}
    # the kernels' static_asserts (matvec.cuh, attention_decode.cuh): every listed value is legal
    assert all(x % 32 == 0 and 32 <= x <= 1024 for x in v["MATVEC_DECODE_BLOCK_SIZE"])
    assert all(x % 32 == 0 and x <= 1024 for x in v["ATTENTION_DECODE_BLOCK_SIZE"])
    assert all(1 <= x <= 1024 for x in v["ATTENTION_DECODE_CHUNK"])
    assert {p.macro: p.default for p in space.parameters} == {"MATVEC_DECODE_BLOCK_SIZE": 256,
                                                              "ATTENTION_DECODE_BLOCK_SIZE": 256,
                                                              "ATTENTION_DECODE_CHUNK": 32}


@pytest.mark.parametrize("name, check", [("inference", _check_inference), ("decode", _check_decode)])
def test_the_workload_spaces_load_and_pass_the_program_check_given_an_engine_with_generate(monkeypatch, name, check):
    monkeypatch.setattr("gpt2_engine.target", _engine_with(("generate",)))
    space = target.load(ROOT / "spaces" / f"{name}.yaml")
    check(space)
    check_programs(space.path, space.workloads, space.target)


@pytest.mark.parametrize("name, check", [("inference", _check_inference), ("decode", _check_decode)])
def test_the_workload_spaces_load_whatever_programs_the_engine_has(name, check):
    check(target.load(ROOT / "spaces" / f"{name}.yaml"))


@pytest.mark.skipif(not _engine_has_generate(), reason="the engine plugin has no `generate` program yet")
@pytest.mark.parametrize("name", ["inference", "decode"])
def test_the_workload_spaces_name_the_engines_own_generate_program(name):
    space = target.load(ROOT / "spaces" / f"{name}.yaml")
    check_programs(space.path, space.workloads, space.target)
