"""Parameters that are not launch sizes: flags (type: flag, values: bool, or values [0, 1])
and enumerations (type: choice) take 0 without `min: 0`; launch sizes still refuse it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.core.errors import SweepError
from sweep.space import target


def load(tmp_path: Path, params: str):
    path = tmp_path / "space.yaml"
    path.write_text("parameters:\n" + params)
    return target.load(path)


def refused(tmp_path: Path, params: str) -> str:
    with pytest.raises(SweepError) as e:
        load(tmp_path, params)
    return str(e.value)


@pytest.mark.parametrize("spec", ["{values: bool}", "{type: flag}", "{values: [0, 1]}", "{values: [1, 0]}",
                                  "{type: flag, values: [0, 1]}"])
def test_a_flag_takes_0_and_1_without_min(tmp_path, spec):
    p = load(tmp_path, f"  USE_SHARED: {spec}\n").parameter("USE_SHARED")
    assert sorted(p.values) == [0, 1] and p.kind == "flag" and p.floor == 0


def test_a_flag_default_true_reads_as_1(tmp_path):
    assert load(tmp_path, "  USE_SHARED: {values: bool, default: true}\n").parameter("USE_SHARED").default == 1


def test_a_choice_takes_0_without_min(tmp_path):
    p = load(tmp_path, "  LAYOUT: {type: choice, values: [0, 1, 2]}\n").parameter("LAYOUT")
    assert p.values == (0, 1, 2) and p.kind == "choice"


def test_a_flag_refuses_a_value_other_than_0_or_1(tmp_path):
    msg = refused(tmp_path, "  USE_SHARED: {type: flag, values: [0, 2]}\n")
    assert "parameters.USE_SHARED: 2 is not 0 or 1" in msg and "type: choice" in msg


def test_a_launch_size_still_refuses_0_and_names_flag_and_choice_as_fixes(tmp_path):
    msg = refused(tmp_path, "  BLOCK: {values: [0, 32]}\n")
    assert "parameters.BLOCK.values: 0 is not a launch size" in msg
    assert "min: 0" in msg and "type: flag" in msg and "type: choice" in msg


def test_a_launch_size_is_the_default_type(tmp_path):
    p = load(tmp_path, "  BLOCK: {values: [32, 64]}\n").parameter("BLOCK")
    assert p.kind == "size" and p.floor == 1


def test_an_unknown_type_is_refused_naming_the_types(tmp_path):
    msg = refused(tmp_path, "  BLOCK: {type: boolean, values: [32]}\n")
    assert "parameters.BLOCK.type" in msg and "size" in msg and "flag" in msg and "choice" in msg


def test_values_bool_with_another_type_is_refused(tmp_path):
    assert "'bool' makes the parameter a flag" in refused(tmp_path, "  B: {type: choice, values: bool}\n")
