"""The learning search's local moves, as functions of what it was told (sweep.plan.learning):
which points are the heads of distinct basins, how long the best has held, which switches' other
sides are worth a search of their own, which candidates are near a point, and a good point's other
switch values. Pure: stdlib + numpy only.

`told` maps a point's index tuple to (time or None, failure or None); `order` lists the told
points in the order they were told."""

from __future__ import annotations

import math
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

Told = Mapping[tuple, tuple]


def ranked(told: Told) -> list[tuple]:
    """The points that ran, fastest first."""
    return [k for _, k in sorted((v, k) for k, (v, f) in told.items() if v is not None)]


def basin_heads(told: Told, n: int, basin: int) -> list[tuple]:
    """The best told point of each of the n best distinct basins: the best points taken in order,
    skipping any within `basin` parameters of one already taken, so a local step can leave a
    basin that only looks best (multi-start local search)."""
    out: list[tuple] = []
    for k in ranked(told):
        if len(out) < n and all(sum(a != b for a, b in zip(k, o)) > basin for o in out):
            out.append(k)
    return out


# Evaluations without a gain over 0.5% before the search stops by itself (and at least half of all
# made). bench/stop_rule.py, 30 seeds on six brute-forced spaces: the expected-improvement rule this
# replaced never fired with proposals in flight, and told one at a time it ended 52 of 180 runs at
# budget 100 more than 1% above where running on got. 80 ends 2 of 180 so at budget 100 (0 with 10
# in flight), saving little there; at budget 200 it saves 67 evaluations a run (50 in flight) and
# ends 10 of 180 (15) more than 1% short, 5 (13) of them on W6600, whose optimum is found late.
PATIENCE = 80
PATIENCE_GAIN = 0.005   # a gain of the best time smaller than this does not reset the patience count


def stalled_for(told: Told, order: Sequence[tuple], gain: float = 0.0) -> int:
    """Evaluations told since the best time last improved by more than `gain` (a fraction of it;
    smaller gains do not reset the count, however many follow each other)."""
    best, since = math.inf, 0
    for v in (told[k][0] for k in order):
        best, since = (v, 0) if v is not None and v < best * (1.0 - gain) else (best, since + 1)
    return since


def unlike_sides(told: Told, switches: Sequence[int], within: float) -> list[int]:
    """The switches whose other side, from the best point's, has no told time within `within` (a
    fraction) of the best: sides that may be a different landscape. A side already as fast as the
    best is a mirror of the best point's (W6600's read-only loads under shared memory: 1.201 against
    1.196), which the whole space's model covers; searching it spent a third of the side steps
    there while the optimum lay on the shared-memory side, two times behind (bench/STRATEGIES.md)."""
    ok = ranked(told)
    if not ok:
        return []
    best = ok[0]
    as_fast = [k for k in ok if told[k][0] <= told[best][0] * (1.0 + within)]
    return [int(j) for j in switches if all(k[j] == best[j] for k in as_fast)]


def out_of_patience(told: Told, order: Sequence[tuple], patience: int, gain: float) -> int:
    """The evaluations the best time has held (gaining no more than `gain`) when that is at least
    `patience` and half of all told, else 0: a search's stop by itself (0 patience: never)."""
    held = stalled_for(told, order, gain)
    return held if patience and held >= max(patience, len(order) / 2) else 0


def near(cands: np.ndarray, points: Sequence[tuple], choices: Sequence[int] = ()) -> np.ndarray:
    """Which candidates are one parameter away (any value) or one level away in two parameters
    from one of the points. An unordered enumeration (`choices`: its columns) is one level away
    at any other value: its values have no order to be near in."""
    out = np.zeros(len(cands), dtype=bool)
    choices = list(choices)
    for k in points:
        point = np.array(k)
        differ = cands != point
        step = np.abs(cands - point)
        step[:, choices] = differ[:, choices]
        ham = differ.sum(1)
        out |= (ham <= 1) | ((ham <= 2) & (step.max(1) <= 1))
    return out


def subsample(keep: np.ndarray, limit: int, rng: np.random.Generator) -> np.ndarray:
    """A mask of at most `limit` candidates (unless `keep` alone is more): every one `keep` marks
    (an incumbent's neighbours) and a random sample of the rest, so a large space's proposal
    scores a fixed number of candidates however many are legal."""
    out = keep.copy()
    rest = np.flatnonzero(~keep)
    room = max(0, limit - int(keep.sum()))
    out[rest if len(rest) <= room else rest[rng.choice(len(rest), size=room, replace=False)]] = True
    return out


def switch_flips(told: Told, switches: Sequence[int], n: int) -> Iterator[tuple]:
    """The points that differ from one of the n best (best first) in one two-valued parameter
    alone, in that order. A switch between code paths changes how the other parameters act, so a
    good point's other side is the likeliest good point the model has no evidence for: on the
    convolution spaces the optimum sits one switch from points 1-25% slower (read-only loads,
    W6600), which a model fitted on the switch's other value ranks low (bench/STRATEGIES.md)."""
    for k in ranked(told)[:n]:
        for j in switches:
            yield tuple(1 - int(i) if m == j else int(i) for m, i in enumerate(k))


def sampled(told: Told, seen: set, sizes: np.ndarray, n: int, rng: np.random.Generator,
            choices: Sequence[int] = ()) -> list[tuple]:
    """Candidates for a space too large to enumerate, neither in `seen` (told or pending) nor yet
    checked for legality: the neighbourhoods of the five best points (one- and two-level moves in
    one parameter, and random moves of up to two levels in two or three), then uniform random
    points up to n in all. sizes: each parameter's number of values; choices: the unordered
    enumerations, whose every other value is one move (as in `near`)."""
    found: dict[tuple, None] = {}
    d = len(sizes)
    for k in ranked(told)[:5]:
        base = np.array(k)
        for j in range(d):
            others = range(sizes[j]) if j in choices else (base[j] + step for step in (-2, -1, 1, 2))
            for v in others:
                c = base.copy()
                c[j] = v
                if 0 <= c[j] < sizes[j] and c[j] != base[j]:
                    found.setdefault(tuple(int(i) for i in c))
        for _ in range(60):
            c = base.copy()
            for j in rng.choice(d, size=min(d, int(rng.integers(2, 4))), replace=False):
                c[j] = int(rng.integers(sizes[j])) if j in choices else int(np.clip(c[j] + rng.integers(-2, 3), 0,
                                                                                      sizes[j] - 1))
            found.setdefault(tuple(int(i) for i in c))
    tries = 0
    while len(found) < n and tries < 20 * n:
        tries += 1
        found.setdefault(tuple(int(rng.integers(s)) for s in sizes))
    return [k for k in found if k not in seen]


def spread(cands: np.ndarray, taken: list[tuple], covered: np.ndarray, encode: Callable[[np.ndarray], np.ndarray],
           rng: np.random.Generator) -> tuple:
    """A space-filling start's next point: of the candidates on the combinations of the `covered`
    parameters (switches, enumerations) that `taken` (told or pending) covers least, the best of 24
    random ones by distance (in `encode`'s coordinates) to everything taken."""
    if taken and len(covered):   # only the least-covered combinations
        sw = cands[:, covered]
        seen = np.zeros(len(cands), dtype=int)
        for combo, count in zip(*np.unique(np.array(taken)[:, covered], axis=0, return_counts=True)):
            seen[(sw == combo).all(1)] += count
        cands = cands[seen == seen.min()]
    pick = rng.choice(len(cands), size=min(len(cands), 24), replace=False)
    if not taken:
        return tuple(int(i) for i in cands[pick[0]])
    xt = encode(np.array(taken))
    xc = encode(cands[pick])
    d = ((xc[:, None, :] - xt[None, :, :]) ** 2).sum(2).min(1)
    return tuple(int(i) for i in cands[pick[int(np.argmax(d))]])
