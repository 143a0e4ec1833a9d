"""T1 space files in (sweep.space.t1): parameters, values, defaults, constraints translated or refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep import cli
from sweep.core.errors import SweepError
from sweep.space import check, make_config, target

T1 = Path(__file__).resolve().parents[1] / "data" / "benchmark_spaces" / "convolution_milo.T1.json"


def write(tmp_path: Path, edit) -> Path:
    data = json.loads(T1.read_text())
    edit(data)
    path = tmp_path / "s.T1.json"
    path.write_text(json.dumps(data))
    return path


def test_a_t1_file_loads_its_parameters_values_defaults_and_kernel():
    s = target.load(T1)
    assert s.name == "convolution_milo" and s.target.replay_only
    bx = s.parameter("BLOCK_SIZE_X")
    assert bx.values == tuple(range(16, 257, 16)) and bx.default == 16 and bx.kernels == ("convolution_kernel",)
    assert s.parameter("READ_ONLY").values == (0, 1)          # flags: 0 is a value here
    assert s.replay.name_of("USE_SHMEM") == "use_shmem" and s.replay.kernel == "convolution_kernel"
    assert len({p.tag for p in s.parameters}) == len(s.parameters)


def test_t1_conditions_are_translated_into_the_constraint_language_and_hold_as_written():
    s = target.load(T1)
    assert s.constraints[0].expr == "USE_PADDING == 0 or BLOCK_SIZE_X % 32 != 0"
    base = {"BLOCK_SIZE_X": 16, "BLOCK_SIZE_Y": 1, "TILE_SIZE_X": 1, "TILE_SIZE_Y": 1, "READ_ONLY": 0,
            "USE_PADDING": 0, "USE_SHMEM": 0, "USE_CMEM": 1, "FILTER_HEIGHT": 15, "FILTER_WIDTH": 15}
    assert check(s, make_config(s, base)) is None
    assert check(s, make_config(s, {**base, "USE_PADDING": 1, "BLOCK_SIZE_X": 32, "USE_SHMEM": 1})) is not None
    # (32*4 + 14) * (16*4 + 14) = 11076 < 12288 holds; (64*4 + 14) * (16*1 + 14) = 8100 holds; 256*4 breaks it
    assert check(s, make_config(s, {**base, "USE_SHMEM": 1, "BLOCK_SIZE_X": 256, "TILE_SIZE_X": 4,
                                    "BLOCK_SIZE_Y": 4})) is not None
    assert s.size()[0] == 10240


def test_a_t1_membership_condition_is_translated_and_holds_as_written(tmp_path):
    path = write(tmp_path, lambda d: d["ConfigurationSpace"]["Conditions"].append(
        {"Expression": "block_size_x in [32, 64] or block_size_y not in (1, 2)", "Parameters": []}))
    s = target.load(path)
    assert s.constraints[-1].expr == "BLOCK_SIZE_X in [32, 64] or BLOCK_SIZE_Y not in (1, 2)"
    base = {"BLOCK_SIZE_X": 16, "BLOCK_SIZE_Y": 1, "TILE_SIZE_X": 1, "TILE_SIZE_Y": 1, "READ_ONLY": 0,
            "USE_PADDING": 0, "USE_SHMEM": 0, "USE_CMEM": 1, "FILTER_HEIGHT": 15, "FILTER_WIDTH": 15}
    assert "BLOCK_SIZE_X in [32, 64]" in check(s, make_config(s, base))
    assert check(s, make_config(s, {**base, "BLOCK_SIZE_X": 64})) is None
    assert check(s, make_config(s, {**base, "BLOCK_SIZE_Y": 4})) is None


@pytest.mark.parametrize("expression, says", [
    ("block_size_x in [16, block_size_y]", "in and not in take a list of 1 to 1024 integers"),
    ("block_size_x in range(16, 33)", "in and not in take a list"),
    ("len(block_size_x) > 1", "a call to len"),
    ("block_size_z > 1", "'block_size_z'"),
    ("block_size_x.bit_length() < 4", "a call to block_size_x.bit_length"),
])
def test_an_untranslatable_t1_condition_is_refused_in_one_line_naming_it(tmp_path, expression, says):
    path = write(tmp_path, lambda d: d["ConfigurationSpace"]["Conditions"].append({"Expression": expression,
                                                                                   "Parameters": []}))
    with pytest.raises(SweepError) as e:
        target.load(path)
    msg = str(e.value)
    assert "\n" not in msg and "Conditions[4]" in msg and repr(expression) in msg and says in msg


def test_t1_values_are_read_as_literals_never_run(tmp_path):
    path = write(tmp_path, lambda d: d["ConfigurationSpace"]["TuningParameters"][0].update(
        Values="__import__('os').system('false')"))
    with pytest.raises(SweepError, match=r"TuningParameters\[0\]\.Values: .* is not a list of values"):
        target.load(path)


def test_a_float_t1_parameter_is_refused_naming_its_type(tmp_path):
    path = write(tmp_path, lambda d: d["ConfigurationSpace"]["TuningParameters"][0].update(Type="float"))
    with pytest.raises(SweepError, match=r"Type: 'float' is not supported"):
        target.load(path)


def test_a_t1_space_on_a_gpu_executor_says_it_can_only_be_replayed(tmp_path, capsys):
    assert cli.main(["run", str(T1), "--executor", "debug", "--jobs-dir", str(tmp_path / "j")]) == 1
    err = capsys.readouterr().err
    assert "can only be replayed" in err and "--executor replay --from" in err
    assert not (tmp_path / "j").exists()
