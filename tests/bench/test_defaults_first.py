"""bench/defaults_first.py: a space's strategy replayed with its declared defaults as the first
proposal and without them, on a committed brute force."""

from __future__ import annotations

import re

import pytest

from bench import defaults_first


def test_the_defaults_first_runs_start_at_the_defaults_and_the_others_do_not():
    lines = defaults_first.compare_case("stencil_large_H200", seeds=2, budgets=[1, 5], jobs=1)
    assert lines[0] == ("stencil_large_H200 (examples/stencil_cmake/space_large.yaml, learning): the declared defaults "
                        "are 2.003x the optimum")
    first, none = (dict(re.findall(r"(@\d+) (\S+)", line)) for line in lines[1:3])
    assert lines[1].startswith("  defaults first") and lines[2].startswith("  no defaults")
    assert first["@1"] == "2.003"                         # each run's first evaluation: the defaults
    assert none["@1"] != "2.003"
    assert float(first["@5"]) <= float(first["@1"])


def test_a_space_without_legal_defaults_is_named_so():
    space = defaults_first.target.load(defaults_first.ROOT / defaults_first.CASES["dedisp_H200"])
    assert defaults_first.defaults_ratio(defaults_first.without_defaults(space),
                                         defaults_first.DATA / "dedisp_H200.json.gz") is None
    assert defaults_first.defaults_ratio(space, defaults_first.DATA / "dedisp_H200.json.gz") == pytest.approx(1.823, abs=1e-3)
