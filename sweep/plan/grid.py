"""The full cartesian product of the swept parameters, under the constraints."""

from __future__ import annotations

from sweep.space import Space
from sweep.plan.base import Plan, StrategySpec, check_grid_size, legal_grid


def plan(space: Space) -> Plan:
    n = check_grid_size(space)
    p = legal_grid(space)
    return Plan(p.configs, p.skipped, f"grid: {n} points ({space.size()[1]}), {len(p.configs)} legal")


SPEC = StrategySpec("grid", "every combination of the swept parameters' values, each illegal one skipped with its rule",
                    plan=plan)
