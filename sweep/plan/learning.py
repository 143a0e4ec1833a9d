"""A learning search over a discrete tuning space: a Gaussian-process surrogate of
log(time) on normalized ordinal encodings, expected improvement weighted by a learned
feasibility estimate, over the enumerated legal set (or, for large spaces, over sampled
candidates: random legal points plus neighbourhoods of the incumbents).

Pure module: stdlib + numpy only (see sweep.plan.surrogate).

    search = LearningSearch(dims, is_legal, seed=0, budget=100)
    while search.stop() is None:
        for point in search.ask(2):
            search.tell(point, time_or_None, failure=None or "compile_failed" ...)

Determinism: each ask draws its random numbers from a generator seeded by (seed, number of
tells, number of points asked and not yet told); the surrogate's hyperparameters are fitted
from the told data alone.  So a sweep that replays its history through tell() and then asks
gets exactly the proposals the uninterrupted sweep would have got.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .surrogate import GP, expected_improvement, feasibility

FAILURES = ("compile_failed", "verify_failed", "runtime_failed", "invalid", "failed")


@dataclass(frozen=True)
class Dim:
    name: str
    values: tuple


class LearningSearch:
    def __init__(self, dims: Sequence[Dim], is_legal: Callable[[dict], bool] | None = None,
                 legal_points: Sequence[dict] | None = None, seed: int = 0, budget: int | None = None,
                 n_init: int | None = None, enumerate_limit: int = 200_000, n_candidates: int = 4000,
                 ei_stop: float = 1e-3, stop_patience: int = 5, max_train: int = 300):
        """dims: the tunable parameters, each with its ordered values.  is_legal: the space's
        constraints (None: every combination is legal).  legal_points: the legal set, if the caller
        has it (then is_legal is not needed).  budget: evaluations after which stop() says so.
        n_init: size of the space-filling start (default min(20, max(8, 2 * #dims))).
        enumerate_limit: enumerate the legal set when the full product is at most this large,
        else sample n_candidates candidates per ask.  ei_stop / stop_patience: stop() fires when
        the best expected improvement (as a fraction of the best time) stays below ei_stop for
        stop_patience asks in a row.  max_train: the surrogate sees at most this many told points
        (the best ones plus the most recent)."""
        self.dims = tuple(dims)
        if not self.dims:
            raise ValueError("no dimensions")
        self.names = tuple(d.name for d in self.dims)
        self.is_legal = is_legal
        self.seed = int(seed)
        self.budget = budget
        self.n_init = n_init if n_init is not None else min(20, max(8, 2 * len(self.dims)))
        self.n_candidates = int(n_candidates)
        self.ei_stop = float(ei_stop)
        self.stop_patience = int(stop_patience)
        self.max_train = int(max_train)
        self._index = [{v: i for i, v in enumerate(d.values)} for d in self.dims]
        self._sizes = np.array([len(d.values) for d in self.dims])
        # encoding: rank / (len - 1) of each dimension with more than one value
        self._vary = np.flatnonzero(self._sizes > 1)
        self.told: dict[tuple, tuple[float | None, str | None]] = {}
        self.order: list[tuple] = []          # told keys, in order
        self.pending: list[tuple] = []        # asked, not yet told
        self._low_ei = 0
        self._cands: np.ndarray | None = None  # legal index tuples, when enumerated
        total = int(np.prod(self._sizes.astype(float))) if self._sizes.prod() < 1e12 else 10**12
        if legal_points is not None:
            self._cands = np.array(sorted({self._key(p) for p in legal_points}), dtype=int).reshape(-1, len(self.dims))
        elif total <= enumerate_limit:
            keys = [k for k in itertools.product(*(range(s) for s in self._sizes)) if self._legal_key(k)]
            self._cands = np.array(keys, dtype=int).reshape(-1, len(self.dims))
        if self._cands is not None:
            self._cand_pos = {tuple(k): i for i, k in enumerate(self._cands.tolist())}
            self._cand_x = self._encode(self._cands)
            self._used = np.zeros(len(self._cands), dtype=bool)

    # -- keys and encodings --------------------------------------------------------------
    def _key(self, point: dict) -> tuple:
        return tuple(self._index[j][point[n]] for j, n in enumerate(self.names))

    def _point(self, key: Sequence[int]) -> dict:
        return {n: self.dims[j].values[int(i)] for j, (n, i) in enumerate(zip(self.names, key))}

    def _legal_key(self, key: Sequence[int]) -> bool:
        return self.is_legal is None or bool(self.is_legal(self._point(key)))

    def _encode(self, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=float).reshape(-1, len(self.dims))
        return keys[:, self._vary] / (self._sizes[self._vary] - 1.0)

    def _mark(self, key: tuple, used: bool) -> None:
        if self._cands is not None and key in self._cand_pos:
            self._used[self._cand_pos[key]] = used

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
        if self._cands is not None and self._used.all():
            return "space exhausted (every legal point evaluated)"
        if self._low_ei >= self.stop_patience:
            return (f"expected improvement below {self.ei_stop:.2%} of the best time "
                    f"for {self._low_ei} asks in a row")
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
        if self._cands is not None:
            return self._cands[~self._used]
        seen = set(self.told) | set(self.pending)
        found: dict[tuple, None] = {}
        # neighbourhoods of the incumbents: one- and two-step moves in one or two dimensions
        ok = sorted((v, k) for k, (v, f) in self.told.items() if v is not None)
        for _, k in ok[:5]:
            base = np.array(k)
            for j in range(len(self.dims)):
                for step in (-2, -1, 1, 2):
                    c = base.copy()
                    c[j] += step
                    if 0 <= c[j] < self._sizes[j]:
                        found.setdefault(tuple(int(i) for i in c))
            for _ in range(60):
                c = base.copy()
                for j in rng.choice(len(self.dims), size=min(len(self.dims), int(rng.integers(2, 4))), replace=False):
                    c[j] = int(np.clip(c[j] + rng.integers(-2, 3), 0, self._sizes[j] - 1))
                found.setdefault(tuple(int(i) for i in c))
        tries = 0
        while len(found) < self.n_candidates and tries < 20 * self.n_candidates:
            tries += 1
            found.setdefault(tuple(int(rng.integers(s)) for s in self._sizes))
        keys = [k for k in found if k not in seen and self._legal_key(k)]
        return np.array(keys, dtype=int).reshape(-1, len(self.dims))

    def _next(self, rng: np.random.Generator) -> tuple | None:
        cands = self._candidates(rng)
        if len(cands) == 0:
            return None
        xc = self._encode(cands)
        done = [(k, v) for k, (v, f) in ((k, self.told[k]) for k in self.order) if v is not None]
        if len(self.told) + len(self.pending) < self.n_init or len(done) < 3:
            return self._space_filling(cands, xc, rng)
        return self._by_model(cands, xc, done)

    def _space_filling(self, cands: np.ndarray, xc: np.ndarray, rng: np.random.Generator) -> tuple:
        """Best of several random candidates by distance to everything told or pending."""
        taken = list(self.told) + self.pending
        pick = rng.choice(len(cands), size=min(len(cands), 24), replace=False)
        if not taken:
            return tuple(int(i) for i in cands[pick[0]])
        xt = self._encode(np.array(taken))
        d = ((xc[pick][:, None, :] - xt[None, :, :]) ** 2).sum(2).min(1)
        return tuple(int(i) for i in cands[pick[int(np.argmax(d))]])

    def _by_model(self, cands: np.ndarray, xc: np.ndarray, done: list) -> tuple:
        keys = [k for k, _ in done]
        y = np.log(np.array([v for _, v in done]))
        if len(keys) > self.max_train:   # the best half of the budget plus the most recent
            best = set(np.argsort(y)[: self.max_train // 2].tolist())
            recent = set(range(len(keys) - (self.max_train - len(best)), len(keys)))
            sel = sorted(best | recent)[: self.max_train]
            keys, y = [keys[i] for i in sel], y[sel]
        mu, sd = float(y.mean()), float(y.std())
        sd = sd if sd > 1e-12 else 1.0
        ys = (y - mu) / sd
        x = self._encode(np.array(keys))
        gp = GP.fit(x, ys)
        if self.pending:   # kriging believer: pending points told at their predicted mean
            xp = self._encode(np.array(self.pending))
            mp, _ = gp.predict(xp)
            gp = GP(gp.ls, gp.nugget).condition(np.vstack([x, xp]), np.concatenate([ys, mp]))
        mean, std = gp.predict(xc)
        ei = expected_improvement(mean, std, float(ys.min())) * sd   # in log(time): ~ fractional gain
        told_keys = list(self.told)
        ok = np.array([self.told[k][0] is not None for k in told_keys], dtype=float)
        if ok.min() < 1.0:
            p_ok = feasibility(gp.similarity(xc, self._encode(np.array(told_keys))), ok)
            ei = ei * p_ok
        top = float(ei.max())
        if not self.pending:
            self._low_ei = self._low_ei + 1 if top < self.ei_stop else 0
        i = int(np.argmax(ei))
        return tuple(int(v) for v in cands[i])
