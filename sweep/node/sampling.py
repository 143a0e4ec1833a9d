"""How many times a job runs its profiled program, and what the runs add up to.

Noise is measured, never assumed (sweep.stats.samples). One run's per-iteration
totals are the samples when it has at least 3 timed iterations; a program with
fewer is run `run.repeats` times (default stats.default_repeats: a one-iteration
program 5 times) and the runs' samples are pooled, each run's kept apart in
Measurement.runs. With `run.stopping` on (auto: only for such short programs;
"always" for any), the runs go on until sweep.stats.StoppingRule says stop, per
kernel shape the space governs (`profile.kernels` in config.json; every shape
when none matches): every shape's relative noise under max_noise, or settled
(plateau), or max_samples, or the time budget. A program whose one run already
gives 3 samples or more is run once by default: its iterations measure their
noise, and repeating it would double the GPU time of every configuration.

The plan is made from the space's `run.iterations`, and checked against what the
first run showed (`Sampler.replan`): a program that shows fewer than 3 timed
iterations a run (no NVTX iteration ranges: one; or it ignores the iteration
count) is run as the run settings say for what it showed (Plan.observed: the
stopping rule, at least 5 samples), and Sampled.reason says why. Seeing it needs
the first run parsed on the GPU (Plan.observe: where the backend's parse is
in-process and quick, cupti, events, ncu); where it waits for the GPU's release
(nsys: its export), the reason says the run was short and how to repeat it.

Each run is watched (sweep.node.clocks.Monitor, each reading stamped with the wall
clock), and samples taken while the SM clock was under 75% of the default clock
are dropped and counted (Sampled.throttled_samples). A run whose SM clock never
reached that threshold (its peak) is throttled whole. Where the backend says
when the GPU ran each timed iteration (Parsed.windows: cupti, nsys) and a run
has at least 3, each iteration is a sample: one that ran under the threshold
leaves the run, its launches with it (`judge`), and a run left with fewer than
3 counts as throttled. Elsewhere (ncu, events, a short program's runs) the run
is the sample and only its peak judges it. A throttled run is run again after
a pause (at most MAX_THROTTLED times in a row; after that it is kept and the
record says the GPU stayed throttled).

In overlap mode the runs a Sampler knows it needs (`repeats`, once the first run showed how
many) start together, `Together.slots` at once, each program taking its GPU turns through
the token: one job's repeats overlap their host set-up. Beyond `repeats` the stopping rule
adds runs one at a time. A run's samples are its GPU work, which the token keeps its own, so
the pool is the same; a run out of GPU memory beside the others runs again alone (the note
says so; sweep.node.together).

`Sampler` takes its GPU work as callables (capture one run; parse a capture
into the backend's Parsed), so the job (sweep.node.job) and the race (sweep.node.race)
share it and tests drive it with recorded measurements. A plan of one run
leaves the parse to the caller, after the GPU is released (`Taken.pending`), as
the job always did, unless the run's clock fell under the threshold after it
had boosted: then its iterations may have run throttled, and it is parsed on
the GPU, where it can still be run again (the idle clock before a program's
first kernels is no reason). A run parsed later has its iterations judged
then; should fewer than 3 be left, it is kept whole and the note says so.
"""

from __future__ import annotations

import fnmatch
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Generic, TypeVar

from sweep.node import clocks
from sweep.node.together import Together, at_once
from sweep.records.evidence import Sampled
from sweep.profile import Measurement, Parsed
from sweep.space.model import Run
from sweep.stats import MIN_SAMPLES_FOR_NOISE, StoppingRule, noise_samples, summarize
from sweep.stats.stopping import STOP_REASONS

MAX_THROTTLED = 3        # throttled runs in a row before one is kept anyway
PAUSE_S = 2.0            # seconds to let a throttled GPU recover before the next run
C = TypeVar("C")


@dataclass(frozen=True, slots=True)
class Plan:
    """repeats: runs at least; adaptive: the stopping rule decides beyond them; iterations:
    timed iterations per run (what the space says); kernels: the patterns of the watched
    shapes. run: the space's run settings, to plan again from what the first run showed
    (None: the plan stands, as a race round's). observe: a single run is parsed on the GPU
    (the backend's parse is quick, in-process) so that a program showing fewer timed
    iterations than `iterations` is repeated at once; without it the parse waits for the
    GPU's release and such a run can only be said to be short."""

    repeats: int = 1
    adaptive: bool = False
    iterations: int = 1
    rule: StoppingRule = field(default_factory=StoppingRule)
    kernels: tuple[str, ...] = ()
    pause_s: float = PAUSE_S
    run: Run | None = None
    observe: bool = False

    @property
    def single(self) -> bool:
        return self.repeats == 1 and not self.adaptive

    def observed(self, shown: int) -> "Plan | None":
        """The plan for a program whose first run showed `shown` timed iterations (its watched shape
        with the fewest), when that is too few to measure their noise and fewer than planned: runs
        and stopping as the space's run settings give for `shown` iterations a run (as though
        run.iterations said so). None: the plan stands."""
        if self.run is None or not 0 < shown < min(MIN_SAMPLES_FOR_NOISE, self.iterations):
            return None
        repeats, adaptive = self.run.runs_for(shown)
        return replace(self, repeats=repeats, adaptive=adaptive, iterations=shown, observe=False)

    @classmethod
    def of(cls, run: Mapping[str, Any], profile: Mapping[str, Any], iterations: int | None = None) -> "Plan":
        """The plan of config.json's run: and profile: sections; `iterations`: per run, when
        the backend runs fewer than run.iterations (ncu)."""
        r = Run.from_dict(run)
        n = iterations or r.iterations
        repeats, adaptive = r.runs_for(n)
        st = r.stopping
        rule = StoppingRule(max_noise=st.max_noise, min_samples=st.min_samples, max_samples=st.max_samples,
                            budget_s=st.budget_s)
        return cls(repeats, adaptive, n, rule, tuple(profile.get("kernels", ())), run=r)


def pool(runs: Sequence[Sequence[Measurement]]) -> list[Measurement]:
    """One Measurement per kernel shape over several runs: per-iteration totals concatenated
    (a run that missed the shape counts 0 for each of its iterations), Measurement.runs
    the iterations of each run. Per launch: min, max and mean over every launch, std
    pooled (within and between runs), median the median of the runs' medians."""
    if len(runs) == 1:
        return list(runs[0])
    sizes = [max((len(m.iter_total_ns) for m in run), default=0) for run in runs]
    keys = sorted({(m.kernel, m.grid, m.block) for run in runs for m in run})
    out = []
    for key in keys:
        found = [next((m for m in run if (m.kernel, m.grid, m.block) == key), None) for run in runs]
        there = [m for m in found if m is not None]
        totals = [x for m, n in zip(found, sizes) for x in (m.iter_total_ns if m is not None else (0.0,) * n)]
        weights = [m.calls * max(1, len(m.iter_total_ns)) for m in there]
        mean = sum(w * m.mean_ns for w, m in zip(weights, there)) / sum(weights)
        var = sum(w * (m.std_ns ** 2 + (m.mean_ns - mean) ** 2) for w, m in zip(weights, there)) / sum(weights)
        first = there[0]
        out.append(Measurement(
            kernel=first.kernel, grid=first.grid, block=first.block, calls=max(m.calls for m in there),
            median_ns=statistics.median(m.median_ns for m in there), min_ns=min(m.min_ns for m in there),
            max_ns=max(m.max_ns for m in there), mean_ns=mean, std_ns=math.sqrt(var), iter_total_ns=tuple(totals),
            kernel_full=first.kernel_full, runs=tuple(sizes)))
    return out


def watched(ms: Sequence[Measurement], kernels: Sequence[str]) -> list[Measurement]:
    """The shapes whose kernels match `kernels` (all of them when none does, or none are given)."""
    hit = [m for m in ms if any(fnmatch.fnmatchcase(m.kernel, p) for p in kernels)]
    return hit or list(ms)


def shown(ms: Sequence[Measurement], kernels: Sequence[str]) -> int:
    """Timed iterations one run showed: those of its watched shape with the fewest (0: none measured)."""
    return min((len(m.iter_total_ns) for m in watched(ms, kernels)), default=0)


def short_reason(shown: int, planned: int, runs: int, repeated: bool) -> str:
    """Why a program's runs are as many as they are when it showed fewer timed iterations than planned."""
    what = ("1 iteration a run (no NVTX iteration ranges, or it ignores the iteration count)" if shown == 1
            else f"{shown} iterations a run")
    head = f"the program showed {what}, not run.iterations' {planned}"
    if repeated:
        return f"{head}: repeated to {runs} runs"
    return (f"{head}: not repeated (this backend parses a run once the GPU is released), so its noise is unknown; "
            f"run.iterations: {shown} in the space repeats it")


def cost_line(sampled: Sampled) -> str:
    """The sweep's one line about a program that showed fewer timed iterations than its space said
    (sampled.reason set), and what that costs a configuration; "" for any other."""
    if not sampled.reason:
        return ""
    if sampled.runs > 1:
        return (f"{sampled.reason.split(', not run.iterations')[0]}: each configuration runs it about {sampled.runs} times for its "
                f"noise (NVTX \"iteration\" ranges around its timed iterations make one run enough)")
    return sampled.reason


def decide(rule: StoppingRule, ms: Sequence[Measurement], elapsed_s: float) -> dict[str, Any] | None:
    """The rule over every shape at once: None while one still needs samples, else the
    Stopped record of the whole (the least samples, the most noise, the last reason to stop)."""
    if not ms:
        return None
    stops = [rule.check(m.iter_total_ns, elapsed_s) for m in ms]
    if any(s is None for s in stops):
        return None
    noises = [s.noise for s in stops]
    return {"samples": min(s.samples for s in stops), "noise": None if None in noises else max(noises),
            "reason": max((s.reason for s in stops), key=STOP_REASONS.index), "elapsed_s": float(elapsed_s)}


def describe(ms: Sequence[Measurement], kernels: Sequence[str], runs: int, **fields: Any) -> Sampled:
    """The Sampled record of pooled measurements: samples, noise and where it comes from."""
    shapes = watched(ms, kernels)
    if not shapes:
        return Sampled(runs=runs, **fields)
    fewest = min(shapes, key=lambda m: len(m.iter_total_ns))
    source = noise_samples(fewest.per_run).source if fewest.iter_total_ns else "unknown"
    noises = {m.shape: summarize(m.iter_total_ns).noise for m in shapes if m.iter_total_ns}
    known = {k: v for k, v in noises.items() if v is not None}
    noisiest = max(known, key=known.get) if known and len(known) == len(noises) else ""
    return Sampled(runs=runs, samples=len(fewest.iter_total_ns), source=source,
                   noise=known[noisiest] if noisiest else None, noisiest=noisiest, **fields)


def judge(parsed: Parsed, series: clocks.Series | None, default_mhz: float | None) -> tuple[Parsed, int, str]:
    """One run judged per timed iteration: (the run without the iterations its GPU ran under 75%
    of the default clock, how many those were, ""); or, when fewer than 3 iterations would be
    left, (the run as it was, 0, why the whole run counts as throttled).

    An iteration's clock is clocks.Series.iteration_clocks' (the lowest reading inside its
    window, else the readings next to it). Nothing is judged (the run as it was, 0, "") in a
    run of fewer than 3 iterations (its sample is the run: its peak judged it), without
    windows (ncu, events, a sweep-cupti/1 capture) or readings, or with no default clock."""
    windows = parsed.windows or ()
    if default_mhz is None or series is None or not series.readings or len(windows) < MIN_SAMPLES_FOR_NOISE:
        return parsed, 0, ""
    cut = {i for i, sm in enumerate(series.iteration_clocks(windows)) if clocks.throttled(sm, default_mhz)}
    if len(windows) - len(cut) < MIN_SAMPLES_FOR_NOISE:
        return parsed, 0, (f"{len(cut)} of {len(windows)} timed iterations under "
                           f"{clocks.threshold(default_mhz):.0f} MHz")
    return parsed.without(cut), len(cut), ""


@dataclass(frozen=True, slots=True)
class Kept(Generic[C]):
    """One run Sampler.one kept: its capture; its parse, throttled iterations dropped, when it was
    parsed on the GPU (None: parse it later); its readings and peak; the throttled runs dropped
    before it and the iterations dropped from it; a note when it was kept though throttled."""

    capture: C
    parsed: Parsed | None
    series: clocks.Series
    peak: clocks.Reading
    throttled_runs: int
    throttled_iterations: int
    note: str = ""


@dataclass
class Taken(Generic[C]):
    """What Sampler.take gathered on the GPU: parsed runs, or (one-run plan) the capture to parse
    and the readings taken while it ran (`series`, to judge its iterations by once parsed)."""

    runs: list[list[Measurement]]
    pending: C | None
    clocks: list[dict[str, float | None]]
    throttled_runs: int
    throttled_samples: int
    stopped: dict[str, Any] | None
    elapsed_s: float
    note: str = ""
    series: clocks.Series | None = None


class Sampler(Generic[C]):
    """Runs `capture` (one profiled run, on the GPU) and `parse` (the backend's Parsed of it) as the plan says.

    facts: the GPU's fingerprint (clocks.fingerprint) for its default clock; reader:
    the clock reader (None: no clocks, nothing counts as throttled); monitor: what
    watches a run (clocks.Monitor; a seam for tests); together: overlap mode's runs at
    once (None: one run after another).
    """

    def __init__(self, plan: Plan, capture: Callable[[], C], parse: Callable[[C], Parsed], *,
                 reader: clocks.Reader | None = None, facts: Mapping[str, Any] | None = None,
                 sleep: Callable[[float], None] | None = None, clock: Callable[[], float] = time.monotonic,
                 monitor: Callable[[clocks.Reader | None], clocks.Monitor] = clocks.Monitor,
                 together: Together[C] | None = None):
        self.plan, self.capture, self.parse, self.together = plan, capture, parse, together
        self.reader, self.clock, self.monitor = reader, clock, monitor
        self.sleep = sleep or (lambda s: clocks.sleep(s))
        self.default_mhz = clocks.default_clock(dict(facts or {}))
        self.planned = plan.iterations          # what the space said, before the first run showed otherwise
        self.short: tuple[int, bool] | None = None   # (iterations the first run showed, repeated for it?)

    def replan(self, ms: Sequence[Measurement]) -> bool:
        """Plan again from the first run's measurements: a program showing fewer than 3 timed
        iterations a run, fewer than planned, is run as often as the space's run settings say for
        what it showed (Plan.observed). Whether the plan changed."""
        n = shown(ms, self.plan.kernels)
        new = self.plan.observed(n)
        if new is not None:
            self.plan, self.short = new, (n, True)
        return new is not None

    def parses_on_gpu(self, series: clocks.Series) -> bool:
        """Whether a run is parsed at once, on the GPU: each of several runs (as always), and a
        single run whose clock fell under the threshold after it had boosted, the one sign before
        its parse that some of its iterations ran throttled and it may have to run again. Any
        other single run is parsed after the GPU is released."""
        return not self.plan.single or self.plan.observe or (
            self.plan.iterations >= MIN_SAMPLES_FOR_NOISE and series.fell_after_boost(self.default_mhz))

    def one(self, capture: Callable[[], C] | None = None) -> Kept[C]:
        """One run the GPU did not throttle: its peak SM clock reached the threshold and, judged
        per iteration (`judge`, when it is parsed here), at least 3 of its iterations did. A
        throttled run is dropped and run again after a pause, at most MAX_THROTTLED times in a
        row; after that it is kept and the note says so. `capture`: in place of the Sampler's
        own (a run of several at once, in its own files)."""
        dropped, note = 0, ""
        while True:
            with self.monitor(self.reader) as mon:
                cap = (capture or self.capture)()
            peak, series = mon.peak(), mon.series()
            parsed, cut, why = None, 0, ""
            if clocks.throttled(peak.sm_mhz, self.default_mhz):
                why = f"SM clock {peak.sm_mhz:.0f} MHz < {clocks.threshold(self.default_mhz):.0f}"
            elif self.parses_on_gpu(series):
                parsed, cut, why = judge(self.parse(cap), series, self.default_mhz)
            if not why:
                return Kept(cap, parsed, series, peak, dropped, cut, note)
            if dropped >= MAX_THROTTLED:
                note = f"the GPU stayed throttled ({why}) for {dropped + 1} runs in a row: this run was kept"
                if parsed is None and not self.plan.single:    # each of several runs is parsed as it comes
                    parsed = self.parse(cap)
                return Kept(cap, parsed, series, peak, dropped, 0, note)
            dropped += 1
            self.sleep(self.plan.pause_s)

    def batch(self, done: int) -> int:
        """How many runs to start now, `done` kept so far: those the plan still needs up to its
        `repeats`, as many at once as `together` allows (overlap mode), else one. The first run goes
        alone unless `together.first`: it may carry the check and shows how many runs are needed."""
        t = self.together
        if t is None or self.plan.single or (done == 0 and not t.first):
            return 1
        return max(1, min(self.plan.repeats - done, t.slots()))

    def several(self, done: int, n: int) -> tuple[list[Kept[C]], str]:
        """Runs done+1 .. done+n at once (`together`): run 1 by the Sampler's own capture, the others in
        files of their own; one out of GPU memory beside the others runs again alone. (The runs kept,
        in order; a note when any ran alone.)"""
        t = self.together
        assert t is not None

        def again_alone(i: int) -> Kept[C]:
            with t.alone():
                return self.one()
        runs = range(done + 1, done + n + 1)
        kept, alone = at_once([partial(self.one, None if k == 1 else partial(t.capture, k)) for k in runs], n, again_alone)
        note = (f"{len(alone)} of {n} runs taken at once ran out of GPU memory beside other programs: "
                f"each ran again alone") if alone else ""
        return kept, note

    def take(self) -> Taken[C]:
        """The runs, on the GPU: until `repeats` are kept and (adaptive) the rule stops them."""
        start, runs, peaks = self.clock(), [], []
        throttled_runs, throttled_samples, notes = 0, 0, []
        while True:
            n = self.batch(len(runs))
            batch, alone_note = self.several(len(runs), n) if n > 1 else ([self.one()], "")
            notes += [alone_note] if alone_note else []
            first = not runs
            for kept in batch:
                throttled_runs += kept.throttled_runs
                throttled_samples += kept.throttled_runs * self.plan.iterations + kept.throttled_iterations
                notes += [kept.note] if kept.note else []
                if self.reader is not None:
                    peaks.append(kept.peak.to_dict())
                if kept.parsed is None:      # a single run, parsed by `finish` off the GPU
                    return Taken([], kept.capture, peaks, throttled_runs, throttled_samples, None,
                                 self.clock() - start, "; ".join(notes), kept.series)
                runs.append(kept.parsed.measurements)
            if first:
                self.replan(runs[0])
            stopped = None
            if not all(runs[-len(batch):]):      # nothing measured: more runs will not help (the caller says why)
                break
            if len(runs) >= self.plan.repeats:
                if not self.plan.adaptive:
                    break
                stopped = decide(self.plan.rule, watched(pool(runs), self.plan.kernels), self.clock() - start)
                if stopped is not None:
                    break
        return Taken(runs, None, peaks, throttled_runs, throttled_samples, stopped, self.clock() - start,
                     "; ".join(notes))

    def finish(self, taken: Taken[C]) -> tuple[list[Measurement], Sampled]:
        """The pooled Measurements and the Sampled record. A pending capture is parsed here (off
        the GPU) and judged per iteration; too late to run it again, a run with fewer than 3
        iterations left is kept whole and the note says so."""
        runs, throttled_samples, notes = taken.runs, taken.throttled_samples, [taken.note] if taken.note else []
        if taken.pending is not None:
            parsed, cut, why = judge(self.parse(taken.pending), taken.series, self.default_mhz)
            runs, throttled_samples = [parsed.measurements], throttled_samples + cut
            notes += [f"{why}, seen once the GPU was released: the run was kept whole"] if why else []
            n = shown(parsed.measurements, self.plan.kernels)
            if self.plan.observed(n) is not None:      # too late to repeat it: say so
                self.short = (n, False)
        ms = pool(runs)
        reason = short_reason(self.short[0], self.planned, len(runs), self.short[1]) if self.short else ""
        return ms, describe(ms, self.plan.kernels, len(runs), adaptive=self.plan.adaptive, stopped=taken.stopped,
                            throttled_runs=taken.throttled_runs, throttled_samples=throttled_samples,
                            threshold_mhz=clocks.threshold(self.default_mhz), clocks=tuple(taken.clocks),
                            elapsed_s=taken.elapsed_s, note="; ".join(notes), reason=reason)
