"""A learning search over a discrete tuning space: a Gaussian-process surrogate of log(time) on normalized ordinal
encodings, expected improvement weighted by a learned feasibility estimate, over the enumerated legal set (or, for
large spaces, over sampled candidates: random legal points plus neighbourhoods of the incumbents).

Pure module: stdlib + numpy only (see sweep.plan.surrogate).

    search = LearningSearch(dims, is_legal, seed=0, budget=100)
    while search.stop() is None:
        for point in search.ask(2):
            search.tell(point, time_or_None, failure=None or "compile_failed" ...)

Determinism: each ask draws its random numbers from a generator seeded by (seed, number of
tells, number of points asked and not yet told); the surrogate's hyperparameters are fitted at
checkpoints from the corresponding prefix of the told history alone.  So a sweep that replays
its history through tell() and then asks gets exactly the proposals it would have got.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .legal_set import LegalSet
from .moves import (PATIENCE, PATIENCE_GAIN, basin_heads, near, out_of_patience, ranked, sampled, spread,
                    stalled_for, subsample, switch_flips, unlike_sides)
from .surrogate import GP, aligned_rows, columns, expected_improvement, feasibility, powers_of_two, training, warped

FEW_LEGAL = 32   # sampled candidates: fewer legal ones than this, and sample_legal adds its own
FAILURES = ("compile_failed", "verify_failed", "runtime_failed", "invalid", "failed")


@dataclass(frozen=True)
class Dim:
    """A tunable parameter and its ordered values. kind: "choice" for an enumeration whose values
    have no order (the space's `type: choice`), "ordinal" for sizes and switches, None to infer:
    three or more values that are not all numbers read as a choice (a Kernel Tuner cache names no
    kinds; names have no magnitude). Numbered enumerations are not inferred: 0, 1, 2, 3 is a
    method to pick in one space and a count of blocks per SM in another."""
    name: str
    values: tuple
    kind: str | None = None

    def is_choice(self) -> bool:
        if self.kind is not None:
            return self.kind == "choice"
        return len(self.values) >= 3 and not all(
            isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in self.values)


class LearningSearch:
    def __init__(self, dims: Sequence[Dim], is_legal: Callable[[dict], bool] | None = None,
                 legal_points: Sequence[dict] | None = None, seed: int = 0, budget: int | None = None,
                 n_init: int | None = None, enumerate_limit: int = 200_000, n_candidates: int = 4000,
                 patience: int = PATIENCE, patience_gain: float = PATIENCE_GAIN, max_train: int = 300, warp: str = "copula",
                 additive_grid: Sequence[float] = (0.0, 0.3, 0.7), aligned_start: bool = True,
                 local_every: int = 2, n_incumbents: int = 3, basin: int = 2, stall: int = 10, refit_every: int = 5,
                 fail_margin: float = 1.0, kappa: float | None = None, alignment: bool = True, max_score: int = 1500,
                 flip_every: int = 4, max_side_score: int = 6000, mirror: float = 0.01, log_above: float = 10.0,
                 start: Sequence[dict] = (), sample_legal: Callable[[np.random.Generator, int], list] | None = None):
        """dims: the tunable parameters, each with its ordered values.  is_legal: the space's constraints (None:
        every combination is legal).  legal_points: the legal set, if the caller has it (then is_legal is not
        needed).  budget: evaluations after which stop() says so. n_init: size of the space-filling start
        (default min(10, max(8, 2 * #parameters with more than one value))): it covers the combinations of the
        two-valued parameters and the unordered enumerations (Dim.is_choice) first, and with aligned_start its
        sizes are powers of two where candidates have them all. enumerate_limit: enumerate the legal set when
        the full product is at most this large, else sample n_candidates candidates per ask.  patience: stop()
        fires once the best time has not improved by more than patience_gain (a fraction) in the last `patience`
        evaluations, nor in the last half of all (0: only the budget stops it; bench/stop_rule.py measures what
        such stops cost).  max_train: the surrogate sees at most this many told points (the best ones plus the
        most recent).  warp: "copula" (normal scores of the ranks of log time) or "log" (standardized log time);
        log_above: a model whose points' median time is more than this many times their best is fitted to log
        time all the same (0: never; surrogate.warped).  additive_grid: the additive shares of the kernel the
        hyperparameter search may pick.  local_every: every local_every-th proposal is restricted to the
        neighbourhood of the n_incumbents best points (0: never); after `stall` evaluations with no better time,
        to the best point of another basin in turn (basins: best points more than `basin` parameters apart), as
        a multi-start local search restarts, or where two-valued parameters are, to the other side of one of
        them (_other_side). refit_every: hyperparameters are refitted every this many good points.  fail_margin:
        failed points are told to the surrogate this many standard units worse than the worst. kappa: None for
        expected improvement, else a lower confidence bound with this weight. alignment: add columns for the
        power of two dividing each value and its odd part, for positive integer parameters of more than two
        values. max_score: score at most this many candidates per proposal (the incumbents' neighbours plus a
        random sample of the rest); max_side_score: the same for a search of a switch's other side, which scores
        all of that side's candidates up to this many.  flip_every: every flip_every-th proposal tries the other
        value of a two-valued parameter at one of the n_incumbents best points, where untried (0: never).
        mirror: a switch's other side holding a time within this fraction of the best is not searched on its own
        (it mirrors the best's). start: points to propose first, in order, where legal and untried (a warm
        start: the fastest configurations a recording of this space holds, another GPU's); the first n_init of
        them replace the space-filling start, which fills in where fewer are legal. sample_legal(rng, n): up to
        n legal points by another route, for sampled candidates too few of which are legal (a sparse legal set)."""
        self.dims = tuple(dims)
        if not self.dims:
            raise ValueError("no dimensions")
        self.names = tuple(d.name for d in self.dims)
        self.is_legal = is_legal
        self.seed = int(seed)
        self.budget = budget
        self.n_candidates = int(n_candidates)
        self.sample_legal = sample_legal
        self.patience = int(patience)
        self.patience_gain = float(patience_gain)
        self.max_train = int(max_train)
        self.warp = warp
        self.log_above = float(log_above)
        self.refit_every = int(refit_every)
        self.fail_margin = float(fail_margin)
        self.kappa = kappa
        self.max_score = int(max_score)
        self.max_side_score = int(max_side_score)
        self.flip_every = int(flip_every)
        self.mirror = float(mirror)
        self.alignment = bool(alignment)
        self._hyper: dict[int, tuple] = {}
        self._side_hyper: dict[tuple, dict[int, tuple]] = {}   # (switch, the side's level): its own
        self.local_every = int(local_every)
        self.n_incumbents = int(n_incumbents)
        self.basin = int(basin)
        self.stall = int(stall)
        self.additive_grid = tuple(additive_grid)
        self._index = [{v: i for i, v in enumerate(d.values)} for d in self.dims]
        self._sizes = np.array([len(d.values) for d in self.dims])
        # encoding: rank / (len - 1) of each dimension with more than one value
        self._vary = np.flatnonzero(self._sizes > 1)
        # a short start (measured on the convolution spaces, bench/STRATEGIES.md: 10 points found the
        # optimum's basin sooner than 20); parameters with one value carry nothing to fill
        self.n_init = n_init if n_init is not None else min(10, max(8, 2 * len(self._vary)))
        # two-valued parameters, often switches between code paths (shared memory or not): the start
        # gives each combination of them a point before any gets a second, as one region's random
        # points can look far worse than its best (bench/landscape.py, W6600)
        self._switches = np.flatnonzero(self._sizes == 2)
        values = [d.values for d in self.dims]
        self._choices = frozenset(j for j, d in enumerate(self.dims) if d.is_choice())
        # an enumeration's values are as far from each other as a switch's two: the start covers their
        # combinations with the switches' and spreads by the other parameters alone, where spreading
        # by their ranks favoured the first and last (pnpoly, 160 seeds: a median 1.069 of the
        # optimum at 50 evaluations against 1.158; bench/STRATEGIES.md)
        self._covered = np.array(sorted({int(j) for j in self._switches} | self._choices), dtype=int)
        self._spread_columns = [i for i, j in enumerate(self._vary) if int(j) not in self._choices]
        self._choice_columns = sorted(self._choices)   # moves.near: any other value is one step
        self._col_dim, self._coords = columns(values, self._vary, self.alignment, self._choices)
        self._aligned = powers_of_two(values) if aligned_start else []
        # the warm start's keys, each once (a recording's fastest may hold the defaults), n_init at most
        self.start_keys = list(dict.fromkeys(k for k in map(self._key_of, start) if k is not None))[: self.n_init]
        self.told: dict[tuple, tuple[float | None, str | None]] = {}
        self.order: list[tuple] = []          # told keys, in order
        self.pending: list[tuple] = []        # asked, not yet told
        self._legal: LegalSet | None = None   # the legal set, when enumerated (sweep.plan.legal_set)
        total = int(np.prod(self._sizes.astype(float))) if self._sizes.prod() < 1e12 else 10**12
        if legal_points is not None:   # one column at a time: a 200,000-point set in well under a second
            pts = legal_points if isinstance(legal_points, list) else list(legal_points)
            self._legal = LegalSet(np.stack([np.fromiter((self._index[j][p[n]] for p in pts), dtype=np.int64,
                                                         count=len(pts)) for j, n in enumerate(self.names)], 1)
                                   if pts else np.zeros((0, len(self.dims)), int), self._sizes)
        elif total <= enumerate_limit:
            self._legal = LegalSet(np.array([k for k in itertools.product(*(range(s) for s in self._sizes))
                                             if self._legal_key(k)], dtype=int), self._sizes)

    # -- keys and encodings --------------------------------------------------------------
    def _key(self, point: dict) -> tuple:
        return tuple(self._index[j][point[n]] for j, n in enumerate(self.names))

    def _key_of(self, point: dict) -> tuple | None:
        """_key, or None where the point lacks a parameter or has a value it does not take."""
        try:
            return self._key(point)
        except KeyError:
            return None

    def _point(self, key: Sequence[int]) -> dict:
        return {n: self.dims[j].values[int(i)] for j, (n, i) in enumerate(zip(self.names, key))}

    def _legal_key(self, key: Sequence[int]) -> bool:
        return self.is_legal is None or bool(self.is_legal(self._point(key)))

    def _encode(self, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=float).reshape(-1, len(self.dims))
        return keys[:, self._vary] / (self._sizes[self._vary] - 1.0)

    def _levels(self, keys: np.ndarray) -> np.ndarray:
        return np.asarray(keys, dtype=int).reshape(-1, len(self.dims))[:, self._col_dim]

    def _mark(self, key: tuple, used: bool) -> None:
        if self._legal is not None:
            self._legal.mark(key, used)

    # -- the protocol --------------------------------------------------------------------
    def tell(self, point: dict, value: float | None, failure: str | None = None) -> None:
        """Record a result: value = time to minimize (> 0), or None / a failure kind for a failed point."""
        key = self._key(point)
        if value is not None and failure is None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            failure = "invalid"
        if value is None and failure is None:
            failure = "failed"
        if key in self.pending:
            self.pending.remove(key)
        if key not in self.told:
            self.order.append(key)
        self.told[key] = (None if failure else float(value), failure)
        self._mark(key, True)

    def ask(self, n: int = 1) -> list[dict]:
        """n distinct legal points, neither told nor pending (fewer when the space runs out)."""
        rng = np.random.default_rng([self.seed, len(self.told), len(self.pending)])
        out: list[tuple] = []
        for _ in range(max(0, int(n))):
            key = self._next(rng)
            if key is None:
                break
            out.append(key)
            self.pending.append(key)
            self._mark(key, True)
        return [self._point(k) for k in out]

    def stop(self) -> str | None:
        """Why more evaluations are unlikely to pay, or None."""
        if self.budget is not None and len(self.told) >= self.budget:
            return f"budget reached ({len(self.told)} of {self.budget} evaluations)"
        if self._legal is not None and self._legal.used.all():
            return "space exhausted (every legal point evaluated)"
        held = out_of_patience(self.told, self.order, self.patience, self.patience_gain)
        if held:
            return (f"the best time gained no more than {self.patience_gain:.1%} in its last {held} "
                    f"evaluations (patience {self.patience}; patience 0 runs to the budget)")
        return None

    def best(self) -> tuple[dict, float] | None:
        ok = [(v, k) for k, (v, f) in self.told.items() if v is not None]
        if not ok:
            return None
        v, k = min(ok)
        return self._point(k), v

    # -- proposals -----------------------------------------------------------------------
    def _candidates(self, rng: np.random.Generator) -> np.ndarray:
        """Index tuples of candidate points, neither told nor pending."""
        if self._legal is not None:
            return self._legal.unused()
        seen = set(self.told) | set(self.pending)
        keys = [k for k in sampled(self.told, seen, self._sizes, self.n_candidates, rng, self._choice_columns)
                if self._legal_key(k)]
        if len(keys) < FEW_LEGAL and self.sample_legal is not None:   # too sparse for random points to hit
            keys += [k for k in dict.fromkeys(map(self._key_of, self.sample_legal(rng, 2 * FEW_LEGAL)))
                     if k is not None and k not in seen and k not in keys]
        return np.array(keys, dtype=int).reshape(-1, len(self.dims))

    def _next(self, rng: np.random.Generator) -> tuple | None:
        cands = self._candidates(rng)
        if len(cands) == 0:
            return None
        for key in self.start_keys:      # the warm start, where legal and neither told nor pending
            if self._untried_legal(key):
                return key
        done = [(k, v) for k, (v, f) in ((k, self.told[k]) for k in self.order) if v is not None]
        if len(self.told) + len(self.pending) < self.n_init or len(done) < 3:
            return self._space_filling(cands, rng)
        return self._by_model(cands, done, rng)

    def _transform(self, y: np.ndarray) -> tuple[np.ndarray, float]:
        """The surrogate's targets for log times y (surrogate.warped), and the scale back to log time."""
        return warped(y, self.warp, self.log_above)

    def _space_filling(self, cands: np.ndarray, rng: np.random.Generator) -> tuple:
        """moves.spread: of aligned sizes where there are any (aligned_start), and of the
        least-covered combinations of the switches and enumerations, spread by the other parameters."""
        aligned = aligned_rows(cands, self._aligned)
        return spread(cands[aligned] if aligned.any() else cands, list(self.told) + self.pending, self._covered,
                      lambda keys: self._encode(keys)[:, self._spread_columns], rng)

    def _by_model(self, cands: np.ndarray, done: list, rng: np.random.Generator) -> tuple:
        step = len(self.told) + len(self.pending)
        local = bool(self.local_every) and step % self.local_every == 0
        if self.flip_every and len(self._switches) and step % self.flip_every == 0:
            flip = self._switch_flip()
            if flip is not None:
                return flip
        stalled = stalled_for(self.told, self.order) >= self.stall   # the best has held this long
        if len(self._switches) and local and stalled:   # the local steps search the other sides
            other_side = self._other_side(cands, done, step // self.local_every, rng)
            if other_side is not None:
                return other_side
        if local or len(cands) > self.max_score:
            near_best = near(cands, ranked(self.told)[: self.n_incumbents], self._choice_columns)
            mine, inc = near_best, (basin_heads(self.told, self.n_incumbents, self.basin) if stalled else [])
            if len(inc) > 1:   # stalled: a basin that only looks best is not the only one searched
                other_basin = inc[1 + (step // max(1, self.local_every)) % (len(inc) - 1)]
                mine = near(cands, [other_basin], self._choice_columns)
            if local and mine.any():
                cands = cands[mine]
            elif local and near_best.any():
                cands = cands[near_best]
            elif len(cands) > self.max_score:   # score the incumbents' neighbours and a random sample
                cands = cands[subsample(near_best, self.max_score, rng)]
        failed = [k for k in self.order if self.told[k][0] is None]
        return self._best_scored(cands, done, failed, self.pending, self._hyper)

    def _other_side(self, cands: np.ndarray, done: list, turn: int, rng: np.random.Generator) -> tuple | None:
        """Once stalled, a local step searches the other side of one two-valued parameter (in
        turn) from the best point's: a model fitted to that side's points alone, its expected
        improvement over that side's best. A switch between code paths (shared memory or not) can
        make the times a different function of the other parameters on each side; a model of the
        whole space, dominated by the side the best point is on, ranks the other side's best cells
        from the wrong trends (W6600's optimum, bench/STRATEGIES.md). A side that already holds a
        time within `mirror` of the best is left to the whole space's model (moves.unlike_sides)."""
        best = min(done, key=lambda kv: kv[1])[0]
        sides = unlike_sides(self.told, self._switches, self.mirror)
        for t in range(len(sides)):
            j = sides[(turn + t) % len(sides)]
            found = self._side_search(cands, done, j, 1 - best[j], rng)
            if found is not None:
                return found
        return None

    def _side_search(self, cands: np.ndarray, done: list, j: int, level: int,
                     rng: np.random.Generator) -> tuple | None:
        """The best candidate with parameter j at `level` by expected improvement under a model of
        that side's points alone (None: no candidate there, or fewer than 3 points to fit). A side
        of more than max_side_score candidates has its best points' neighbours and a random
        sample of the rest scored (a 240,000-point space: 0.33 s a suggestion when all were)."""
        there = cands[:, j] == level
        side_done = [(k, v) for k, v in done if k[j] == level]
        if not there.any() or len(side_done) < 3:
            return None
        if int(there.sum()) > self.max_side_score:
            side = np.flatnonzero(there)
            heads = [k for k, _ in sorted(side_done, key=lambda kv: kv[1])[: self.n_incumbents]]
            there = np.zeros(len(cands), dtype=bool)
            there[side[subsample(near(cands[side], heads, self._choice_columns), self.max_side_score, rng)]] = True
        failed = [k for k in self.order if self.told[k][0] is None and k[j] == level]
        pending = [k for k in self.pending if k[j] == level]
        hyper = self._side_hyper.setdefault((j, level), {})
        return self._best_scored(cands[there], side_done, failed, pending, hyper)

    def _switch_flip(self) -> tuple | None:
        """The first untried legal point of moves.switch_flips: a best point's other switch value."""
        for flip in switch_flips(self.told, [int(j) for j in self._switches], self.n_incumbents):
            if self._untried_legal(flip):
                return flip
        return None

    def _untried_legal(self, key: tuple) -> bool:
        """Legal, and neither told nor pending (the enumerated set marks both as used)."""
        if self._legal is None:
            return key not in self.told and key not in self.pending and self._legal_key(key)
        return self._legal.free(key)

    def _best_scored(self, cands: np.ndarray, done: list, failed: list, pending: list, hyper: dict) -> tuple:
        """The candidate of highest expected improvement (times feasibility) under a GP of the
        told points `done` (and `failed`, as worse than any), `pending` told at their predicted
        mean; hyperparameters from `hyper`, filled at checkpoints of len(done)."""
        keys, y = training(done, self.max_train)
        ys, sd = self._transform(y)
        best_y = float(ys.min())
        failed = failed[-self.max_train // 3:]
        if failed:   # failures told to the surrogate as worse than anything seen: steer away
            keys = keys + failed
            ys = np.concatenate([ys, np.full(len(failed), float(ys.max()) + self.fail_margin)])
        lv = self._levels(np.array(keys))
        lc = self._levels(cands)
        # hyperparameters: refitted at checkpoints of the number of good points, each from that
        # prefix of the history (so a replayed history gets the same ones), conditioned on all data
        c = len(done) if len(done) < 2 * self.refit_every else len(done) - len(done) % self.refit_every
        if c not in hyper:   # on at most max_train points, as the model is: a fit's cost grows as their cube
            kc, yc = training(done[:c], self.max_train)
            kc, yc = self._levels(np.array(kc)), self._transform(yc)[0]
            g = GP.fit(self._coords, kc, yc, additive_grid=self.additive_grid)
            hyper[c] = (g.ls, g.additive, g.nugget)
        gp = GP(self._coords, *hyper[c]).condition(lv, ys)
        if pending:   # kriging believer: pending points told at their predicted mean
            lp = self._levels(np.array(pending))
            mp, _ = gp.predict(lp)
            gp = GP(self._coords, gp.ls, gp.additive, gp.nugget).condition(np.vstack([lv, lp]), np.concatenate([ys, mp]))
        mean, std, ks = gp.predict(lc, with_cross=True)
        ei = expected_improvement(mean, std, best_y) * sd   # in log(time): ~ fractional gain
        score = ei if self.kappa is None else (best_y - mean + self.kappa * std)
        if failed:   # feasibility: a kernel vote of the told points (successes 1, failures 0)
            ok = np.concatenate([np.ones(len(keys) - len(failed)), np.zeros(len(failed))])
            p_ok = feasibility(ks[:, : len(ok)], ok)
            ei = ei * p_ok
            score = ei if self.kappa is None else np.where(p_ok > 0.5, score, score - 10.0)
        i = int(np.argmax(score))
        return tuple(int(v) for v in cands[i])
