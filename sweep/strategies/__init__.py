"""Strategies: which configurations of a space to build and measure.

Each static strategy is a module with one `plan(space) -> Plan`, chosen by name
through STRATEGIES:

    tuples      seed 004's zipped tuples: explicit rows, or the value lists zipped
    grid        the cartesian product, under the constraints
    factorized  every build sets each parameter group to one of its values; since
                a profile times every kernel separately, one build measures all
                groups at once and the per-kernel argmin needs max(|group values|)
                builds instead of their product (the pick is confirmed end to end)
    random      `samples` distinct legal points, seeded

The model-based strategy (optuna: TPE) learns from results, so it is a Search
the driver asks for configs and tells objectives (lower is better); static
plans are wrapped in the same interface.

Combinations that break a constraint are never built: they are returned as
Skipped with the rule they break, so reports can count them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from sweep.errors import SweepError
from sweep.space import Config, Space, check, make_config

GRID_LIMIT = 200_000


@dataclass(frozen=True, slots=True)
class Skipped:
    config: Config
    reason: str


@dataclass(frozen=True, slots=True)
class Plan:
    configs: tuple[Config, ...]
    skipped: tuple[Skipped, ...] = ()
    note: str = ""


def legal(space: Space, candidates: Iterable[Config], want: int | None = None) -> Plan:
    """Split candidates into the legal ones and the skipped ones (first broken rule), dropping duplicates;
    with `want`, stop taking candidates once that many are legal."""
    seen, ok, skipped = set(), [], []
    for c in candidates:
        if want is not None and len(ok) >= want:
            break
        if c in seen:
            continue
        seen.add(c)
        reason = check(space, c)
        if reason is None:
            ok.append(c)
        else:
            skipped.append(Skipped(c, reason))
    return Plan(tuple(ok), tuple(skipped))


def grid_points(space: Space, params=None) -> Iterator[Config]:
    """Every combination of the swept parameters' values (or of `params`, others at their first value)."""
    swept = space.swept
    chosen = params if params is not None else swept
    fixed = {p.macro: p.values[0] for p in swept if p not in chosen}
    for combo in itertools.product(*(p.values for p in chosen)):
        yield make_config(space, {**fixed, **{p.macro: v for p, v in zip(chosen, combo)}})


def check_grid_size(space: Space) -> int:
    n, product = space.size()
    if n > GRID_LIMIT:
        raise SweepError(f"{space.path}: the grid has {n:,} points ({product}), over {GRID_LIMIT:,}; "
                         "use strategy: factorized or random (samples: N), or fewer values")
    return n


class Search:
    """What the driver talks to: ask for configs to run, tell what each measured."""

    skipped: list[Skipped]

    def ask(self, n: int) -> list[Config]:
        raise NotImplementedError

    def tell(self, config: Config, objective_ns: float | None) -> None:
        """objective_ns: the config's total kernel time (lower is better), None if it failed."""


class StaticSearch(Search):
    """A precomputed plan, handed out in one piece."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.skipped = list(plan.skipped)
        self._given = False

    def ask(self, n: int) -> list[Config]:
        if self._given:
            return []
        self._given = True
        return list(self.plan.configs)


def _registry() -> dict[str, Callable[[Space], Plan]]:
    from sweep.strategies import factorized, grid, random_sample, tuples

    return {"tuples": tuples.plan, "grid": grid.plan, "factorized": factorized.plan, "random": random_sample.plan}


STRATEGIES = ("tuples", "grid", "factorized", "random", "optuna")


def plan(space: Space) -> Plan:
    """The static plan of `space`'s strategy (not for optuna, which adapts)."""
    registry = _registry()
    if space.strategy.name not in registry:
        raise SweepError(f"strategy {space.strategy.name!r} has no static plan; use start()")
    return registry[space.strategy.name](space)


def start(space: Space) -> Search:
    """A Search for `space`'s strategy."""
    if space.strategy.name == "optuna":
        from sweep.strategies.optuna_tpe import TPESearch

        return TPESearch(space)
    return StaticSearch(plan(space))
