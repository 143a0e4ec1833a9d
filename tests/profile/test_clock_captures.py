"""Real H100 captures with the wall clock in them (tests/data/h100/cupti/clock, README there):
the timed iterations the cupti and nsys backends report land inside the run as the shell timed
it, and the sweep's own NVML readings of that run judge each iteration by the clock it ran at."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.node import clocks, sampling
from sweep.profile import Invocation, cupti, nsys
from sweep.profile.cupti_file import read_capture

CLOCK = Path(__file__).resolve().parents[1] / "data" / "h100" / "cupti" / "clock"
ITERATIONS = 20


def wall(name: str) -> tuple[int, int]:
    before, after = (CLOCK / name).read_text().split()
    return int(before), int(after)


def backend_parsed(name: str):
    """The cupti backend's Parsed of a capture, as the sampler gets it."""
    return cupti.BACKEND.parse(Invocation(["tiled_gemm"], CLOCK / name), "")


def monitored() -> tuple[clocks.Series, float]:
    data = json.loads((CLOCK / "gemm_monitored_readings.json").read_text())
    readings = tuple(clocks.Stamped(r["t_ns"], clocks.Reading(r["sm_mhz"], r["mem_mhz"], r["temperature_c"],
                                                              r["power_w"])) for r in data["readings"])
    return clocks.Series(readings, data["interval_s"]), data["default_mhz"]


@pytest.mark.parametrize("windows, run", [
    (lambda: cupti.parse(CLOCK / "gemm_nvtx_clock.txt").windows, "gemm_nvtx_clock.wall"),
    (lambda: nsys.read_export(CLOCK / "nsys_gemm_clock.sqlite").windows, "nsys_gemm_clock.wall"),
], ids=["cupti", "nsys"])
def test_every_timed_iteration_of_a_real_run_lies_inside_the_run_on_the_wall_clock(windows, run):
    got, (before, after) = windows(), wall(run)
    assert len(got) == ITERATIONS
    assert all(before < start < end < after for start, end in got)
    gaps = [b[0] - a[1] for a, b in zip(got, got[1:])]
    assert all(25e6 < g < 40e6 for g in gaps)          # the program pauses 30 ms between iterations


def test_the_librarys_clock_pairs_put_cuptis_clock_within_a_microsecond_of_the_wall_clock():
    pairs = read_capture(CLOCK / "gemm_nvtx_clock.txt").clock_pairs
    assert len(pairs) == 2 and all(abs(p.realtime_ns - p.cupti_ns) < 1_000 for p in pairs)


def test_a_real_run_at_the_boost_clock_keeps_every_iteration_and_its_idle_start_drops_nothing():
    series, default = monitored()
    parsed = backend_parsed("gemm_monitored.txt")
    assert min(s.reading.sm_mhz for s in series.readings) == 345.0     # the idle clock before the program's kernels
    assert series.iteration_clocks(parsed.windows) == [default] * ITERATIONS
    kept, dropped, why = sampling.judge(parsed, series, default)
    assert (dropped, why) == (0, "") and kept is parsed and not series.fell_after_boost(default)


def test_one_real_reading_lowered_mid_run_drops_the_iterations_next_to_it_and_only_their_launches():
    series, default = monitored()
    parsed = backend_parsed("gemm_monitored.txt")
    first, last = parsed.windows[0][0], parsed.windows[-1][1]
    mid = [s.t_ns for s in series.readings if first < s.t_ns < last][len(parsed.windows) // 4]
    throttled = clocks.Series(tuple(clocks.Stamped(s.t_ns, clocks.Reading(1000.0)) if s.t_ns == mid else s
                                    for s in series.readings), series.interval_s)
    kept, dropped, why = sampling.judge(parsed, throttled, default)
    poll = series.interval_s * 1e9
    gone = [w for w in parsed.windows if w not in kept.windows]
    assert why == "" and 1 <= dropped == len(gone) <= 4   # a poll spans up to 2 iterations each side and throttled.fell_after_boost(default)
    assert all(start - poll <= mid <= end + poll for start, end in gone)     # only iterations next to the reading
    assert {len(m.iter_total_ns) for m in kept.measurements} == {ITERATIONS - dropped}
