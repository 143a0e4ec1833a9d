"""nsys timed iterations on the wall clock, from the real H100 capture
(tests/data/h100/nsys_forward_odd.sqlite: gpt2_forward -n 3 under cudaProfilerApi).

The export's times are ns from the session's start (its diagnostics put "Profiling has
started" at 0) and TARGET_INFO_SESSION_START_TIME.utcEpochNs is that start on the wall
clock, so an iteration's window is utcEpochNs + its kernels' GPU span (sweep.profile.nsys).
"""

from __future__ import annotations

import shutil
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from sweep.profile import Invocation, nsys

DATA = Path(__file__).resolve().parents[1] / "data" / "h100"
CAPTURE = DATA / "nsys_forward_odd.sqlite"


def query(sql: str) -> list[tuple]:
    with sqlite3.connect(f"{CAPTURE.resolve().as_uri()}?mode=ro", uri=True) as conn:
        return conn.execute(sql).fetchall()


def test_the_export_is_timed_from_the_session_start_it_records():
    """What the mapping rests on, read from the capture itself."""
    (utc, text), = query("SELECT utcEpochNs, utcTime FROM TARGET_INFO_SESSION_START_TIME")
    assert datetime.fromtimestamp(utc / 1e9, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") == text
    started = query("SELECT d.timestamp FROM DIAGNOSTIC_EVENT d WHERE d.text = 'Profiling has started.'")
    assert started == [(0,)]
    (first, last), = query("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert 0 < first < last < 1_000_000_000                  # ms after the start: relative, not epoch ns


def test_each_timed_iteration_is_placed_on_the_wall_clock_by_its_kernels_gpu_span():
    (utc,), = query("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    export = nsys.read_export(CAPTURE)
    assert export.iterations == 3 and len(export.windows) == 3
    starts = {s for s, in query("SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL")}
    ends = {e for e, in query("SELECT end FROM CUPTI_ACTIVITY_KIND_KERNEL")}
    for i, (start, end) in enumerate(export.windows):
        assert start - utc in starts and end - utc in ends   # a kernel's own start and end
        mine = [launch.duration_ns for launch in export.launches if launch.iteration == i]
        assert len(mine) == 21 and end - start >= sum(mine)  # the span holds the iteration's 21 launches
    assert all(a[1] <= b[0] for a, b in zip(export.windows, export.windows[1:]))   # in order, apart
    assert export.measurements == nsys.parse_sqlite(CAPTURE)


def test_an_export_without_the_session_start_has_no_windows(tmp_path):
    path = tmp_path / "capture.sqlite"
    shutil.copyfile(CAPTURE, path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE TARGET_INFO_SESSION_START_TIME")
    conn.close()
    export = nsys.read_export(path)
    assert export.windows is None and export.measurements == nsys.parse_sqlite(CAPTURE)


def test_the_backend_hands_the_sampler_windows_and_the_launches_to_drop_iterations_from(tmp_path):
    shutil.copyfile(CAPTURE, tmp_path / "profile.sqlite")
    parsed = nsys.BACKEND.parse(Invocation([], tmp_path / "profile.nsys-rep"), "")
    assert len(parsed.windows) == 3 and len(parsed.timed_launches) == 63
    fewer = parsed.without({1})
    assert fewer.windows == (parsed.windows[0], parsed.windows[2])
    for before, after in zip(parsed.measurements, fewer.measurements):
        assert after.iter_total_ns == (before.iter_total_ns[0], before.iter_total_ns[2])
        assert after.calls == before.calls
