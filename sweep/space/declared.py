"""The strategies a space file may name, as the plan stage declares them.

A space file names its strategy and gives it options; the loader checks both
against the strategy's declaration (its options with their types and defaults).
The declarations are the plan stage's (each strategy module's SPEC, sweep.plan),
a later stage than this one, so they reach the loader the other way round: each
is registered here when sweep.plan is imported, and `import sweep` imports it
first, so every loader sees every strategy.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence


class Declaration(Protocol):
    """What the loader reads of a strategy's declaration (sweep.plan.base.StrategySpec)."""

    name: str
    options: Sequence[Any]
    check: Any


STRATEGIES: dict[str, Declaration] = {}
NAMES: tuple[str, ...] = ()       # the strategies' names in declaration order (sweep.plan.STRATEGIES is this)


def declare(spec: Declaration) -> Declaration:
    """Register a strategy's declaration under its name (the plan stage does, on import)."""
    global NAMES
    STRATEGIES[spec.name] = spec
    NAMES = tuple(STRATEGIES)
    return spec
