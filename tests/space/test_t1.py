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


# -- the hub's other T1 files: value lists written as Python, a default written as a list ----------
HUB = T1.parent


def test_the_hubs_value_lists_written_as_python_are_read_without_running_them():
    s = target.load(HUB / "hotspot_milo.T1.json")
    assert s.parameter("BLOCK_SIZE_X").values == (1, 2, 4, 8, 16, *range(32, 1025, 32))
    assert s.parameter("BLOCK_SIZE_Y").values == (1, 2, 4, 8, 16, 32)        # [2**i for i in range(0, 6)]
    assert s.parameter("LOOP_UNROLL_FACTOR_T").values == tuple(range(1, 11))
    assert s.size()[0] == 4_440_000


@pytest.mark.parametrize("values, read", [
    ("[1] + [2 * i for i in range(1, 11)]", (1, *range(2, 21, 2))),           # the hub's pnpoly tile_size
    ("[32 * i for i in range(1, 32)]", tuple(range(32, 993, 32))),
    ("[i for i in range(1, 65) if i % 16 == 0 or not i > 2]", (1, 2, 16, 32, 48, 64)),
    ("list((8, 16)) + [-(-64)]", (8, 16, 64)),
    ("[i for i in range(8) if i in [2, 4] or max(i, 6) == i]", (2, 4, 6, 7)),   # the constraint language's in, max
])
def test_a_t1_value_expression_gives_the_values_python_would(tmp_path, values, read):
    path = write(tmp_path, lambda d: d["ConfigurationSpace"]["TuningParameters"][0].update(Values=values))
    assert target.load(path).parameter("BLOCK_SIZE_X").values == read == tuple(eval(values))


@pytest.mark.parametrize("values, says", [
    ("[open(i) for i in range(3)]", "a call to open"),
    ("[i for i in range(10**9)]", "range of 1,000,000,000 values, over the 4096"),
    ("[2**100]", "1267650600228229401496703205376 is not an integer from 0 to"),
    ("[2**100000]", "'2 ** 100000': 2 ** 100000 is too large"),
    ("[i.bit_length() for i in range(3)]", "'i.bit_length()' uses a call to i.bit_length"),
    ("[x for i in range(3)]", "'x' is a name no comprehension here binds"),
    ("[1] + 2", "mixes lists and integers"),
    ("[i / 2 for i in range(4)]", "'i / 2' is 0.0, not an integer"),
    ("[[1]]", "'[1]' is a list where an integer belongs"),
    ("[1 // 0]", "integer division or modulo by zero"),
    ("[1, 2][0]", "is not a list: write lists, + of lists, range(), list() and list comprehensions"),
])
def test_a_t1_value_expression_beyond_the_reader_is_refused_in_one_line_naming_it(tmp_path, values, says):
    path = write(tmp_path, lambda d: d["ConfigurationSpace"]["TuningParameters"][0].update(Values=values))
    with pytest.raises(SweepError) as e:
        target.load(path)
    msg = str(e.value)
    assert "\n" not in msg and "TuningParameters[0].Values" in msg and says in msg


def test_a_t1_default_written_as_a_list_of_one_is_its_value():
    s = target.load(HUB / "gemm_milo.T1.json")
    assert s.parameter("GEMMK").default == 0 and s.parameter("MWG").default == 64


@pytest.mark.parametrize("name", ["gemm_milo", "dedispersion_milo"])
def test_the_hubs_conditions_select_the_points_pythons_own_reading_selects(name):
    import itertools

    from sweep.space.configs import _checker

    path = HUB / f"{name}.T1.json"
    s = target.load(path)
    raw = json.loads(path.read_text())["ConfigurationSpace"]
    names = [p["Name"] for p in raw["TuningParameters"]]
    # the published expressions, run by Python itself: the reference the translation must match
    originals = [compile(c["Expression"], name, "eval") for c in raw["Conditions"]]
    check_all, args = _checker(s.constraints)
    at = [[p.macro for p in s.parameters].index(a) for a in args]
    ours = theirs = 0
    for combo in itertools.product(*(p.values for p in s.parameters)):
        ours += check_all(*(combo[i] for i in at)) == -1
        theirs += all(eval(c, {}, dict(zip(names, combo))) for c in originals)
    assert ours == theirs and ours == {"gemm_milo": 116_928, "dedispersion_milo": 11_130}[name]


def test_t1_parameters_whose_initials_clash_are_tagged_by_their_names():
    from sweep.space import tag

    s = target.load(HUB / "dedispersion_milo.T1.json")
    assert [p.tag for p in s.parameters] == ["BSX", "BSY", "BSZ", "TILESIZEX", "TILESIZEY", "TILESTRIDEX",
                                             "TILESTRIDEY", "LUFC"]
    c = make_config(s, {"BLOCK_SIZE_X": 2, "BLOCK_SIZE_Y": 32, "BLOCK_SIZE_Z": 1, "TILE_SIZE_X": 2, "TILE_SIZE_Y": 1,
                        "TILE_STRIDE_X": 0, "TILE_STRIDE_Y": 0, "LOOP_UNROLL_FACTOR_CHANNEL": 0})
    assert tag(s, c) == "BSX2_BSY32_BSZ1_TILESIZEX2_TILESIZEY1_TILESTRIDEX0_TILESTRIDEY0_LUFC0"
