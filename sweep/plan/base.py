"""What every strategy shares: its declaration (StrategySpec, Option), what it
returns (Plan, Skipped, or a Search the driver asks and tells), and the helpers
that enumerate points and sort the legal from the skipped."""

from __future__ import annotations

import gc
import itertools
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

from sweep.core.errors import SweepError
from sweep.space import MAX_VALUE, Config, Parameter, Space, Strategy, check, first_broken, group_constraints, \
    make_config
from sweep.space import expr
from sweep.space.configs import reason
from sweep.space.legality import first_broken_index
from sweep.space.sections import integer, show

GRID_LIMIT = 200_000


@dataclass(frozen=True, slots=True)
class Option:
    """An option a strategy takes: its key in the space file, type, default and what it does."""

    name: str
    type: type                 # int, bool, str (a path: start_from) or list
    default: Any
    doc: str
    lo: int = 0                # bounds of an int option
    hi: int = MAX_VALUE

    def check(self, value: Any, where: str) -> Any:
        """`value` if it has this option's type (and bounds), else a SweepError at `where`."""
        if self.type is int:
            return integer(value, where, self.lo, self.hi)
        if not isinstance(value, self.type):
            what = "true or false" if self.type is bool else f"a {self.type.__name__}"
            raise SweepError(f"{where}: {show(value)} must be {what} ({self.name}: {self.doc})")
        return value


@dataclass(frozen=True, slots=True)
class StrategySpec:
    """What a strategy module declares (as its module-level SPEC): its name, what it
    does, the options it takes, and one entry point: `plan(space) -> Plan` for a
    static strategy, or `search(space) -> Search` for one that learns from results.
    `check(options, parameters, at)` may check options against each other and the
    parameters when a space loads (at(option) names its place in the file)."""

    name: str
    doc: str
    options: tuple[Option, ...] = ()
    plan: Callable[[Space], Plan] | None = None
    search: Callable[[Space], Search] | None = None
    check: Callable[[dict[str, Any], Sequence[Parameter], Callable[[str], str]], dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        if (self.plan is None) == (self.search is None):
            raise TypeError(f"strategy {self.name}: declare exactly one of plan and search")

    def takes(self, option: str) -> bool:
        """Whether this strategy declares `option`."""
        return any(o.name == option for o in self.options)

    def values(self, strategy: Strategy) -> dict[str, Any]:
        """This strategy's options for `strategy`: the given values, else the declared defaults."""
        given = dict(strategy.options)
        return {o.name: given.get(o.name, o.default) for o in self.options}


IN_FLIGHT = Option("in_flight", int, 0, "proposals awaiting their results at most (0: a tenth of the budget, at "
                   "least 4): more keep more GPUs and builds busy, fewer let each proposal learn from more results",
                   lo=0, hi=100_000)


DEFAULTS_FIRST = Option("defaults_first", bool, True,
                        "propose the declared defaults first, where every swept parameter declares one and they are "
                        "legal: the sweep measures the launch sizes the target has, so its pick is never slower than "
                        "them as measured")


def declared_default_point(space: Space) -> dict[str, int] | None:
    """The swept parameters' declared defaults as a point, when every one declares a default among
    its values and the point is legal; else None (the baseline job still runs the target's own)."""
    d = space.declared_defaults(p.macro for p in space.swept)
    if d is None or any(d[p.macro] not in p.values for p in space.swept):
        return None
    return d if check(space, make_config(space, d)) is None else None


def defaults_to_propose(space: Space, options: dict[str, Any] | None = None) -> dict[str, int] | None:
    """The point a strategy declaring DEFAULTS_FIRST proposes first: declared_default_point, unless
    its options (`options`, else the space's strategy's) say `defaults_first: false`."""
    given = options if options is not None else dict(space.strategy.options)
    return declared_default_point(space) if given.get("defaults_first", True) else None


def default_in_flight(budget: int) -> int:
    """A tenth of the budget, at least 4. A two-GPU machine asked for 72 configurations at once, so
    a 100-evaluation sweep proposed 72 of them before its first result: it ended at 1.11x the
    optimum its space's brute force found, where the same strategy told each result before the
    next proposal reaches the optimum in every replayed seed."""
    return max(4, budget // 10)


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


class Ticker:
    """A line to stderr every `every_s` seconds while a long plan is made (none for a quick one)."""

    def __init__(self, what: str, every_s: float = 3.0):
        self.what, self.every_s = what, every_s
        self.t0 = self.last = time.monotonic()

    def __call__(self, done: int, of: int, unit: str = "constraints") -> None:
        now = time.monotonic()
        if now - self.last >= self.every_s:
            self.last = now
            print(f"{self.what}: {done:,} of {of:,} {unit} ({now - self.t0:.0f} s)", file=sys.stderr, flush=True)


def legal_grid(space: Space) -> Plan:
    """Every point of the grid, split into the legal ones and the skipped ones (first
    broken rule), as legal(space, grid_points(space)) but with each rule tested once per
    combination of the parameters it reads (sweep.space.legality), not once per point."""
    swept = space.swept
    n = space.size()[0]
    tick = Ticker(f"{space.name}: planning {n:,} points")
    derived = space.followers
    first = first_broken_index(swept, derived, space.constraints, tick).tolist()
    ok, skipped = [], []
    # make_config's result without its per-point dicts: every parameter's value is a swept
    # one's (a derived parameter's is its source's), in the space's order
    position = {p.macro: i for i, p in enumerate(swept)}
    order = tuple(p.macro for p in space.parameters)
    source = [position[p.equals or p.macro] for p in space.parameters]
    gc_was_on = gc.isenabled()
    gc.disable()   # 200,000 new tuples, none cyclic: the collector would rescan them all, again and again
    try:
        for i, combo in enumerate(itertools.product(*(p.values for p in swept))):
            c = Config(tuple(zip(order, [combo[j] for j in source])))
            if first[i] < 0:
                ok.append(c)
            else:
                skipped.append(Skipped(c, reason(space.constraints[first[i]], c.as_dict())))
            if i % 65536 == 65535:
                tick(i + 1, n, "points made")
    finally:
        if gc_was_on:
            gc.enable()
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
        fix = ("a T1 file names no strategy: give one on the command line, --strategy learning (or auto, random)"
               if space.target.replay_only else "use strategy: learning, factorized or random (samples: N) in "
                                                "the file or --strategy on the command line, or fewer values")
        raise SweepError(f"{space.path}: the grid has {n:,} points ({product}), over {GRID_LIMIT:,}; {fix}")
    return n


def group_size(group: Sequence[Parameter]) -> int:
    n = 1
    for p in group:
        n *= len(p.values)
    return n


def group_combinations(space: Space, group: Sequence[Parameter],
                       base: dict[str, int]) -> tuple[list[dict[str, int]], list[Skipped]]:
    """Every combination of `group`'s values, split into those the group's constraints
    allow and the rest, each Skipped for the first rule it breaks (recorded with the
    other parameters at `base`). A group's constraints name only its parameters
    (see sweep.space.groups), so no other value changes the split. The rules are tested
    per combination of the parameters each reads (sweep.space.legality), as the grid's are,
    with a progress line every few seconds for a large group."""
    rules = group_constraints(space, group)
    derived = list(space.followers.items())
    n = group_size(group)
    tick = Ticker(f"{space.name}: planning {n:,} combinations of {', '.join(p.macro for p in group)}")
    first = first_broken_index(group, dict(derived), rules, tick).tolist() if rules else [-1] * n
    macros = tuple(p.macro for p in group)
    ok, skipped = [], []
    for i, values in enumerate(itertools.product(*(p.values for p in group))):
        chosen = dict(zip(macros, values))
        if first[i] < 0:
            ok.append(chosen)
        else:
            full = {**base, **chosen}
            full.update((m, full[src]) for m, src in derived)
            skipped.append(Skipped(make_config(space, full), reason(rules[first[i]], full)))
        if i % 65536 == 65535:
            tick(i + 1, n, "combinations made")
    return ok, skipped


def constant_rules_break(space: Space) -> str | None:
    """Why every point is illegal when a rule naming no parameter is false ("1 > 2"), else
    None: such a rule is in no group's constraints, and has the same value at every point, so
    it is checked once here, not once a point."""
    macros = {p.macro for p in space.parameters}
    rules = tuple(c for c in space.constraints if not (expr.names(c.expr) & macros))
    return first_broken(rules, {}) if rules else None


class Search:
    """What the driver talks to: ask for configs to run, tell what each measured."""

    skipped: list[Skipped]

    def ask(self, n: int) -> list[Config]:
        raise NotImplementedError

    def tell(self, config: Config, objective_ns: float | None, failure: str | None = None,
             cost_s: float | None = None) -> None:
        """objective_ns: the config's total kernel time (lower is better), None if it failed;
        failure: then its status (compile_failed, verify_failed, ...); cost_s: what its job
        cost on the GPU (seconds), where known."""


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
