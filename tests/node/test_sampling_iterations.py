"""Throttling judged per timed iteration (no GPU): stamped clock readings set against the
iteration windows a backend reports (sweep.node.clocks.Series, sweep.node.sampling.judge, Sampler).

A recorded run here is 20 timed iterations of 80 ms, one every 100 ms from T0, and an
SM clock polled every 50 ms (NVML's interval): readings land inside every iteration. The
GPU's default clock is 1980 MHz, so the threshold is 1485 MHz; it idles at 345 MHz.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence

import pytest

from sweep.node import clocks, sampling
from sweep.profile import Launch, Parsed, aggregate

T0 = 1_795_472_377_000_000_000          # a wall-clock ns (2026-11-23)
MS = 1_000_000
ITER_EVERY, ITER_LONG, ITERATIONS = 100 * MS, 80 * MS, 20
POLL = 50 * MS
IDLE, LOW, HIGH = 345.0, 1000.0, 1980.0
FACTS = {"gpu": "H100", "gpu_uuid": "GPU-1", "driver": "580", "default_sm_mhz": HIGH, "max_sm_mhz": HIGH}
RUN = {"batch": 1, "seq_len": 1, "warmup": 1, "iterations": ITERATIONS, "args": [], "verify": True}


def windows(n: int = ITERATIONS, every: int = ITER_EVERY, long: int = ITER_LONG) -> tuple[tuple[int, int], ...]:
    return tuple((T0 + i * every, T0 + i * every + long) for i in range(n))


def run_parsed(with_windows: bool = True) -> Parsed:
    """One run as a backend parses it: kernel a launched once per iteration (1000 + i ns), kernel b
    twice (500 ns and 600 + i ns), so every iteration's totals are told apart."""
    launches = tuple(Launch("a", (1, 1, 1), (128, 1, 1), 1000.0 + i, i) for i in range(ITERATIONS)) + tuple(
        Launch("b", (2, 1, 1), (64, 1, 1), d, i) for i in range(ITERATIONS) for d in (500.0, 600.0 + i))
    return Parsed(aggregate(launches, ITERATIONS), timed_launches=launches,
                  windows=windows() if with_windows else None)


def clock_at(low: Iterable[int] = (), busy_from: int = T0) -> Callable[[int], float]:
    """The SM clock at a time: idle before `busy_from`, LOW inside the iterations `low`, else HIGH."""
    low = set(low)

    def sm(t: int) -> float:
        if t < busy_from:
            return IDLE
        i = (t - T0) // ITER_EVERY
        return LOW if i in low else HIGH
    return sm


def polled(sm: Callable[[int], float], start: int = T0 - 300 * MS, end: int = T0 + 2100 * MS) -> list[clocks.Stamped]:
    """A reading every POLL from `start` to `end` (the program's start, its exit)."""
    return [clocks.Stamped(t, clocks.Reading(sm(t), 2619.0)) for t in range(start, end, POLL)]


class Gpu:
    """The reader the sampler is given (its readings come from the replayed monitors)."""

    interval_s = POLL / 1e9

    def read(self) -> clocks.Reading:
        return clocks.Reading(HIGH)

    def facts(self) -> dict:
        return FACTS


class Replayed(clocks.Monitor):
    """A monitor that watched nothing live: it holds one recorded run's readings."""

    def __init__(self, readings: Sequence[clocks.Stamped]):
        super().__init__(None, POLL / 1e9)
        self.readings = list(readings)


def sampler(runs: Sequence[Sequence[clocks.Stamped]], parse: Callable[[str], Parsed] = lambda cap: run_parsed(),
            plan: sampling.Plan | None = None, pauses: list | None = None) -> sampling.Sampler:
    """A Sampler whose n-th run's clock readings are runs[n]."""
    recorded = iter(runs)
    return sampling.Sampler(plan or sampling.Plan.of(RUN, {}), lambda: "capture", parse, reader=Gpu(), facts=FACTS,
                            sleep=(pauses if pauses is not None else []).append,
                            monitor=lambda reader: Replayed(next(recorded)))


def series(readings: Sequence[clocks.Stamped]) -> clocks.Series:
    return clocks.Series(tuple(readings), POLL / 1e9)


# --- an iteration's clock ------------------------------------------------------

def at(*pairs: tuple[int, float]) -> list[clocks.Stamped]:
    """Readings at T0 + ms, as (ms, sm_mhz)."""
    return [clocks.Stamped(T0 + ms * MS, clocks.Reading(sm)) for ms, sm in pairs]


SPANS = ((T0, T0 + 2 * MS), (T0 + 50 * MS, T0 + 52 * MS), (T0 + 198 * MS, T0 + 200 * MS))   # 2 ms iterations


@pytest.mark.parametrize("readings, want", [
    (at((0, 1900.0), (51, 1200.0), (51, 1700.0), (200, 1900.0)), 1200.0),   # inside it: the lowest reading there
    (at((0, 1900.0), (52, 1300.0), (200, 1900.0)), 1300.0),                 # its end is inside it
    (at((0, 1900.0), (40, 1400.0), (60, 1950.0), (200, 1900.0)), 1400.0),   # none inside: the lower neighbour
    (at((0, 1900.0), (40, 1950.0), (60, 1400.0), (200, 1900.0)), 1400.0),
    (at((0, 1900.0), (40, 1950.0), (150, 1400.0), (200, 1900.0)), 1950.0),  # 98 ms after it: more than a poll
    (at((200, 1900.0)), float("nan")),                                      # nothing within a poll of it: unknown
])
def test_an_iteration_shorter_than_a_poll_is_judged_by_the_readings_next_to_it(readings, want):
    got = series(readings).iteration_clocks(SPANS)[1]
    assert got == want or (math.isnan(got) and math.isnan(want))


def test_readings_only_before_the_first_iteration_the_idle_clock_say_nothing_of_the_iterations():
    short = windows(every=2 * MS, long=MS)                           # 20 iterations of 1 ms, within 40 ms
    got = series(at((-40, IDLE), (-10, IDLE))).iteration_clocks(short)
    assert len(got) == ITERATIONS and all(math.isnan(sm) for sm in got)
    parsed, dropped, why = sampling.judge(run_parsed(), series(at((-40, IDLE), (-10, IDLE))), HIGH)
    assert (dropped, why) == (0, "") and parsed.windows == windows()


# --- the sampler ------------------------------------------------------------------

def test_iterations_run_under_75_percent_are_dropped_with_their_launches_and_the_run_kept():
    pauses: list = []
    s = sampler([polled(clock_at(low=(5, 12)))], pauses=pauses)
    taken = s.take()
    assert taken.pending is None                                     # the clock fell after it boosted: parsed here
    (a, b), rec = s.finish(taken)
    kept = [i for i in range(ITERATIONS) if i not in (5, 12)]
    assert a.iter_total_ns == tuple(1000.0 + i for i in kept)
    assert b.iter_total_ns == tuple(1100.0 + i for i in kept) and b.calls == 2
    assert b.median_ns == statistics.median([500.0] * 18 + [600.0 + i for i in kept])
    assert (rec.runs, rec.samples, rec.throttled_runs, rec.throttled_samples, pauses) == (1, 18, 0, 2, [])
    assert rec.threshold_mhz == pytest.approx(1485.0) and rec.note == ""


def test_a_run_throttled_in_18_of_20_iterations_is_run_again_after_a_pause():
    pauses: list = []
    s = sampler([polled(clock_at(low=range(2, 20))), polled(clock_at())], pauses=pauses)
    (a, _), rec = s.finish(s.take())
    assert pauses == [sampling.PAUSE_S]
    assert (rec.runs, rec.samples, rec.throttled_runs, rec.throttled_samples) == (1, 20, 1, 20)
    assert len(a.iter_total_ns) == ITERATIONS


def test_a_gpu_throttled_in_most_iterations_run_after_run_keeps_the_last_run_whole_and_says_so():
    s = sampler([polled(clock_at(low=range(2, 20)))] * (sampling.MAX_THROTTLED + 1))
    (a, _), rec = s.finish(s.take())
    assert rec.throttled_runs == sampling.MAX_THROTTLED and len(a.iter_total_ns) == ITERATIONS
    assert "stayed throttled (18 of 20 timed iterations under 1485 MHz)" in rec.note


def test_the_idle_clock_before_the_first_iteration_drops_nothing_and_the_parse_waits_for_the_gpu():
    parsed: list = []
    s = sampler([polled(clock_at(busy_from=T0))], parse=lambda cap: parsed.append(cap) or run_parsed())
    taken = s.take()                                                 # T0 - 50 ms read 345 MHz: one poll before
    assert taken.pending == "capture" and parsed == []               # nothing fell after the boost
    (a, _), rec = s.finish(taken)
    assert len(a.iter_total_ns) == ITERATIONS and rec.throttled_samples == 0 and rec.note == ""


def test_iterations_found_throttled_once_parsed_are_dropped_then():
    """The clock reached the threshold only in iteration 3: nothing fell after the boost, so
    the parse waited for the GPU's release, and it drops the 3 iterations before."""
    s = sampler([polled(clock_at(low=range(3)))])
    taken = s.take()
    assert taken.pending is not None
    (a, _), rec = s.finish(taken)
    assert a.iter_total_ns == tuple(1000.0 + i for i in range(3, ITERATIONS)) and rec.throttled_samples == 3


def test_a_run_found_throttled_only_once_the_gpu_was_released_is_kept_whole_and_said_so():
    s = sampler([polled(clock_at(low=range(18)))])
    (a, _), rec = s.finish(s.take())
    assert len(a.iter_total_ns) == ITERATIONS and rec.throttled_samples == 0 and rec.throttled_runs == 0
    assert rec.note == ("18 of 20 timed iterations under 1485 MHz, seen once the GPU was released: "
                        "the run was kept whole")


def test_a_backend_without_windows_keeps_the_per_run_rule():
    pauses: list = []
    s = sampler([polled(clock_at(low=(5, 12)))], parse=lambda cap: run_parsed(with_windows=False), pauses=pauses)
    (a, _), rec = s.finish(s.take())                                 # a dip, but no window to place it in
    assert len(a.iter_total_ns) == ITERATIONS and rec.throttled_samples == 0 and pauses == []
    s = sampler([polled(lambda t: LOW), polled(clock_at())], parse=lambda cap: run_parsed(with_windows=False),
                pauses=pauses)
    _, rec = s.finish(s.take())                                      # its peak under the threshold: run again
    assert pauses == [sampling.PAUSE_S] and (rec.throttled_runs, rec.throttled_samples) == (1, 20)


def test_each_of_several_runs_drops_its_own_throttled_iterations_before_they_are_pooled():
    plan = sampling.Plan.of(RUN | {"repeats": 2}, {})
    s = sampler([polled(clock_at(low=(0, 1))), polled(clock_at(low=(19,)))], plan=plan)
    (a, _), rec = s.finish(s.take())
    assert a.runs == (18, 19) and a.per_run[0][0] == 1002.0 and a.per_run[1][-1] == 1018.0
    assert (rec.runs, rec.samples, rec.source, rec.throttled_samples) == (2, 37, "runs", 3)


def test_the_monitor_stamps_each_reading_with_the_wall_clock_in_time_order():
    before = time.time_ns()
    with clocks.Monitor(Gpu(), interval_s=60.0) as mon:
        pass
    after = time.time_ns()
    got = mon.series()
    assert len(got.readings) == 2 and got.interval_s == 60.0
    assert before <= got.readings[0].t_ns <= got.readings[1].t_ns <= after
    assert got.readings[0].reading.sm_mhz == HIGH


def test_a_clock_falls_after_the_boost_only_when_it_dips_between_boosted_readings_not_at_the_end():
    assert not series(at((-50, IDLE), (0, HIGH), (50, HIGH))).fell_after_boost(HIGH)
    assert series(at((-50, IDLE), (0, HIGH), (50, LOW), (100, HIGH))).fell_after_boost(HIGH)
    assert not series(at((-50, IDLE), (0, HIGH), (50, LOW))).fell_after_boost(HIGH)   # the work is over
    assert not series(at((0, HIGH), (50, LOW))).fell_after_boost(None)             # no default clock: never
