"""Kernels that overlap on one stream (programmatic dependent launch) are timed by what they add
to their stream (sweep.profile.overlap), in both backends that read GPU start and end times:
cupti on a small sweep-cupti/2 file written here, nsys on a copy of the real H100 export
(tests/data/h100/nsys_forward_odd.sqlite) with a few kernel rows moved in SQL. Every committed
capture has its kernels one after another on a single stream, so each parses as it did before
the clip.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from sweep.profile import Invocation, cupti, cupti_parse, nsys
from sweep.profile.cupti_file import FORMAT
from sweep.profile.overlap import Clipped, clip, note

DATA = Path(__file__).resolve().parents[1] / "data"
NSYS = DATA / "h100" / "nsys_forward_odd.sqlite"
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"


# --- the pure function ------------------------------------------------------------------

def test_without_overlap_each_kernel_keeps_its_whole_span():
    spans = [("s", 0, 100), ("s", 100, 250), ("s", 300, 310), ("t", 0, 50)]
    assert clip(spans) == [Clipped(100, 0), Clipped(150, 0), Clipped(10, 0), Clipped(50, 0)]


def test_a_kernel_starting_before_its_predecessor_on_the_stream_ends_counts_from_that_end():
    assert clip([("s", 0, 100), ("s", 60, 180)]) == [Clipped(100, 0), Clipped(80, 40)]


def test_kernels_on_different_streams_are_never_clipped_against_each_other():
    assert clip([("s", 0, 100), ("t", 60, 180), (("dev1", "s"), 10, 90)]) == [
        Clipped(100, 0), Clipped(120, 0), Clipped(80, 0)]


def test_a_kernel_entirely_inside_its_predecessors_span_adds_nothing_and_never_goes_negative():
    assert clip([("s", 0, 100), ("s", 20, 70), ("s", 80, 130)]) == [
        Clipped(100, 0), Clipped(0, 50), Clipped(30, 20)]    # the third counts from 100, not from 70


def test_unsorted_input_is_ordered_by_start_then_end_and_answered_in_input_order():
    spans = [("s", 60, 180), ("t", 5, 6), ("s", 0, 100), ("s", 60, 120)]
    # on s: (0,100) first, then (60,120) (same start, earlier end) from 100, then (60,180) from 120
    assert clip(spans) == [Clipped(60, 60), Clipped(1, 0), Clipped(100, 0), Clipped(20, 40)]


def test_the_note_names_the_overlapped_launches_only_when_there_are_some():
    assert note([0.0, 0.0]) == {}
    (text,) = note([0.0, 1500.0, 500.0]).values()
    assert text.startswith("2 launches started before the kernel ahead on their stream ended") and "2.0 us" in text
    assert note([700.0])["overlap"].startswith("1 launch started before")


def test_the_note_leaves_out_timestamp_slivers_between_back_to_back_kernels():
    assert note([32.0, 33.0, 0.0]) == {}
    assert note([32.0, 1500.0])["overlap"].startswith("1 launch started before")


# --- cupti: a small capture written here ------------------------------------------------

def kern(corr: int, start: int, end: int, stream: int, grid_x: int) -> str:
    fields = [corr, start, end, 0, 1, stream, grid_x, 1, 1, 128, 1, 1, 32, 0, 0, 0, 0]
    return "kern\t" + "\t".join(map(str, fields)) + "\n"


def capture(tmp_path: Path) -> Path:
    """Two kernels overlapped by 1 us on stream 7 (grids 1 and 2) and one on stream 8 (grid 3)
    that overlaps both; no NVTX ranges, so all three count in one iteration."""
    path = tmp_path / "profile_cupti.txt"
    path.write_text(
        f"{FORMAT}\tpid=1\tcupti_api=130001\tstart_ns=1000000\texe=/bin/pdl\n"
        "clock\t1000000\t5000000000\n"
        "name\t0\t_Z6decodev\tdecode()\n"
        + kern(1, 2_000_000, 2_005_000, 7, 1)
        + kern(2, 2_004_000, 2_009_000, 7, 2)      # started 1 us before kernel 1 ended: 4 us of its own
        + kern(3, 2_003_000, 2_008_000, 8, 3)      # another stream: its whole 5 us
        + "end\tkernels=3\tcalls=0\tmarks=0\tdropped=0\tfails=0\n")
    return path


def test_cupti_times_a_launch_overlapping_its_predecessor_on_the_stream_from_that_ones_end(tmp_path):
    got = cupti.parse(capture(tmp_path))
    by_grid = {launch.grid[0]: launch for launch in got.timed_launches}
    assert {g: (launch.duration_ns, launch.overlap_ns) for g, launch in by_grid.items()} == {
        1: (5000.0, 0.0), 2: (4000.0, 1000.0), 3: (5000.0, 0.0)}
    assert {m.grid[0]: m.iter_total_ns for m in got.measurements} == {1: (5000.0,), 2: (4000.0,), 3: (5000.0,)}
    assert got.windows == ((5_001_000_000, 5_001_009_000),)   # the GPU spans themselves, unclipped


def test_cupti_backend_says_in_the_results_env_that_launches_overlapped(tmp_path):
    parsed = cupti.BACKEND.parse(Invocation([], capture(tmp_path)), "")
    assert parsed.env["overlap"].startswith("1 launch started before") and "1.0 us" in parsed.env["overlap"]


# --- nsys: a copy of the real export with rows moved -----------------------------------

def nsys_rows(path: Path, *rowids: int) -> list[tuple[int, int]]:
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as conn:
        rows = [conn.execute(f"SELECT start, end FROM {KERNELS} WHERE rowid = ?", (r,)).fetchone() for r in rowids]
    conn.close()
    return rows


def overlapped_export(tmp_path: Path) -> Path:
    """The export with iteration 0's layernorm_kernel (row 2) started 1 us before the encoder_kernel
    ahead of it on stream 13 ended (row 1), and its first prepare_bias_kernel (row 4) moved to
    stream 14 and started 1 us before the matmul_kernel on stream 13 (row 3) ended."""
    path = tmp_path / "profile.sqlite"
    shutil.copyfile(NSYS, path)
    (_, encoder_end), _, (_, matmul_end), _ = nsys_rows(path, 1, 2, 3, 4)
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE {KERNELS} SET start = ? WHERE rowid = 2", (encoder_end - 1000,))
        conn.execute(f"UPDATE {KERNELS} SET start = ?, streamId = 14 WHERE rowid = 4", (matmul_end - 1000,))
    conn.close()
    return path


def test_nsys_times_a_kernel_overlapping_its_predecessor_on_the_stream_from_that_ones_end(tmp_path):
    path = overlapped_export(tmp_path)
    (_, encoder_end), (_, layernorm_end), _, (bias_start, bias_end) = nsys_rows(path, 1, 2, 3, 4)
    before = {(m.kernel, m.grid): m.iter_total_ns for m in nsys.parse_sqlite(NSYS)}
    export = nsys.read_export(path)
    after = {(m.kernel, m.grid): m.iter_total_ns for m in export.measurements}
    layernorm, bias = ("layernorm_kernel", (256, 1, 1)), ("prepare_bias_kernel", (72, 1, 1))
    assert after[layernorm] == (layernorm_end - encoder_end, *before[layernorm][1:])
    # on stream 14 alone: its whole (now longer) span, though the matmul on stream 13 still ran
    bias_before = nsys_rows(NSYS, 4)[0]
    assert after[bias][0] - before[bias][0] == (bias_end - bias_start) - (bias_before[1] - bias_before[0])
    assert {k: v for k, v in after.items() if k not in (layernorm, bias)} == {
        k: v for k, v in before.items() if k not in (layernorm, bias)}
    assert [launch.overlap_ns for launch in export.launches if launch.overlap_ns] == [1000.0]


def test_nsys_backend_says_in_the_results_env_that_launches_overlapped(tmp_path):
    parsed = nsys.BACKEND.parse(Invocation([], overlapped_export(tmp_path).with_suffix(".nsys-rep")), "")
    assert parsed.env["overlap"].startswith("1 launch started before")


def test_nsys_export_without_a_stream_column_times_kernels_by_their_spans(tmp_path):
    path = overlapped_export(tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute(f"ALTER TABLE {KERNELS} DROP COLUMN streamId")
    conn.close()
    export = nsys.read_export(path)
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as conn:
        (spans,) = conn.execute(f"SELECT SUM(end - start) FROM {KERNELS}").fetchone()
    conn.close()
    assert sum(launch.duration_ns for launch in export.launches) == spans
    assert not any(launch.overlap_ns for launch in export.launches)


# --- every committed capture parses as before -------------------------------------------

def spans_only(spans):
    """The timing before the clip: every kernel its whole span."""
    return [Clipped(end - start, 0) for _, start, end in spans]


def has_finished_kernel(path: Path) -> bool:
    return any(line.startswith("kern\t") and int(line.split("\t")[3]) > 0 for line in path.read_text().splitlines())


# Every capture made before the engine used PDL; those that overlap on purpose (h100/overlap)
# are tested on their own, in test_overlap_captures.py.
OVERLAPPING = DATA / "h100" / "overlap"
CUPTI_CAPTURES = sorted(p for p in DATA.rglob("*.txt")
                        if p.read_bytes().startswith(b"sweep-cupti/") and OVERLAPPING not in p.parents)
NSYS_EXPORTS = sorted(p for p in DATA.rglob("*.sqlite") if OVERLAPPING not in p.parents)


def test_the_committed_captures_are_all_found():
    assert len(NSYS_EXPORTS) == 3 and len([p for p in CUPTI_CAPTURES if has_finished_kernel(p)]) == 32  # h100/lockstep: 2, h200/overlap: 6, h200/context_token: 14


# (capture, the module whose `clip` to undo, its reader, the reader's launches)
BEFORE_PDL = ([(p, cupti_parse, cupti.parse, "timed_launches") for p in CUPTI_CAPTURES if has_finished_kernel(p)]
              + [(p, nsys, nsys.read_export, "launches") for p in NSYS_EXPORTS])


@pytest.mark.parametrize("path, module, read, launches", BEFORE_PDL, ids=[str(c[0].relative_to(DATA)) for c in BEFORE_PDL])
def test_every_committed_capture_parses_to_the_same_times_as_without_the_clip(path, module, read, launches, monkeypatch):
    now = read(path)
    monkeypatch.setattr(module, "clip", spans_only)
    was = read(path)
    assert now.measurements == was.measurements and getattr(now, launches) == getattr(was, launches)
    assert not any(launch.overlap_ns for launch in getattr(now, launches))

