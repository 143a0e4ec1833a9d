"""Strategies: which configurations of a space to build and measure.

Each strategy is a module that declares a module-level SPEC (a StrategySpec:
its name, what it does, the options it takes with their types, defaults and
docs) and one entry point: `plan(space) -> Plan` for a static strategy, or a
Search for one that learns from results. REGISTRY is built from those modules,
in this order, and every list of names (STRATEGIES, the CLI's --strategy, the
loader's checks) comes from it:

    tuples      seed 004's zipped tuples: explicit rows, or the value lists zipped
    grid        the cartesian product, under the constraints
    factorized  every build sets each parameter group to one of its values; since
                a profile times every kernel separately, one build measures all
                groups at once and the per-kernel argmin needs max(|group values|)
                builds instead of their product (the pick is confirmed end to end)
    random      `samples` distinct points drawn from the legal set, seeded
    optuna      TPE, learning from each batch's results (lower is better), with the
                constraints handed to the sampler
    learning    a surrogate model over the legal set, learning where configurations
                are fast and where they fail; batches; stops by itself or at a budget
    auto        the whole grid for a small space, learning for a large one

A space file giving a strategy an option it does not declare is refused, naming
what the strategy takes (see sweep.space.sections). Static plans are handed to
the driver through the same ask/tell interface as a Search. Combinations that
break a constraint are never built: they are returned as Skipped with the rule
they break, so reports can count them.
"""

from __future__ import annotations

from typing import Sequence

from sweep.core.errors import SweepError
from sweep.space import Space, declared
from sweep.plan import factorized, grid, learned, optuna_tpe, random_sample, tuples
from sweep.plan.base import GRID_LIMIT, Option, Plan, Search, Skipped, StaticSearch, StrategySpec, \
    check_grid_size, grid_points, legal

REGISTRY: dict[str, StrategySpec] = {s.name: s for s in (tuples.SPEC, grid.SPEC, factorized.SPEC, random_sample.SPEC, optuna_tpe.SPEC,
                                                learned.SPEC, learned.SPEC_AUTO)}
for _spec in REGISTRY.values():      # the space loader checks a file's strategy against these
    declared.declare(_spec)
STRATEGIES = declared.NAMES

__all__ = ["GRID_LIMIT", "REGISTRY", "STRATEGIES", "Option", "Plan", "Search", "Skipped", "StaticSearch",
           "StrategySpec", "check_grid_size", "grid_points", "legal", "plan", "start", "spec"]


def spec(space: Space) -> StrategySpec:
    """The declaration of `space`'s strategy."""
    name = space.strategy.name
    if name not in REGISTRY:
        raise SweepError(f"{space.path}: strategy {name!r} is not a strategy; choose one of {', '.join(STRATEGIES)}")
    return REGISTRY[name]


def plan(space: Space) -> Plan:
    """The static plan of `space`'s strategy (not for one that adapts, such as optuna)."""
    s = spec(space)
    if s.plan is None:
        raise SweepError(f"strategy {s.name!r} has no static plan; use start()")
    return s.plan(space)


def start(space: Space, warm: Sequence[dict[str, int]] = ()) -> Search:
    """A Search for `space`'s strategy; `warm`: the points a strategy that takes `start_from` (learning,
    auto) proposes first, read from that recording by the caller (sweep.pipeline.recorded)."""
    s = spec(space)
    if s.search is None:
        return StaticSearch(s.plan(space))
    return s.search(space, start=warm) if warm else s.search(space)
