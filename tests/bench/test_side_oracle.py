"""bench/side_oracle.py: the learning strategy told which side of a switch to search."""

from __future__ import annotations

import pytest

from bench.side_oracle import SideOracle, parse_side
from sweep.plan.learning import Dim


def _space() -> dict:
    # a switch `s` and a size `x`; every point legal
    return {"name": "toy", "keys": ["x", "s"], "params": {"x": [1, 2, 3, 4, 5, 6, 7, 8], "s": [0, 1]}}


def test_every_share_th_model_step_proposes_a_point_on_the_given_side():
    # 16 points a side, 20 evaluations: the side never runs out
    dims = [Dim("x", tuple(range(1, 17))), Dim("s", (0, 1))]
    legal = [{"x": x, "s": s} for x in range(1, 17) for s in (0, 1)]
    search = SideOracle(dims, side=("s", 1), share=2, legal_points=legal, seed=0, budget=20)
    asked = []
    while search.stop() is None:
        (p,) = search.ask(1)
        asked.append(p)
        search.tell(p, 1.0 + p["x"] / 10 + (0.5 if p["s"] == 1 else 0.0))   # s=1 is the worse side
    start = search.n_init
    side_steps = [p for i, p in enumerate(asked) if i >= start and i % 2 == 1 and
                  sum(q["s"] == 1 for q in asked[:i]) >= 3]
    assert len(side_steps) >= 5 and all(p["s"] == 1 for p in side_steps)


def test_a_side_that_is_not_a_two_valued_parameter_is_refused_naming_the_switches():
    with pytest.raises(SystemExit) as e:
        parse_side("x=1", _space())
    assert "'x' is not a two-valued parameter of toy (those are: s)" in str(e.value)
    with pytest.raises(SystemExit) as e:
        parse_side("s=2", _space())
    assert "s takes 0 or 1" in str(e.value)
    assert parse_side("s=1", _space()) == ("s", 1)
