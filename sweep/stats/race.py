"""Certify each group's pick: race the top candidates interleaved until they separate.

After the sweep, a group's top candidates (by default 3, plus the target's
default configuration) run again on one GPU in interleaved rounds, one sample
of each per round (A B C D A B C D ...), so slow drift of clocks and
temperature hits them all alike. The GPU side runs the programs; `Race` only
takes the rounds (`add_round`, which answers after every round: None to run
another, or the final result) and decides at scheduled looks:

    at each look       the leader (lowest median of the entrants still in the
                       race) against every other one still in it, paired by
                       round (compare(..., paired=True): Wilcoxon signed-rank
                       interval of the relative margin)
    eliminated         an entrant whose interval against the leader lies above
                       0 leaves the race: the leader is faster beyond the noise,
                       and its later rounds would only cost GPU time (racing as
                       F-race and irace do); later rounds run only the others
    certified          every other entrant has left: the leader is faster than
                       each of them (directly, or than one that was)
    equivalent         at a look, every entrant still in the race beside the
                       leader has its interval inside (-equivalence, +equivalence)
                       (1% by default): the tied set is shown to be within 1% of
                       each other, more rounds could only tell differences
                       nobody tunes for, so the race ends a tie here (two
                       one-sided tests at the intervals' own level: an
                       equivalence claim is wrong with the same chance as a
                       certification)
    tie                the budget (max_rounds, or budget_s seconds) is spent
                       first: the tied set is the leader and every entrant
                       still in the race

A tie is settled by a documented rule: the target's default configuration if
it is in the tied set (no change without evidence), else the fewest threads per
block (finer blocks: more of them fit an SM and the last wave is shorter),
ties broken by the fastest median.

Multiple comparisons. Certification makes k - 1 claims at once (leader beats
each other) and is tested at several rounds (looks). A wrong certification (or
elimination) needs an interval that lies above 0 when the leader is in truth no
faster: one tail of one interval. A look tests at most k - 1 pairs (the leader
against each entrant still in), so each interval's one-sided error is held to
alpha / ((k - 1) * looks) (Bonferroni; `interval_alpha`), and the chance that any
of them errs is at most alpha (0.05). Only looks at which an interval can lie
above 0 at all are counted: with n rounds even a leader that won every one has a
signed-rank tail of 2^-n, so an early look that cannot reach the corrected level
cannot err, and counting it would only cost the later looks their share. Looks
are not taken every round but at a geometric schedule (min_rounds, then x
look_growth, and max_rounds; one more is counted for a time-budget stop), so the
correction stays mild: a candidate that wins every round certifies at round 9
against one to three others at the default 30 rounds (12 with 100 rounds and
three or four entrants). Bonferroni ignores that successive looks share their
samples, so the real false-certification rate is well under alpha.

Paired comparisons assume the candidates' order within a round does not favour
one of them; `order(round)` rotates the order (A B C D, B C D A, ...) for a
caller that wants to remove any position effect.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from sweep.core.errors import SweepError
from sweep.stats.compare import Comparison, compare, signed_rank_count

RACE_TOP = 3    # a group races its 3 fastest candidates from the sweep, plus the default
# Entrants whose paired interval against the leader lies inside +-1% are equal for tuning's sake: the race
# stops there ("equivalent") rather than run to its budget. Measured on four H200s: quick_check with long
# runs tied, shown within 1% at round 9; a tie whose noise is wider (the engine's residual group, -1.2% to
# +2.0% at round 30) still runs to the budget.
EQUIVALENCE = 0.01
RACE_STATUSES = ("certified", "tie")
PICK_RULES = ("certified", "default in tied set", "fewest threads")


@dataclass(frozen=True, slots=True)
class Entrant:
    """One candidate of a race: its id (e.g. the job tag), threads per block, and whether it is the target's default."""

    id: str
    threads: int
    is_default: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class RaceResult:
    """The outcome of a race.

    status: "certified" or "tie". pick: the chosen entrant id; rule: how it was
    chosen (one of PICK_RULES). leader: the entrant with the lowest median.
    runner_up: the other entrant closest to the leader (smallest margin), and
    margin/ci_low/ci_high its relative margin over the leader (other / leader - 1,
    a fraction) and interval at `confidence` (after the corrections; None where
    unbounded or unknown). tied: the tied set (just the winner when certified).
    rounds: rounds used; elapsed_s: seconds spent; stopped: "separated",
    "equivalent" (a tie shown within the race's equivalence margin), "max_rounds", "budget"
    (or "running" for an `evaluate` mid-race). medians: per entrant median time (the samples'
    unit, e.g. ns). comparisons: the leader against each other entrant. decisive: the first
    round at which the race could have decided anything (fewer rounds: no evidence).
    """

    status: str
    pick: str
    rule: str
    leader: str
    runner_up: str
    margin: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    tied: tuple[str, ...]
    rounds: int
    elapsed_s: float
    stopped: str
    medians: dict[str, float]
    comparisons: dict[str, Comparison]
    entrants: tuple[Entrant, ...]
    decisive: int = 3       # the first round at which this race could decide anything (decisive_looks)

    @property
    def evidence(self) -> bool:
        """Whether the race ran long enough to decide anything: a race stopped before its first
        decisive look (by its budget) ends "tie" with nothing tested, and says nothing."""
        return self.certified or self.rounds >= self.decisive

    @property
    def certified(self) -> bool:
        return self.status == "certified"

    def to_dict(self) -> dict:
        d = {name: getattr(self, name) for name in self.__dataclass_fields__}
        d["tied"] = list(self.tied)
        d["medians"] = dict(self.medians)
        d["comparisons"] = {k: c.to_dict() for k, c in self.comparisons.items()}
        d["entrants"] = [e.to_dict() for e in self.entrants]
        for key in ("ci_low", "ci_high"):
            if d[key] is not None and not math.isfinite(d[key]):
                d[key] = None
        return d


def contenders(candidates: Sequence[Entrant], medians: Mapping[str, float], top: int = RACE_TOP) -> tuple[Entrant, ...]:
    """A group's race entrants: its `top` fastest candidates by sweep median (time, e.g. ns), plus the default."""
    ranked = sorted(candidates, key=lambda e: (medians[e.id], e.threads))
    return (*ranked[:top], *(e for e in ranked[top:] if e.is_default))


def look_rounds(min_rounds: int, max_rounds: int, growth: float) -> tuple[int, ...]:
    """The rounds after which a race is evaluated: min_rounds, then x growth (at least +1), and max_rounds."""
    looks, r = [], min_rounds
    while r < max_rounds:
        looks.append(r)
        r = max(r + 1, math.ceil(r * growth))
    looks.append(max_rounds)
    return tuple(looks)


def interval_alpha(alpha: float, looks: Sequence[int], comparisons: int, budget_look: bool = False) -> float:
    """The two-sided level of each paired interval in a race of `comparisons` + 1 entrants with these looks
    (and one more at any round, for a time-budget stop): the family-wise chance of a wrong certification
    is at most `alpha`.

    A wrong certification or elimination needs an interval that lies above 0 when the leader is no
    faster: one tail of one interval, so each interval's one-sided error is alpha / (comparisons x
    counted looks), twice that two-sided. A look at which no interval can lie above 0 (n rounds, where
    even a leader winning all n has a signed-rank tail 2^-n above that error) cannot err, so it is not
    counted: the smallest count that covers every look at which an interval can exclude 0."""
    extra, counted = (1 if budget_look else 0), 1
    while True:       # ends by len(looks) counted at the latest: no more looks than that can decide
        level = 2 * alpha / ((counted + extra) * comparisons)
        if sum(signed_rank_count(n, level / 2) >= 0 for n in looks) <= counted:
            return level
        counted += 1


def tie_break(tied: Sequence[Entrant], medians: Mapping[str, float]) -> tuple[Entrant, str]:
    """The pick among tied entrants and the rule used: the default if tied, else fewest threads, then fastest median."""
    for e in tied:
        if e.is_default:
            return e, "default in tied set"
    return min(tied, key=lambda e: (e.threads, medians[e.id])), "fewest threads"


class Race:
    """Interleaved rounds of k entrants and the decision after each (see the module docstring).

    alpha: family-wise chance of a wrong certification (0.05). min_rounds: first
    look. max_rounds: rounds budget. budget_s: seconds budget (None: rounds only).
    look_growth: ratio between successive looks. equivalence: the relative margin inside which
    entrants count as equal (stopped "equivalent"; None: race ties to the budget).
    """

    __slots__ = ("entrants", "alpha", "min_rounds", "max_rounds", "budget_s", "looks", "pair_alpha",
                 "equivalence", "_samples", "_result", "_left")

    def __init__(self, entrants: Sequence[Entrant], *, alpha: float = 0.05, min_rounds: int = 5,
                 max_rounds: int = 100, budget_s: float | None = None, look_growth: float = 1.25,
                 equivalence: float | None = EQUIVALENCE) -> None:
        ids = [e.id for e in entrants]
        bad = []
        if len(ids) < 2:
            bad.append(f"{len(ids)} entrant(s) (a race needs at least 2)")
        if len(set(ids)) != len(ids):
            bad.append(f"entrant ids {ids} (each id once)")
        if sum(e.is_default for e in entrants) > 1:
            bad.append("more than one default entrant (at most one)")
        if any(e.threads < 1 for e in entrants):
            bad.append(f"threads {[e.threads for e in entrants]} (each at least 1)")
        if not 0 < alpha < 1:
            bad.append(f"alpha={alpha} (in (0, 1), e.g. 0.05)")
        if not 1 <= min_rounds <= max_rounds:
            bad.append(f"min_rounds={min_rounds}, max_rounds={max_rounds} (1 <= min_rounds <= max_rounds)")
        if budget_s is not None and not budget_s > 0:
            bad.append(f"budget_s={budget_s} (seconds > 0, or None)")
        if not look_growth > 1:
            bad.append(f"look_growth={look_growth} (> 1, e.g. 1.25)")
        if equivalence is not None and not 0 < equivalence < 1:
            bad.append(f"equivalence={equivalence} (a fraction in (0, 1), e.g. 0.01, or None)")
        if bad:
            raise SweepError("race: bad " + "; ".join(bad))
        self.entrants = tuple(entrants)
        self.alpha, self.min_rounds, self.max_rounds, self.budget_s = alpha, min_rounds, max_rounds, budget_s
        self.equivalence = equivalence
        self.looks = look_rounds(min_rounds, max_rounds, look_growth)
        self.pair_alpha = interval_alpha(alpha, self.looks, len(ids) - 1, budget_look=budget_s is not None)
        self._samples: dict[str, list[float]] = {i: [] for i in ids}
        self._result: RaceResult | None = None
        self._left: dict[str, Comparison] = {}      # eliminated id -> the comparison that eliminated it

    @property
    def rounds(self) -> int:
        return max(len(v) for v in self._samples.values())

    @property
    def decisive_looks(self) -> tuple[int, ...]:
        """The looks at which the race can decide anything: from the first at which a leader
        that won every round would separate from the others (paired signed-rank at pair_alpha).
        At an earlier look nothing can be certified or eliminated, so its rounds are worth
        taking together."""
        return tuple(n for n in self.looks if signed_rank_count(n, self.pair_alpha / 2) >= 0) or self.looks[-1:]

    @property
    def alive(self) -> tuple[str, ...]:
        """The ids still in the race: a round needs a time for each (and only these)."""
        return tuple(e.id for e in self._racing())

    def _racing(self) -> list[Entrant]:
        return [e for e in self.entrants if e.id not in self._left]

    @property
    def result(self) -> RaceResult | None:
        """The final result once the race has stopped, else None."""
        return self._result

    def order(self, round_index: int) -> tuple[str, ...]:
        """Entrant ids in the order to run them in round `round_index` (0-based): rotated by one each round."""
        k = len(self.entrants)
        return tuple(self.entrants[(round_index + i) % k].id for i in range(k))

    def add_round(self, times: Mapping[str, float], elapsed_s: float) -> RaceResult | None:
        """Add one round (entrant id -> time, e.g. ns); None to run another, or the final RaceResult.

        elapsed_s: seconds since the race began.
        """
        if self._result is not None:
            raise ValueError(f"the race already stopped after {self._result.rounds} rounds")
        if set(times) != set(self.alive):
            raise ValueError(f"a round needs one time per entrant still racing {sorted(self.alive)}; got {sorted(times)}")
        for i, t in times.items():
            if not (math.isfinite(t) and t > 0):
                raise ValueError(f"time of {i!r} must be a positive finite number; got {t!r}")
        for i, t in times.items():
            self._samples[i].append(float(t))
        r = self.rounds
        stop = ("max_rounds" if r >= self.max_rounds
                else "budget" if self.budget_s is not None and elapsed_s >= self.budget_s else None)
        if r not in self.looks and stop is None:
            return None
        res = self.evaluate(elapsed_s, stop)
        self._eliminate(res)
        if stop is None and not res.certified and self._equivalent(res):
            res = replace(res, stopped="equivalent")
            stop = res.stopped
        if res.certified or stop is not None:
            self._result = res
            return res
        return None

    def evaluate(self, elapsed_s: float = 0.0, stop: str | None = None) -> RaceResult:
        """The race as it stands on the rounds so far (`add_round` calls it at each look).

        stop: why the race ends here ("max_rounds", "budget"), None while it runs.
        """
        if not self.rounds:
            raise ValueError("a race needs at least one round before it can be evaluated")
        samples = self._samples
        medians = {i: float(np.median(s)) for i, s in samples.items()}
        leader, *others = sorted(self._racing(), key=lambda e: (medians[e.id], e.threads))
        # the entrants still in ran every round, so their samples pair round by round
        comps = {e.id: compare(samples[leader.id], samples[e.id], alpha=self.pair_alpha, paired=True) for e in others}
        comps.update(self._left)
        rest = [e for e in self.entrants if e.id != leader.id]
        runner_up = min(rest, key=lambda e: comps[e.id].margin)
        closest = comps[runner_up.id]
        if all(comps[e.id].verdict == "faster" for e in others):
            status, pick, rule, tied, stopped = "certified", leader, "certified", (leader,), "separated"
        else:
            tied = (leader, *(e for e in others if comps[e.id].verdict != "faster"))
            pick, rule = tie_break(tied, medians)
            status, stopped = "tie", stop or "running"
        return RaceResult(status, pick.id, rule, leader.id, runner_up.id, closest.margin, closest.ci_low,
                          closest.ci_high, 1 - self.pair_alpha, tuple(e.id for e in tied), self.rounds,
                          float(elapsed_s), stopped, medians, comps, self.entrants, self.decisive_looks[0])

    def _equivalent(self, res: RaceResult) -> bool:
        """Whether every entrant still racing beside the leader is within the equivalence margin of it:
        its paired interval (at the race's corrected level) bounded and inside (-equivalence, +equivalence)."""
        if self.equivalence is None:
            return False
        eps = self.equivalence
        rest = [res.comparisons[i] for i in self.alive if i != res.leader]
        return bool(rest) and all(c.ci_low is not None and c.ci_high is not None and -eps < c.ci_low
                                  and c.ci_high < eps for c in rest)

    def _eliminate(self, res: RaceResult) -> None:
        """After a look: every entrant the leader beat beyond the noise leaves the race."""
        self._left.update({i: c for i, c in res.comparisons.items() if c.verdict == "faster" and i not in self._left})
