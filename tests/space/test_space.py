"""Space files: every bad file stops with one clear SweepError; good files become the Space they say."""

from __future__ import annotations

import dataclasses
import itertools
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from sweep import space as space_mod
from sweep.space import target
from sweep.core.errors import SweepError
from sweep.space import Config, Constraint, check, config_hash, make_config, tag, tags_for, values_digest

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "spaces" / "seed.yaml"
FULL = ROOT / "spaces" / "full.yaml"

ONE = "parameters:\n  A: {values: [1, 2]}\n"


def write(tmp_path: Path, text: str, name: str = "space.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load_text(tmp_path: Path, text: str) -> space_mod.Space:
    return target.load(write(tmp_path, text))


# ---------------------------------------------------------------------------
# Bad files: (id, file text, fragments the message must hold besides the file's path)
# ---------------------------------------------------------------------------

BAD = [
    ("not_yaml", "parameters:\n  A: {values: [1, 2}\n",
     ["line 2, column", "not valid YAML", "fix the syntax"]),
    ("top_level_list", "- A\n- B\n",
     ["expected a mapping with keys", "got list", "['A', 'B']"]),
    ("top_level_scalar", "just a string\n",
     ["expected a mapping", "got str", "'just a string'"]),
    ("unknown_top_level_key", ONE + "paramters: {}\n",
     ["unknown key(s) paramters", "valid keys are:", "parameters", "constraints", "slurm"]),
    ("missing_parameters", "name: x\n",
     ["parameters: missing or empty", "declare at least one macro"]),
    ("empty_parameters", "parameters: {}\n",
     ["parameters: missing or empty", "RESIDUAL_BLOCK_SIZE"]),
    ("parameters_not_a_mapping", "parameters: [A, B]\n",
     ["parameters: missing or empty"]),
    ("lowercase_macro", "parameters:\n  block_size: {values: [1]}\n",
     ["parameters.block_size", "'block_size' is not a macro name", "UPPER_CASE"]),
    ("macro_starts_with_digit", "parameters:\n  1BLOCK: {values: [1]}\n",
     ["'1BLOCK' is not a macro name", "UPPER_CASE"]),
    ("macro_with_dash", "parameters:\n  BLOCK-SIZE: {values: [1]}\n",
     ["'BLOCK-SIZE' is not a macro name"]),
    ("tag_starts_with_digit", "parameters:\n  A: {tag: 9x, values: [1]}\n",
     ["parameters.A.tag", "'9x' must be letters and digits starting with a letter"]),
    ("tag_with_underscore", "parameters:\n  A: {tag: A_B, values: [1]}\n",
     ["parameters.A.tag", "'A_B' must be letters and digits"]),
    ("tag_null", "parameters:\n  A: {tag: , values: [1]}\n",
     ["parameters.A.tag", "None must be letters and digits"]),
    ("unknown_parameter_key", "parameters:\n  A: {values: [1], kernel: [k]}\n",
     ["parameters.A", "unknown key(s) kernel", "valid keys are:", "kernels"]),
    ("values_missing", "parameters:\n  A: {tag: A}\n",
     ["parameters.A", "missing 'values'", "values: [128, 256]", "equals: OTHER_MACRO"]),
    ("empty_value_list", "parameters:\n  A: {values: []}\n",
     ["parameters.A.values", "the value list is empty", "at least one value"]),
    ("float_value", "parameters:\n  A: {values: [1.5, 2]}\n",
     ["parameters.A.values", "1.5 is not an integer from 0 to 2147483647", "whole numbers"]),
    ("string_value", "parameters:\n  A: {values: ['8']}\n",
     ["parameters.A.values", "'8' is not an integer"]),
    ("bool_value", "parameters:\n  A: {values: [true]}\n",
     ["parameters.A.values", "True is not an integer"]),
    ("negative_value", "parameters:\n  A: {values: [-1, 4]}\n",
     ["parameters.A.values", "-1 is not an integer from 0 to 2147483647"]),
    ("value_over_int32", "parameters:\n  A: {values: [2147483648]}\n",
     ["parameters.A.values", "2147483648 is not an integer from 0 to 2147483647"]),
    ("duplicate_values", "parameters:\n  A: {values: [1, 2, 1]}\n",
     ["parameters.A.values", "value(s) [1] appear more than once", "list each value once"]),
    ("range_lo_over_hi", "parameters:\n  A: {values: {range: [10, 3]}}\n",
     ["parameters.A.values", "range [10, 3] is empty", "first bound must not exceed the second"]),
    ("range_step_zero", "parameters:\n  A: {values: {range: [1, 10, 0]}}\n",
     ["parameters.A.values", "range step 0 must be >= 1", "{range: [lo, hi, step]}"]),
    ("range_four_bounds", "parameters:\n  A: {values: {range: [1, 10, 2, 3]}}\n",
     ["parameters.A.values", "range takes [lo, hi] or [lo, hi, step]", "[1, 10, 2, 3]"]),
    ("pow2_without_power_of_two", "parameters:\n  A: {values: {pow2: [5, 7]}}\n",
     ["parameters.A.values", "no power of two lies in [5, 7]", "widen the bounds"]),
    ("unknown_value_form", "parameters:\n  A: {values: {steps: [1, 2]}}\n",
     ["parameters.A.values", "{'steps': [1, 2]} is not a value list", "{range: [3, 10]}", "{pow2: [32, 1024]}"]),
    ("equals_missing_parameter", "parameters:\n  A: {values: [1]}\n  B: {equals: NOPE}\n",
     ["parameters.B.equals", "'NOPE' must name a swept parameter", "swept parameters: A"]),
    ("equals_derived_parameter", "parameters:\n  A: {values: [1]}\n  B: {equals: A}\n  C: {equals: B}\n",
     ["parameters.C.equals", "'B' must name a swept parameter", "swept parameters: A"]),
    ("equals_with_values", "parameters:\n  A: {values: [1]}\n  B: {equals: A, values: [2]}\n",
     ["parameters.B", "takes its values from A", "remove 'values'"]),
    ("min_not_an_integer", "parameters:\n  A: {values: [1], min: lots}\n",
     ["parameters.A.min", "'lots' must be an integer"]),
    ("constraint_syntax_error", ONE + "constraints: ['A >']\n",
     ["constraints[0]", "'A >' is not an expression", "ENCODER_BLOCK_X * ENCODER_BLOCK_Y"]),
    ("constraint_unknown_macro", ONE + "constraints: ['A * B <= 8']\n",
     ["constraints[0]", "names 'B', which is not a parameter of this space", "parameters: A"]),
    ("constraint_function_call", ONE + "constraints: [\"__import__('os').getcwd() == 0\"]\n",
     ["constraints[0]", "a call to __import__('os').getcwd", "do not allow", "min/max/abs"]),
    ("constraint_attribute", ONE + "constraints: ['A.real > 0']\n",
     ["constraints[0]", "attribute 'A.real'", "do not allow"]),
    ("constraint_lambda", ONE + "constraints: ['(lambda: A)() > 0']\n",
     ["constraints[0]", "a call to lambda: A", "do not allow"]),
    ("constraint_forbidden_behind_or", ONE + "constraints: ['A > 0 or A.real']\n",
     ["constraints[0]", "attribute 'A.real'", "do not allow"]),
    ("constraint_is_operator", ONE + "constraints: ['A is 1']\n",
     ["constraints[0]", "the operator Is", "do not allow"]),
    ("constraint_function_not_called", ONE + "constraints: ['min > 0']\n",
     ["constraints[0]", "min without calling it"]),
    ("constraint_string_constant", ONE + "constraints: [\"A == 'x'\"]\n",
     ["constraints[0]", "the constant 'x'"]),
    ("constraint_min_one_argument", ONE + "constraints: ['min(A) > 0']\n",
     ["constraints[0]", "min and max two or more"]),
    ("constraint_missing_expr", ONE + "constraints: [{why: because}]\n",
     ["constraints[0]", "missing 'expr'"]),
    ("constraints_not_a_list", ONE + "constraints: 'A > 0'\n",
     ["constraints", "expected a list of expressions"]),
    ("unknown_strategy", ONE + "strategy: bayes\n",
     ["strategy", "'bayes' is not a strategy", "tuples, grid, factorized, random, optuna"]),
    ("samples_zero", ONE + "strategy: random\nsamples: 0\n",
     ["samples", "0 must be an integer from 1"]),
    ("tuples_row_wrong_length", ONE + "strategy: tuples\ntuples: {columns: [A], rows: [[1], [1, 2]]}\n",
     ["tuples.rows[1]", "[1, 2] must list 1 values, one per column (A)"]),
    ("tuples_column_not_swept", ONE + "  B: {equals: A}\nstrategy: tuples\ntuples: {columns: [A, B], rows: [[1, 1]]}\n",
     ["tuples.columns", "'B' is not a swept parameter", "swept parameters: A"]),
    ("tuples_column_twice", ONE + "strategy: tuples\ntuples: {columns: [A, A], rows: [[1, 2]]}\n",
     ["tuples.columns", "A listed more than once"]),
    ("tuples_rows_missing", ONE + "strategy: tuples\ntuples: {columns: [A]}\n",
     ["tuples.rows", "expected a list of rows, each a list of 1 integers"]),
    ("tuples_column_without_default", ONE + "  B: {values: [3]}\nstrategy: tuples\ntuples: {columns: [A], rows: [[1]]}\n",
     ["tuples.columns", "B has no column and no default"]),
    ("tuples_with_grid_strategy", ONE + "strategy: grid\ntuples: {rows: [[1]]}\n",
     ["tuples", "only the tuples strategy reads 'tuples'", "set strategy: tuples or remove it"]),
    ("bad_backend", ONE + "profile: {backend: perf}\n",
     ["profile.backend", "'perf' is not a profile backend", "nsys, ncu, events"]),
    ("arch_without_underscore", ONE + "build: {arch: sm9}\n",
     ["build.arch", "'sm9' is not a GPU architecture", "sm_90"]),
    ("arch_auto_with_sm_90", ONE + "build: {arch: [auto, sm_90]}\n",
     ["build.arch", "'auto' detects the GPU on each node", "do not list it with other architectures"]),
    ("run_batch_zero", ONE + "run: {batch: 0}\n",
     ["run.batch", "0 must be an integer from 1 to 65536"]),
    ("run_batch_bool", ONE + "run: {batch: true}\n",
     ["run.batch", "True must be an integer"]),
    ("run_args_not_a_list", ONE + "run: {args: {fusion: none}}\n",
     ["run.args", "{'fusion': 'none'} must be a list of strings"]),
    ("run_verify_not_bool", ONE + "run: {verify: maybe}\n",
     ["run.verify", "'maybe' must be true or false"]),
    ("run_repeats_zero", ONE + "run: {repeats: 0}\n",
     ["run.repeats (or auto)", "0 must be an integer from 1 to 1000"]),
    ("run_stopping_unknown_when", ONE + "run: {stopping: sometimes}\n",
     ["run.stopping.when", "'sometimes' is not one of auto, always, never"]),
    ("run_stopping_noise_as_percent", ONE + "run: {stopping: {max_noise: 5}}\n",
     ["run.stopping.max_noise", "5 must be a number from 1e-06 to 1"]),
    ("run_stopping_unknown_key", ONE + "run: {stopping: {noise: 0.01}}\n",
     ["run.stopping", "unknown key(s) noise", "max_noise"]),
    ("certify_top_zero", ONE + "certify: {top: 0}\n",
     ["certify.top", "0 must be an integer from 1 to 64"]),
    ("certify_unknown_key", ONE + "certify: {budget: 60}\n",
     ["certify", "unknown key(s) budget", "budget_s"]),
    ("certify_turns_zero", ONE + "certify: {turns: 0}\n",
     ["certify.turns", "0 must be an integer from 1 to 1000"]),
    ("certify_processes_zero", ONE + "certify: {processes: 0}\n",
     ["certify.processes", "0 must be an integer from 1 to 256"]),
    ("certify_lockstep_not_bool", ONE + "certify: {lockstep: sometimes}\n",
     ["certify.lockstep", "sometimes"]),
    ("slurm_unknown_key", ONE + "slurm: {partion: gpu}\n",
     ["slurm", "unknown key(s) partion", "valid keys are:", "partition"]),
    ("slurm_mem_not_a_string", ONE + "slurm: {mem: 16}\n",
     ["slurm.mem", "16 must be a string"]),
    ("bad_sweep_name", ONE + "name: my/sweep\n",
     ["name", "'my/sweep' must be letters, digits", "jobs/<name>/"]),
    ("null_sweep_name", ONE + "name:\n",
     ["name", "None must be letters, digits"]),
    ("custom_target_without_dir", ONE + "target: {name: mine, profile: [x]}\n",
     ["target", "a custom target needs 'name' and 'dir'", "or write target: engine"]),
    ("custom_target_without_name", ONE + "target: {dir: ., profile: [x]}\n",
     ["target", "a custom target needs 'name' and 'dir'"]),
    ("custom_target_dir_without_makefile", ONE + "target: {name: mine, dir: nomake, profile: [x]}\n",
     ["target.dir", "nomake has no Makefile", "point dir at the folder holding your Makefile"]),
    ("custom_target_without_profile", ONE + "target: {name: mine, dir: withmake}\n",
     ["target.profile", "missing; give the timing command"]),
    ("custom_target_unknown_key", ONE + "target: {name: mine, dir: withmake, profile: [x], run: [y]}\n",
     ["target", "unknown key(s) run", "valid keys are: name, dir, verify, profile, events"]),
    ("model_with_custom_target", ONE + "target: {name: mine, dir: withmake, profile: [x]}\nmodel: {preset: 124M}\n",
     ["model", "'model' belongs to the engine target", "remove 'model'"]),
    ("engine_model_unknown_key", ONE + "model: {size: 124M}\n",
     ["model", "unknown key(s) size", "preset, seed, model_dir"]),
]


@pytest.mark.parametrize("text,fragments", [pytest.param(t, f, id=i) for i, t, f in BAD])
def test_bad_space_file_names_file_key_value_and_fix(tmp_path, text, fragments):
    (tmp_path / "nomake").mkdir()
    (tmp_path / "withmake").mkdir()
    (tmp_path / "withmake" / "Makefile").write_text("all:\n")
    path = write(tmp_path, text)
    with pytest.raises(SweepError) as e:
        target.load(path)
    message = str(e.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_bad_space_table_covers_distinct_errors():
    assert len(BAD) >= 25
    assert len({i for i, _, _ in BAD}) == len(BAD)


def test_run_repeats_stopping_and_certify_read_with_their_defaults(tmp_path):
    s = target.load(write(tmp_path, ONE + "run: {repeats: 4, stopping: {when: always, max_noise: 0.01}}\n"
                                         "certify: {top: 2, budget_s: 60}\n"))
    assert s.run.repeats == 4 and s.run.stopping.when == "always" and s.run.stopping.max_noise == 0.01
    assert s.run.stopping.budget_s == 15.0 and s.certify.top == 2 and s.certify.budget_s == 60.0
    d = target.load(write(tmp_path, ONE + "run: {stopping: false}\n", "d.yaml"))
    assert d.run.repeats == 0 and d.run.stopping.when == "never" and d.certify.enabled and d.certify.top == 3
    assert d.certify.lockstep and d.certify.turns == 3 and d.certify.processes == 16
    e = target.load(write(tmp_path, ONE + "certify: {lockstep: false, turns: 5, processes: 8}\n", "e.yaml"))
    assert not e.certify.lockstep and e.certify.turns == 5 and e.certify.processes == 8


def test_config_hash_changes_only_when_a_job_samples_more_than_one_plain_run(tmp_path):
    from sweep.space import config_hash, make_config

    s = target.load(write(tmp_path, ONE))
    c = make_config(s, {"A": 1})
    plain = config_hash(s, c, "d")
    assert config_hash(dataclasses.replace(s, certify=dataclasses.replace(s.certify, top=5)), c, "d") == plain
    assert config_hash(dataclasses.replace(s, run=dataclasses.replace(s.run, repeats=1)), c, "d") == plain
    assert config_hash(dataclasses.replace(s, run=dataclasses.replace(s.run, repeats=3)), c, "d") != plain
    one = dataclasses.replace(s, run=dataclasses.replace(s.run, iterations=1))
    assert config_hash(one, c, "d") != config_hash(dataclasses.replace(one, run=dataclasses.replace(
        one.run, stopping=dataclasses.replace(one.run.stopping, max_noise=0.01))), c, "d")


def test_missing_space_file_names_it_and_says_what_to_give(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(SweepError, match="cannot read space file .*nope.yaml.*give the path to a .yaml file"):
        target.load(path)


def test_engine_target_needs_the_engine_loader(tmp_path):
    with pytest.raises(SweepError, match="the engine target needs sweep.space.target"):
        space_mod.load_space(write(tmp_path, ONE))


def test_top_level_error_has_a_single_colon_after_the_file(tmp_path):
    path = write(tmp_path, ONE + "bogus: 1\n")
    with pytest.raises(SweepError) as e:
        target.load(path)
    assert str(e.value).startswith(f"{path}: unknown key(s) bogus")


# ---------------------------------------------------------------------------
# Values, bounds, derived parameters
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec,expected", [
    ("[1, 2, 4]", (1, 2, 4)),
    ("[4, 1, 2]", (4, 1, 2)),
    ("16", (16,)),
    ("0", (0,)),
    ("{range: [3, 10]}", (3, 4, 5, 6, 7, 8, 9, 10)),
    ("{range: [0, 12, 4]}", (0, 4, 8, 12)),
    ("{range: [1, 10, 4]}", (1, 5, 9)),
    ("{range: [7, 7]}", (7,)),
    ("{pow2: [32, 1024]}", (32, 64, 128, 256, 512, 1024)),
    ("{pow2: [5, 70]}", (8, 16, 32, 64)),
    ("{pow2: [0, 1]}", (1,)),
    ("2147483647", (2147483647,)),
])
def test_value_forms_expand_inclusively(tmp_path, spec, expected):
    s = load_text(tmp_path, f"parameters:\n  A: {{values: {spec}, min: 0}}\n")   # min: 0 lets 0 be a value
    assert s.parameter("A").values == expected


@pytest.mark.parametrize("rule,bad,good,fragment", [
    ("min: 32", 16, 32, "A >= 32 is false"),
    ("max: 512", 1024, 512, "A <= 512 is false"),
    ("multiple_of: 32", 48, 64, "A % 32 == 0 is false"),
    ("power_of_two: true", 48, 64, "A & (A - 1) == 0 is false"),
])
def test_parameter_bounds_become_constraints_check_enforces(tmp_path, rule, bad, good, fragment):
    s = load_text(tmp_path, f"parameters:\n  A: {{values: [{bad}, {good}], {rule}}}\n")
    key = rule.split(":")[0]
    reason = check(s, make_config(s, {"A": bad}))
    assert reason is not None and fragment in reason
    assert f"parameters.A.{key}" in reason      # names the rule's place in the file
    assert check(s, make_config(s, {"A": good})) is None


def test_power_of_two_accepts_every_power_and_rejects_the_rest(tmp_path):
    s = load_text(tmp_path, "parameters:\n  A: {values: {range: [1, 1100]}, power_of_two: true}\n")
    legal = [v for v in s.parameter("A").values if check(s, make_config(s, {"A": v})) is None]
    assert legal == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def test_constraint_why_appears_in_the_skip_reason(tmp_path):
    s = load_text(tmp_path, "parameters:\n  A: {values: [1, 2]}\n  B: {values: [1, 2]}\n"
                            "constraints:\n  - {expr: A * B <= 2, why: too many threads}\n")
    assert check(s, make_config(s, {"A": 2, "B": 2})) == "A * B <= 2 is false (too many threads)"
    assert check(s, make_config(s, {"A": 1, "B": 2})) is None


@pytest.mark.parametrize("expr,a,legal", [
    ("A // (A - 1) > 0", 1, False),        # division by zero: illegal, not a crash
    ("A << (A - 2) >= 0", 1, False),       # negative shift count
    ("(A - 3) ** 0.5 < 2", 1, False),      # a complex number compared
    ("(A + 7) ** 999999999 > 0", 2, False),  # a typo'd exponent: refused at once, not computed for hours
    ("9 ** 9 ** 9 > A", 2, False),
    ("A << 10 ** 9 > 0", 2, False),
])
def test_constraint_that_cannot_be_evaluated_makes_the_config_illegal(tmp_path, expr, a, legal):
    s = load_text(tmp_path, f"parameters:\n  A: {{values: [1, 2]}}\nconstraints: [{expr!r}]\n")
    started = time.monotonic()
    assert (check(s, make_config(s, {"A": a})) is None) is legal
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("expr,a,legal", [
    ("A // (A - 1) > 0", 2, True),
    ("min(A, 3) + max(A, 1) + abs(A - 5) == 7", 2, True),
    ("min(A, 3) + max(A, 1) + abs(A - 5) == 6", 2, False),
    ("(A if A > 1 else 10) == 10", 1, True),
    ("(A if A > 1 else 10) == 10", 2, False),
    ("not A == 2 and A >= 1", 1, True),
    ("1 <= A < 2", 2, False),
    ("A in [2, 3] and A not in (1, -1)", 2, True),
    ("A in {2} or A not in [1]", 1, False),
    ("A * 3 // 2 % 2 == 1 and A ** 2 - 1 == 3 and A << 2 | 1 == 9 and A >> 1 & 1 == 1 and -A + 4 == 2 and A / 4 == 0.5", 2, True),
])
def test_allowed_constraint_syntax_evaluates_like_python(tmp_path, expr, a, legal):
    s = load_text(tmp_path, f"parameters:\n  A: {{values: [1, 2]}}\nconstraints: [{expr!r}]\n")
    assert (check(s, make_config(s, {"A": a})) is None) is legal
    assert bool(eval(expr, {"__builtins__": {"min": min, "max": max, "abs": abs}}, {"A": a})) is legal


def test_equals_makes_derived_parameters_follow_their_source(tmp_path):
    s = load_text(tmp_path, """\
        parameters:
          X: {tag: E, values: [3, 5], kernels: [encoder_kernel]}
          Y: {tag: E, equals: X}
          Z: {tag: E, equals: X, kernels: [other_kernel]}
        """)
    assert [p.macro for p in s.swept] == ["X"]
    c = make_config(s, {"X": 5})
    assert c.values == (("X", 5), ("Y", 5), ("Z", 5))
    assert s.parameter("Y").derived and s.parameter("Y").values == ()
    assert s.parameter("Y").kernels == ("encoder_kernel",)      # inherited when it names none
    assert s.parameter("Z").kernels == ("other_kernel",)
    assert tag(s, c) == "E5x5x5"


def test_default_tag_is_the_initials_of_the_macro(tmp_path):
    s = load_text(tmp_path, "parameters:\n  RESIDUAL_BLOCK_SIZE: {values: [1]}\n  GELU: {values: [2]}\n")
    assert [p.tag for p in s.parameters] == ["RBS", "G"]
    assert tag(s, make_config(s, {"RESIDUAL_BLOCK_SIZE": 1, "GELU": 2})) == "RBS1_G2"


def test_parameter_governs_kernels_by_glob(tmp_path):
    s = load_text(tmp_path, "parameters:\n  A: {values: [1], kernels: ['matmul_*', encoder_kernel]}\n")
    p = s.parameter("A")
    assert p.governs("matmul_tiled_kernel") and p.governs("encoder_kernel")
    assert not p.governs("gelu_kernel") and not p.governs("encoder_kernel2")


# ---------------------------------------------------------------------------
# Tags, hashes, sizes
# ---------------------------------------------------------------------------


def test_tag_joins_a_shared_tag_with_x_in_declaration_order(tmp_path):
    s = load_text(tmp_path, """\
        parameters:
          C: {tag: T, values: [3]}
          B: {tag: U, values: [2]}
          A: {tag: T, values: [1]}
          D: {tag: V, values: [40]}
        """)
    assert tag(s, make_config(s, {"A": 1, "B": 2, "C": 3, "D": 40})) == "T3x1_U2_V40"


def test_tag_of_a_seed_row_is_the_seed_004_job_name():
    s = target.load(SEED)
    c = make_config(s, {"RESIDUAL_BLOCK_SIZE": 128, "GELU_BLOCK_SIZE": 128, "ENCODER_BLOCK_X": 5,
                        "LAYERNORM_BLOCK_SIZE": 256, "PREPARE_BLOCK_SIZE": 256, "MATMUL_TILE": 16})
    assert tag(s, c) == "R128_G128_E5x5x5_L256_P256_F16"


def test_tags_for_distinct_configs_are_the_plain_tags(tmp_path):
    s = load_text(tmp_path, "parameters:\n  A: {tag: T, values: [1, 11]}\n  B: {tag: T, values: [1, 11]}\n"
                            "  C: {tag: T1, values: [1, 11]}\n")
    configs = [make_config(s, dict(zip("ABC", v))) for v in itertools.product([1, 11], repeat=3)]
    tags = tags_for(s, configs)
    assert tags == {c: tag(s, c) for c in configs}
    assert len(set(tags.values())) == len(configs)


def test_tags_for_adds_a_hash_suffix_exactly_to_colliding_tags(tmp_path, monkeypatch):
    s = load_text(tmp_path, "parameters:\n  A: {values: [1, 2, 3]}\n")
    c1, c2, c3 = (make_config(s, {"A": v}) for v in (1, 2, 3))
    # a coarser tag that maps 1 and 2 to the same name
    monkeypatch.setattr(space_mod.configs, "tag", lambda sp, c: "A12" if c["A"] < 3 else "A3")
    tags = space_mod.tags_for(s, [c1, c2, c3, c1])
    assert tags[c3] == "A3"
    assert tags[c1] == f"A12_{values_digest(c1)[:6]}"
    assert tags[c2] == f"A12_{values_digest(c2)[:6]}"
    assert tags[c1] != tags[c2]
    assert space_mod.tags_for(s, [c1, c1, c3]) == {c1: "A12", c3: "A3"}   # a repeated config is no collision


def _seed_and_config():
    s = target.load(SEED)
    c = make_config(s, {"RESIDUAL_BLOCK_SIZE": 128, "GELU_BLOCK_SIZE": 128, "ENCODER_BLOCK_X": 5,
                        "LAYERNORM_BLOCK_SIZE": 256, "PREPARE_BLOCK_SIZE": 256, "MATMUL_TILE": 16})
    return s, c


def test_config_hash_is_stable_when_nothing_changes():
    s, c = _seed_and_config()
    s2, c2 = _seed_and_config()
    assert config_hash(s, c, "digest") == config_hash(s2, c2, "digest")
    assert len(config_hash(s, c, "digest")) == 16


@pytest.mark.parametrize("change", [
    "macro", "derived_macro", "batch", "seq_len", "iterations", "args", "verify", "backend", "ncu_iterations",
    "arch", "nvcc_flags", "model", "source",
])
def test_config_hash_changes_with_what_a_job_measures(change):
    s, c = _seed_and_config()
    digest = "digest"
    r = dataclasses.replace
    if change == "macro":
        c = make_config(s, c.as_dict() | {"RESIDUAL_BLOCK_SIZE": 256})
    elif change == "derived_macro":
        c = make_config(s, c.as_dict() | {"ENCODER_BLOCK_X": 6})
    elif change in ("batch", "seq_len", "iterations"):
        s = r(s, run=r(s.run, **{change: getattr(s.run, change) * 2}))
    elif change == "args":
        s = r(s, run=r(s.run, args=("--fusion", "full")))
    elif change == "verify":
        s = r(s, run=r(s.run, verify=False))
    elif change == "backend":
        s = r(s, profile=r(s.profile, backend="ncu"))
    elif change == "ncu_iterations":
        s = r(s, profile=r(s.profile, ncu_iterations=5))
    elif change == "arch":
        s = r(s, build=r(s.build, arch=("sm_90",)))
    elif change == "nvcc_flags":
        s = r(s, build=r(s.build, nvcc_flags=("-O2",)))
    elif change == "model":
        s = r(s, target=r(s.target, model={"preset": "124M", "seed": 1}))
    elif change == "source":
        digest = "other-digest"
    base_s, base_c = _seed_and_config()
    assert config_hash(s, c, digest) != config_hash(base_s, base_c, "digest")


def test_config_hash_ignores_slurm_settings():
    s, c = _seed_and_config()
    s2 = dataclasses.replace(s, slurm=dataclasses.replace(s.slurm, partition="gpu", time_min=90))
    assert config_hash(s2, c, "d") == config_hash(s, c, "d")


def test_size_is_the_product_of_swept_value_counts(tmp_path):
    s = load_text(tmp_path, """\
        parameters:
          A: {values: [1, 2, 3]}
          B: {values: {pow2: [1, 16]}}
          C: {equals: A}
          D: {values: 7}
        """)
    assert s.size() == (3 * 5 * 1, "3*5*1")


def test_seed_space_loads_with_nine_rows_and_the_encoder_cube():
    s = target.load(SEED)
    assert s.name == "seed" and s.strategy.name == "tuples"
    assert len(s.strategy.rows) == 9
    assert s.strategy.columns == ("RESIDUAL_BLOCK_SIZE", "GELU_BLOCK_SIZE", "ENCODER_BLOCK_X",
                                  "LAYERNORM_BLOCK_SIZE", "PREPARE_BLOCK_SIZE")
    assert [p.macro for p in s.swept] == ["RESIDUAL_BLOCK_SIZE", "GELU_BLOCK_SIZE", "ENCODER_BLOCK_X",
                                          "LAYERNORM_BLOCK_SIZE", "PREPARE_BLOCK_SIZE", "MATMUL_TILE"]
    assert s.parameter("ENCODER_BLOCK_Y").equals == "ENCODER_BLOCK_X"
    assert s.parameter("ENCODER_BLOCK_Z").equals == "ENCODER_BLOCK_X"
    assert {s.parameter(m).tag for m in ("ENCODER_BLOCK_X", "ENCODER_BLOCK_Y", "ENCODER_BLOCK_Z")} == {"E"}
    assert s.parameter("ENCODER_BLOCK_X").values == tuple(range(3, 11))
    assert s.size() == (9 * 9 * 8 * 9 * 9 * 1, "9*9*8*9*9*1")
    assert s.target.name == "gpt2-engine" and s.target.model == {"preset": "124M", "seed": 0}
    assert s.run.args == ("--fusion", "none", "--matmul", "tiled")
    assert s.build.arch == ("auto",) and s.profile.backend == "nsys"


def test_full_space_loads_factorized_with_its_kernel_rules():
    s = target.load(FULL)
    assert s.name == "full" and s.strategy.name == "factorized" and s.strategy.seed == 1
    assert len(s.parameters) == 15 and not any(p.derived for p in s.parameters)
    assert len(s.constraints) == 7
    assert all(p.default is not None and p.default in p.values for p in s.parameters)
    assert check(s, space_mod.default_config(s)) is None     # the engine's defaults obey the kernels' rules
    assert s.run.seq_len == 1024


# ---------------------------------------------------------------------------
# Security: no code runs from a space file, and nothing but macro names reaches C
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("payload", [
    "__import__('os').system('touch {marker}') == 0",
    "A > 0 or __import__('os').system('touch {marker}')",
    "A < 0 and __import__('os').system('touch {marker}')",
    "(lambda: __import__('os').system('touch {marker}'))() == 0",
    "A.__class__.__base__.__subclasses__() == 0",
    "[c for c in ().__class__.__bases__] == 0",
    "A if A > 0 else open('{marker}', 'w')",
    "A in [__import__('os').system('touch {marker}')]",
    "A in [1, 2] + [__import__('os').system('touch {marker}')]",
])
def test_constraint_expressions_cannot_execute_code(tmp_path, payload):
    marker = tmp_path / "pwned"
    expr = payload.format(marker=marker)
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump({"parameters": {"A": {"values": [0, 1]}}, "constraints": [expr]}))
    with pytest.raises(SweepError, match="do not allow|not a parameter"):
        target.load(path)
    with pytest.raises((ValueError, KeyError)):      # the evaluator itself refuses, even unvalidated
        for a in (-1, 0, 1):
            Constraint(expr).holds({"A": a})
    assert not marker.exists()


@pytest.mark.parametrize("macro", ["A\n#include <stdlib.h>", "FOO\n", "A B", "A;", "A(x)", "A=1", "Ä", ""])
def test_macro_names_that_could_inject_c_are_rejected(tmp_path, macro):
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump({"parameters": {macro: {"values": [1]}}}))
    with pytest.raises(SweepError, match="is not a macro name"):
        target.load(path)


@pytest.mark.parametrize("tag_", ["E\n", "E/", "E.", "E x"])
def test_tags_that_could_leave_a_job_folder_are_rejected(tmp_path, tag_):
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump({"parameters": {"A": {"values": [1], "tag": tag_}}}))
    with pytest.raises(SweepError, match="must be letters and digits"):
        target.load(path)


def test_config_lookup_by_macro():
    c = Config((("A", 1), ("B", 2)))
    assert c["B"] == 2 and c.as_dict() == {"A": 1, "B": 2}


# ---------------------------------------------------------------------------
# Profile backend defaults and verify: profile
# ---------------------------------------------------------------------------

TOY = ROOT / "tests" / "data" / "toy_target"


def custom(tmp_path: Path, target_extra: str = "", rest: str = "") -> space_mod.Space:
    return load_text(tmp_path, f"""\
        target:
          name: toy
          dir: {TOY}
          profile: ["{{build}}/toy_bench"]
        {target_extra}
        parameters:
          ALPHA_BLOCK: {{values: [64]}}
        {rest}""")


def test_a_custom_target_without_a_backend_is_profiled_with_cupti(tmp_path):
    assert custom(tmp_path).profile.backend == "cupti"


def test_a_custom_target_keeps_the_backend_its_file_names(tmp_path):
    assert custom(tmp_path, rest="profile: {backend: nsys}").profile.backend == "nsys"


def test_the_engine_without_a_backend_is_profiled_with_nsys(tmp_path):
    assert load_text(tmp_path, "target: engine\nparameters:\n  GELU_BLOCK_SIZE: {values: [64]}\n").profile.backend == "nsys"


def test_the_seed_space_names_nsys_itself_rather_than_leaning_on_a_default():
    assert yaml.safe_load(SEED.read_text())["profile"]["backend"] == "nsys"


def test_verify_profile_means_the_timing_program_checks_itself(tmp_path):
    s = custom(tmp_path, target_extra="  verify: profile")
    assert s.target.verify == space_mod.VERIFY_IN_PROFILE == "profile" and s.target.check_args == ()


def test_a_verify_word_other_than_profile_is_refused_naming_the_three_forms(tmp_path):
    with pytest.raises(SweepError, match=r"target\.verify: expected a command as a list of strings, a list of such "
                                         r"commands, or 'profile'.*got 'profiler'"):
        custom(tmp_path, target_extra="  verify: profiler")


def test_the_engine_checks_itself_in_its_timing_run_with_the_reference():
    t = target.load(SEED).target
    assert t.verify == "profile" and t.check_args == ("--ref", "{reference}")


def _custom_target(tmp_path):
    from sweep.space import target

    src = tmp_path / "tgt"
    src.mkdir()
    (src / "k.cu").write_text("__global__ void k() {}\n")
    (src / "Makefile").write_text("all:\n")
    (src / "CMakeLists.txt").write_text("project(k CUDA)\n")
    (src / "flags.mk").write_text("X := 1\n")
    (src / "cuda.cmake").write_text("set(X 1)\n")
    (src / "k.cc").write_text("int main() {}\n")
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\ntarget: {{name: t, dir: {src}, profile: [x]}}\n"
                    "parameters: {A: {values: [1, 2], kernels: [k]}}\n")
    return src, target.load(path)


@pytest.mark.parametrize("edited", ["CMakeLists.txt", "flags.mk", "cuda.cmake", "k.cc", "Makefile", "k.cu"])
def test_editing_any_file_the_build_may_read_changes_the_config_hash(tmp_path, edited):
    from sweep.space import config_hash, make_config, target

    src, space = _custom_target(tmp_path)
    c = make_config(space, {"A": 1})
    before = config_hash(space, c, target.source_digest(space.target))
    (src / edited).write_text((src / edited).read_text() + "# changed\n")
    assert config_hash(space, c, target.source_digest(space.target)) != before


def test_build_output_and_hidden_folders_are_not_part_of_the_source_digest(tmp_path):
    from sweep.space import target

    src, space = _custom_target(tmp_path)
    before = target.source_digest(space.target)
    for d in ("build", ".git", ".cache"):
        (src / d).mkdir()
        (src / d / "gen.h").write_text("#define GENERATED 1\n")
        (src / d / "CMakeLists.txt").write_text("# generated\n")
    assert target.source_digest(space.target) == before


def test_the_recorded_commit_is_dirty_when_the_targets_files_are_modified_or_not_yet_committed(tmp_path):
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git not installed")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    src = tmp_path / "prog"
    src.mkdir()
    (src / "k.cu").write_text("// kernel\n")
    (tmp_path / ".gitignore").write_text("build/\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "k"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert target.commit(src) == head
    (src / "build").mkdir()
    (src / "build" / "k.o").write_text("object")            # ignored build output: still the commit
    assert target.commit(src) == head
    (src / "new.cuh").write_text("// not added yet\n")    # a source the commit does not hold
    assert target.commit(src) == head + "-dirty"
    (src / "new.cuh").unlink()
    (src / "k.cu").write_text("// edited\n")
    assert target.commit(src) == head + "-dirty"
    assert target.commit(tmp_path.parent / "nowhere") == "unknown"


def _space_with(tmp_path, parameters: dict, constraints: list) -> "object":
    from sweep.space import target

    (tmp_path / "Makefile").write_text("all:\n")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"name": "c", "target": {"name": "t", "dir": str(tmp_path), "profile": ["x"]},
                                    "parameters": parameters, "constraints": constraints}))
    return target.load(path)


def test_a_constraint_that_cannot_be_evaluated_names_the_error_and_the_values(tmp_path):
    from sweep.space import check, make_config

    space = _space_with(tmp_path, {"X": {"values": [0, 2], "min": 0}, "Y": {"values": [1, 3]}}, ["Y // X >= 1"])
    reason = check(space, make_config(space, {"X": 0, "Y": 3}))
    assert "division by zero" in reason and "X=0" in reason and "Y=3" in reason and "is false" not in reason
    assert check(space, make_config(space, {"X": 2, "Y": 1})) == "Y // X >= 1 is false"
    assert check(space, make_config(space, {"X": 2, "Y": 3})) is None


def test_the_compiled_constraint_check_agrees_with_evaluating_each_rule_on_random_spaces(tmp_path):
    import random

    from sweep.space import expr, first_broken

    rng = random.Random(7)
    names = ["A", "B", "C"]
    atoms = ["A", "B", "C", "2", "0", "3"]
    ops = ["+", "-", "*", "//", "%", "**", "<<", ">>", "&", "|", "/"]
    for trial in range(40):
        rules = []
        for _ in range(rng.randint(1, 6)):
            left = f"({rng.choice(atoms)} {rng.choice(ops)} {rng.choice(atoms)})"
            rhs = rng.choice([f"max({rng.choice(atoms)}, {rng.choice(atoms)})", rng.choice(atoms),
                              f"(1 if {rng.choice(names)} > 1 else 0)"])
            rule = f"{left} {rng.choice(['<', '<=', '==', '!=', '>'])} {rhs}"
            rules.append(rule if rng.random() < 0.7 else f"not {rule} or {rng.choice(names)} == 1")
        space = _space_with(tmp_path, {n: {"values": [0, 1, 2, 5], "min": 0} for n in names}, rules)
        for a in (0, 1, 2, 5):
            for b in (0, 1, 2, 5):
                values = {"A": a, "B": b, "C": (a + b) % 3}
                slow = None
                for c in space.constraints:
                    try:
                        ok = bool(expr.evaluate(c.expr, values))
                    except (ArithmeticError, ValueError, TypeError) as e:
                        slow = ("error", c.expr, type(e))
                        break
                    if not ok:
                        slow = ("false", c.expr, None)
                        break
                fast = first_broken(space.constraints, values)
                if slow is None:
                    assert fast is None, (rules, values, fast)
                elif slow[0] == "false":
                    assert fast == f"{slow[1]} is false", (rules, values, fast)
                else:
                    assert fast.startswith(slow[1] + ":") and " at " in fast, (rules, values, fast)
