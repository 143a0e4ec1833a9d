"""A learning search per parameter group, for spaces whose groups govern kernels timed apart.

A profile times each kernel separately and the picks are made per kernel (sweep.decide), so a
space whose parameter groups (sweep.space.groups) govern different kernels is separable: one
build measures a point of every group. PerGroupSearch keeps a LearningSearch (sweep.plan.learning)
per group, told the time of that group's own kernels, and makes each build of the next proposal
of every group. bench/separable.py measures what it gains over one model of the summed time
(two brute-forced spaces as one program, 20 seeds: a mean best-found / optimum at 50 builds of
1.003 against 1.077 and of 1.026 against 1.058; bench/STRATEGIES.md).

    search = PerGroupSearch(groups, dims, legal, seed=0, budget=100)
    for point in search.ask(4):
        search.tell(point, total_time, parts={("A_TILE", "A_K"): a_time, ("B_BLOCK",): b_time})

- A group with nothing left to propose repeats its best point (or its first start point, or
  its first legal combination), as factorized's fillers do.
- A failed build fails every group whose point was new in it: which group's values broke it is
  not known.
- A point at which none of a group's kernels was timed is told as failed ("not_timed"): nothing
  measured can pick it for those kernels, and it is not asked again. A value can keep a kernel
  from running (a switch that fuses it into another), so the group searches on.
- A group whose kernels no build measures (a check's reference kernel, run before the timed
  part) stays at its filler once MUTED_AFTER of its points have been built with none of its
  kernels timed and none ever was: its values change nothing measured.
- Without per-group times (`parts` None: a recording that keeps only totals) each new point is
  told the total, as one model would be.
- Determinism: a build's result told again after an interruption, before any ask, is told to
  each group whose point it has not been told, in the order of the results, so a resumed sweep
  asks what it would have asked.
- A group too large to list (a RuledGroup) is searched as learning searches a large space: by
  its rules and a sampler of legal combinations.
Pure: numpy and sweep.plan.learning only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from .learning import Dim, LearningSearch

MUTED_AFTER = 3     # points of a group built with none of its kernels timed, before any was: a group never timed


@dataclass(frozen=True)
class RuledGroup:
    """A group too large to enumerate (a tile group of eight macros: 663,552,000 combinations):
    its rules as a test of one of its combinations, and a sampler of legal ones
    (sweep.plan.learned.legal_sampler over the group)."""

    is_legal: Callable[[dict], bool]
    sample_legal: Callable[[np.random.Generator, int], list[dict]]


class PerGroupSearch:
    """LearningSearch's protocol (ask, tell, stop, start_keys) over one model per group."""

    def __init__(self, groups: Sequence[tuple[str, ...]], dims: Sequence[Dim], legal: Sequence[list[dict] | RuledGroup],
                 seed: int = 0, budget: int | None = None, patience: int | None = None, start: Sequence[dict] = ()):
        """groups: each group's parameter names; dims: every parameter's Dim; legal: each group's
        legal combinations, or its RuledGroup where they are too many to list; start: whole points
        to propose first (each group takes its part)."""
        by_name = {d.name: d for d in dims}
        self.groups = [tuple(g) for g in groups]
        self.budget = budget
        kw = {} if patience is None else {"patience": patience}

        def model(group: tuple[str, ...], legal: list[dict] | RuledGroup) -> LearningSearch:
            own = [{n: s[n] for n in group} for s in start if all(n in s for n in group)]
            if isinstance(legal, RuledGroup):
                return LearningSearch([by_name[n] for n in group], legal.is_legal, seed=seed, budget=None, start=own,
                                      sample_legal=legal.sample_legal, **kw)
            return LearningSearch([by_name[n] for n in group], legal_points=list(legal), seed=seed, budget=None,
                                  start=own, **kw)

        self.models = [model(g, combos) for g, combos in zip(self.groups, legal)]
        self._first = [_first_legal(combos, seed) for combos in legal]
        self.start_keys = max((m.start_keys for m in self.models), key=len, default=[])
        self.muted: set[int] = set()        # groups whose kernels no build measured (MUTED_AFTER builds)
        self.timed: set[int] = set()        # groups some build timed a kernel of
        self.misses = [0] * len(self.groups)   # points of a group built with none of its kernels timed
        self.told = 0
        self._asked: dict[tuple, tuple[list[int], list[dict]]] = {}   # a build: its groups' new points, its parts

    def _filler(self, i: int) -> dict:
        model = self.models[i]
        best = model.best()
        if best is not None:
            return best[0]
        if model.start_keys:
            return model._point(model.start_keys[0])
        return dict(self._first[i] or {})

    def ask(self, n: int = 1) -> list[dict]:
        """Up to n builds, each the next proposal of every group that has one (the others' fillers)."""
        out = []
        for _ in range(max(0, int(n))):
            parts, new = [], []
            for i, model in enumerate(self.models):
                got = [] if i in self.muted else model.ask(1)
                parts.append(got[0] if got else self._filler(i))
                if got:
                    new.append(i)
            if not new:
                break
            point = {k: v for part in parts for k, v in part.items()}
            self._asked[_key(point)] = (new, parts)
            out.append(point)
        return out

    def tell(self, point: dict, value: float | None, failure: str | None = None,
             parts: Mapping[tuple[str, ...], float] | None = None) -> None:
        """A build's result: its total time (or a failure), and each group's own kernels' time."""
        new, subs = self._asked.pop(_key(point), (None, None))
        if new is None:        # not asked in this process: a result told again on resuming
            subs = [{n: point[n] for n in g} for g in self.groups]
            new = [i for i, m in enumerate(self.models) if m._key(subs[i]) not in m.told and i not in self.muted]
        self.told += 1
        ok = failure is None and value is not None
        for i in new:
            model, sub = self.models[i], subs[i]
            if not ok:
                model.tell(sub, None, failure=failure or "failed")
            elif parts is None:
                model.tell(sub, value)
            elif self.groups[i] in parts:
                self.timed.add(i)
                model.tell(sub, parts[self.groups[i]])
            else:                       # none of its kernels ran at this point, or none ever does
                model.tell(sub, None, failure="not_timed")
                self.misses[i] += 1
                if i not in self.timed and self.misses[i] >= MUTED_AFTER:
                    self.muted.add(i)

    def stop(self) -> str | None:
        if self.budget is not None and self.told >= self.budget:
            return f"budget reached ({self.told} of {self.budget} builds)"
        active = [m for i, m in enumerate(self.models) if i not in self.muted]
        reasons = [m.stop() for m in active]
        if all(reasons):
            return (f"every group's model has stopped ({len(active)} of {len(self.models)} groups measured): "
                    + reasons[0]) if active else "no group's kernels were measured"
        return None

    def best(self) -> tuple[dict, float] | None:
        """Each group's best point, joined; the sum of their times (None before any group has one)."""
        bests = [m.best() for m in self.models]
        if not any(bests):
            return None
        point = {k: v for i, b in enumerate(bests) for k, v in (b[0] if b else self._filler(i)).items()}
        return point, sum(b[1] for b in bests if b)


def _first_legal(legal: list[dict] | RuledGroup, seed: int) -> dict | None:
    """A group's filler before it has a best point or a start: its first legal combination."""
    if isinstance(legal, RuledGroup):
        drawn = legal.sample_legal(np.random.default_rng(seed), 1)
        return dict(drawn[0]) if drawn else None
    return dict(legal[0]) if legal else None


def _key(point: dict) -> tuple:
    return tuple(sorted(point.items()))
