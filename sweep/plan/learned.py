"""`learning` and `auto`: the strategies for spaces too large to sweep whole.

learning  a surrogate model of each configuration's time learns from every result
          (sweep.plan.learning: a Gaussian process on log time, expected improvement
          weighted by a learned chance that a point builds and checks), proposing only
          legal points, in batches as large as the executor can run at once. It stops
          by itself when more evaluations are unlikely to pay (the summary says which
          rule stopped it) or at its budget: `budget` evaluations, or `budget_s`
          seconds of what the configurations cost on the GPU (their jobs' recorded
          time; under replay, what they cost when they were recorded). With
          `start_from` (a recording of the space: another GPU's sweep or brute force),
          its fastest legal configurations are the first proposals, in place of the
          space-filling start: bench/STRATEGIES.md measures what that saves. Where every
          swept parameter declares a default and that point is legal, it is the first
          proposal (`defaults_first`): the sweep then always measures the launch sizes the
          user has, so a budget spent elsewhere can never pick slower than them.
auto      sweeps a space of at most `whole` legal points whole (grid), and uses
          learning on a larger one; the first line says which and why.

Resuming: the driver tells a resumed sweep its earlier results before it asks, and
the model's proposals depend only on the seed and what it was told, so an
interrupted learning sweep asks for exactly what it would have asked for.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from sweep.plan.base import DEFAULTS_FIRST, GRID_LIMIT, IN_FLIGHT, Option, Plan, Search, StaticSearch, StrategySpec, \
    constant_rules_break, default_in_flight, defaults_to_propose, group_combinations, group_size
from sweep.plan.factorized import plan as factorized_plan
from sweep.plan.grid import plan as grid_plan
from sweep.plan.learning import Dim, LearningSearch
from sweep.plan.moves import PATIENCE, PATIENCE_GAIN
from sweep.plan.per_group import PerGroupSearch, RuledGroup
from sweep.space import Config, Parameter, Space, check, first_broken, group_constraints, groups, make_config, \
    swept_read_by

ENUMERATE_LIMIT = 200_000    # legal sets up to this size are scored whole; larger ones are sampled


def each_group_legal(space: Space) -> list[list[dict[str, int]] | None]:
    """Each parameter group's legal combinations (a constraint speaks about one group), None for
    a group too large to enumerate."""
    first = {p.macro: p.values[0] for p in space.swept}
    return [group_combinations(space, g, first)[0] if group_size(g) <= GRID_LIMIT else None for g in groups(space)]


def group_legal_sets(space: Space) -> list[list[dict[str, int]]] | None:
    """Each parameter group's legal combinations, or None when a group is too large to enumerate."""
    if any(group_size(g) > GRID_LIMIT for g in groups(space)):
        return None
    return each_group_legal(space)     # type: ignore[return-value]


def ruled_group(space: Space, group: list[Parameter]) -> RuledGroup:
    """A group too large to enumerate, for a model of its own: its rules (those naming it speak of
    it alone) tested at one of its combinations, and legal_sampler over it."""
    rules = group_constraints(space, group)
    mine = {p.macro for p in group}
    source = {m: s for m, s in space.followers.items() if s in mine}
    return RuledGroup(lambda sub: first_broken(rules, {**sub, **{m: sub[s] for m, s in source.items()}}) is None,
                      legal_sampler(space, group))


def legal_points(space: Space, combos: list[list[dict[str, int]]] | None | tuple[()] = ()) \
        -> list[dict[str, int]] | None:
    """Every legal point (swept parameters only) when the legal set is small enough to
    enumerate, built as the product of the groups' legal combinations (`combos`, from
    group_legal_sets when not given); None when it is too large."""
    combos = group_legal_sets(space) if combos == () else combos
    if combos is None or math.prod(len(c) for c in combos) > ENUMERATE_LIMIT:
        return None
    if constant_rules_break(space) is not None:
        return []
    points: list[dict[str, int]] = [{}]
    for c in combos:
        points = [{**p, **q} for p in points for q in c]
    return points


def legality_test(space: Space, combos: list[list[dict[str, int]]] | None | tuple[()] = ()) \
        -> Callable[[dict[str, int]], bool]:
    """Whether a point is legal, for a legal set too large to enumerate: a set lookup per
    parameter group (its legal combinations, `combos` or enumerated here) where every group
    is small enough, else every rule checked at the point."""
    combos = group_legal_sets(space) if combos == () else combos
    if combos is None or constant_rules_break(space) is not None:
        return lambda point: check(space, make_config(space, point)) is None
    macros = [tuple(p.macro for p in g) for g in groups(space)]
    allowed = [{tuple(c[m] for m in ms) for c in cs} for ms, cs in zip(macros, combos)]
    return lambda point: all(tuple(point[m] for m in ms) in ok for ms, ok in zip(macros, allowed))


def legal_sampler(space: Space, group: Sequence[Parameter] | None = None, max_steps: int = 20_000
                  ) -> Callable[[np.random.Generator, int], list[dict[str, int]]]:
    """Legal points (swept parameters only) by a randomized depth-first search: the parameters in
    order, each one's values in a random order, a rule checked as soon as every parameter it reads
    has a value, a dead end abandoned for the next value. For a legal set too large to enumerate and
    too sparse for uniform random points to hit (a 10^8-point grid with 45 legal points: 4,000 random
    candidates hold none, and the search had nothing to propose). Not uniform over the legal set:
    candidates for the model to rank, not a sample to estimate from. At most `max_steps` values
    tried per call (fewer points, or none, where the rules leave almost nothing). With `group`:
    that group's combinations, by the rules naming it."""
    swept = list(group) if group is not None else space.swept
    position = {p.macro: i for i, p in enumerate(swept)}
    source = {m: s for m, s in space.followers.items() if s in position}
    due: list[list] = [[] for _ in swept]    # the rules checkable once parameter i has its value
    for c in (group_constraints(space, list(group)) if group is not None else space.constraints):
        due[max((position[m] for m in swept_read_by(space, c)), default=0)].append(c)
    rules = [tuple(d) for d in due]

    def draw(rng: np.random.Generator, n: int) -> list[dict[str, int]]:
        out: list[dict[str, int]] = []
        steps = 0

        def extend(point: dict[str, int], i: int) -> bool:
            nonlocal steps
            if i == len(swept):
                return True
            for v in rng.permutation(len(swept[i].values)):
                steps += 1
                if steps > max_steps:
                    return False
                point[swept[i].macro] = swept[i].values[int(v)]
                values = {**point, **{m: point[s] for m, s in source.items() if s in point}}
                if first_broken(rules[i], values) is None and extend(point, i + 1):
                    return True
            del point[swept[i].macro]
            return False

        while len(out) < n and steps <= max_steps:
            point: dict[str, int] = {}
            if not extend(point, 0):
                break
            out.append(point)
        return out

    return draw


class LearnedSearch(Search):
    """The driver's Search over sweep.plan.learning's model."""

    def __init__(self, space: Space, options: dict | None = None,
                 points: list[dict[str, int]] | None | tuple[()] = (), start: Sequence[dict[str, int]] = (),
                 combos: list[list[dict[str, int]] | None] | tuple[()] = ()):
        """points: the legal set when the caller has enumerated it already (auto), None when it is
        too large to; () (the default) enumerates it here. combos: each group's legal combinations
        when the caller has them (auto, validate; None for a group too large to list), () to list them here. start: the fastest recorded configurations
        of the `start_from` recording, fastest first (sweep.pipeline.recorded.start_points): the first
        proposals."""
        o = options if options is not None else SPEC.values(space.strategy)
        self.space = space
        self.skipped = []                  # only legal points are proposed
        self.budget, self.budget_s = o["budget"], o["budget_s"]
        self.in_flight = o.get("in_flight") or default_in_flight(self.budget)
        self.spent_s = 0.0
        self.told = 0
        self.asked = 0
        self.stopped = ""                  # why it stopped, once it has
        gs = groups(space)
        per_group = bool(o.get("per_group")) and len(gs) > 1 and constant_rules_break(space) is None
        if combos != ():
            each = combos
        elif per_group:
            each = each_group_legal(space)
        else:
            each = group_legal_sets(space) if points == () or points is None else None
        combos = each if each is not None and None not in each else None
        # a declared enumeration (type: choice) is modelled with no order among its values
        dims = [Dim(p.macro, tuple(p.values), "choice" if p.kind == "choice" else "ordinal") for p in space.swept]
        default = defaults_to_propose(space, o)
        starts = ([default] if default else []) + list(start)
        if per_group:
            # each group's legal combinations are all it needs (the product is never listed); a group
            # too large to list is searched by its rules
            legal = [c if c is not None else ruled_group(space, g) for g, c in zip(gs, each)]
            self.legal = math.prod(len(c) for c in each) if None not in each else None
            self.model = PerGroupSearch([tuple(p.macro for p in g) for g in gs], dims, legal, seed=o["seed"],
                                        budget=self.budget, patience=o.get("patience", PATIENCE), start=starts)
            sizes = " x ".join(f"{len(c):,}" if c is not None else f"a {group_size(g):,}-point grid"
                               for g, c in zip(gs, each))
            per_group_note = f"; a model per parameter group ({len(gs)}: {sizes}{' legal' if self.legal else ''})"
        else:
            if points == ():
                points = legal_points(space, combos)
            self.legal = len(points) if points is not None else None
            self.model = LearningSearch(dims, None if points is not None else legality_test(space, combos),
                                        legal_points=points, seed=o["seed"], budget=self.budget,
                                        patience=o.get("patience", PATIENCE), start=starts,
                                        sample_legal=legal_sampler(space) if points is None else None)
            per_group_note = ""
        size = f"{self.legal:,} legal points" if self.legal is not None else f"a {space.size()[0]:,}-point grid"
        self.note = (f"learning: {size}{per_group_note}; at most {self.budget} evaluations"
                     + (f" or {self.budget_s:g} GPU-seconds" if self.budget_s else "")
                     + f", {self.in_flight} awaiting results at most (seed {o['seed']})"
                     + ("; first the declared defaults" if default else "")
                     + (f"; {'then' if default else 'first'} the {len(self.model.start_keys) - bool(default)} fastest "
                        f"configurations recorded in {Path(o['start_from']).name}" if start else ""))

    def ask(self, n: int) -> list[Config]:
        if self.stopped:
            return []
        left = self.budget - self.asked
        if left <= 0:
            self.stopped = f"its budget of {self.budget} evaluations is spent"
            return []
        if self.budget_s:
            fit = self._fit_budget_s()
            if fit == 0:
                return []          # what is in flight is expected to spend the rest: asked again as each ends
            left = min(left, fit)
        reason = self.model.stop() if self.told else None
        if reason:
            self.stopped = reason
            return []
        room = self.in_flight - (self.asked - self.told)
        if room <= 0:      # enough proposals await their results; asked again as each one ends
            return []
        points = self.model.ask(min(n, left, room))
        if not points:
            self.stopped = ("every legal point has been measured" if self.legal is not None else
                            "no untried legal point was found: neither random points of the grid nor a search of "
                            "its rules found one (the rules leave few or none)")
        self.asked += len(points)
        return [make_config(self.space, p) for p in points]

    def _fit_budget_s(self) -> int:
        """How many more proposals the GPU-seconds budget is expected to pay for: its rest, less what
        the proposals in flight are expected to cost (the mean of the told ones'), over that mean.
        Until a told configuration has cost anything there is nothing to expect a cost from, so one
        proposal goes at a time: a first wave of `in_flight` proposals could spend ten configurations'
        worth of a budget of two, and a first configuration that failed before it was timed (a build
        ptxas refused, recorded at 0 s) says nothing of what the next will cost.
        Sets `stopped` once nothing is in flight and the rest would not pay for another, so the
        configurations cost at most about the budget, not the budget and every proposal in flight at
        the moment it was reached."""
        in_flight = self.asked - self.told
        if self.spent_s >= self.budget_s and not in_flight:
            self.stopped = f"its budget of {self.budget_s:g} GPU-seconds is spent ({self.spent_s:.1f} s)"
            return 0
        if self.spent_s <= 0:
            return 0 if in_flight else 1
        each = self.spent_s / self.told
        rest = self.budget_s - self.spent_s - in_flight * each
        fit = int(rest // each)
        if fit <= 0 and not in_flight:
            self.stopped = (f"its budget of {self.budget_s:g} GPU-seconds leaves no room for another configuration "
                            f"({self.spent_s:.1f} s spent, {each:.1f} s a configuration on average)")
        return max(0, fit)

    @property
    def wants_parts(self) -> bool:
        """Whether tell() takes each parameter group's own objective (a model per group)."""
        return isinstance(self.model, PerGroupSearch)

    def tell(self, config: Config, objective_ns: float | None, failure: str | None = None,
             cost_s: float | None = None, parts: dict[tuple[str, ...], float] | None = None) -> None:
        """parts: each group's objective (its macros: the time of the kernels they govern), for a
        model per group; without them it is told the total."""
        point = {p.macro: config[p.macro] for p in self.space.swept}
        failure = None if objective_ns is not None else (failure or "failed")
        if isinstance(self.model, PerGroupSearch):
            self.model.tell(point, objective_ns, failure=failure, parts=parts)
        else:
            self.model.tell(point, objective_ns, failure=failure)
        self.told += 1
        self.spent_s += cost_s or 0.0


def auto_search(space: Space, start: Sequence[dict[str, int]] = (),
                combos: list[list[dict[str, int]] | None] | tuple[()] = ()) -> Search:
    """The whole grid for a space of at most `whole` legal points; factorized where the parameters
    fall into several groups (macros read by different kernels) of at most `whole` legal
    combinations each: every combination of every group in as many builds as the largest has; else
    the learning strategy (a model per group where there are several). combos: each group's legal
    combinations when the caller has listed them (validate; None for a group too large to), () to list
    them here."""
    o = SPEC_AUTO.values(space.strategy)
    each = combos
    combos = group_legal_sets(space) if each == () else each if None not in each else None
    points = legal_points(space, combos)
    if points is not None and len(points) <= o["whole"]:
        plan = grid_plan(space)
        note = (f"auto: {len(points):,} legal points, at most {o['whole']}: the whole grid "
                f"(the learning strategy pays on larger spaces)")
        return StaticSearch(Plan(plan.configs, plan.skipped, note))
    legal = len(points) if points is not None else math.prod(map(len, combos)) if combos is not None else None
    size = f"{legal:,} legal points" if legal is not None else "a legal set too large to count"
    if combos is not None and len(combos) > 1 and max(map(len, combos)) <= o["whole"] \
            and constant_rules_break(space) is None:
        plan = factorized_plan(space)
        note = (f"auto: {size} in {len(combos)} groups of macros read by different kernels, each of at most "
                f"{o['whole']} legal combinations: every combination of each group ({plan.note})")
        return StaticSearch(Plan(plan.configs, plan.skipped, note))
    search = LearnedSearch(space, {k: o[k] for k in ("budget", "budget_s", "seed", "in_flight", "patience",
                                                     "defaults_first", "per_group", "start_from")}, points, start,
                           combos if combos is not None else each)
    search.note = f"auto: {size}, over {o['whole']}: " + search.note
    return search


_BUDGETS = (
    Option("budget", int, 100, "evaluations at most (failed ones count)", lo=1, hi=1_000_000),
    Option("budget_s", int, 0, "GPU-seconds the configurations may cost at most (0: no limit): one goes at a time until "
                               "one has cost anything, "
                               "and no proposal is made that what is in flight is expected to leave no room for", lo=0),
    Option("seed", int, 0, "seeds the model: the same seed and results ask for the same configurations"),
    Option("patience", int, PATIENCE, f"stop once the best time gained no more than {PATIENCE_GAIN:.1%} in this many "
                                      "evaluations, nor in the last half of all (0: only the budget stops it)", lo=0),
    IN_FLIGHT,
    DEFAULTS_FIRST,
    Option("per_group", bool, True, "a model per parameter group where there are several (groups govern kernels timed "
                                    "apart), each told its own kernels' time, each build the next proposal of every "
                                    "group (bench/separable.py); off: one model of the summed time"),
    Option("start_from", str, "", "a recording of this space (a Kernel Tuner cache, T4 results, or an earlier sweep's "
                                  "results/<name>/, e.g. on another GPU): its fastest legal configurations are the first "
                                  "proposals (a path relative to the space file's folder)"),
)


SPEC = StrategySpec(
    "learning", "a surrogate model learns from every result and proposes legal points in batches; stops by "
                "itself when more evaluations are unlikely to pay, or at its budget",
    options=_BUDGETS, search=LearnedSearch)

SPEC_AUTO = StrategySpec(
    "auto", "the whole grid for a space of at most `whole` legal points, else the learning strategy",
    options=(Option("whole", int, 64, "the most legal points swept whole", lo=1, hi=GRID_LIMIT), *_BUDGETS),
    search=auto_search)
