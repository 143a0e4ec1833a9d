"""CUPTI captures placed on the wall clock: the library's `clock` pairs (sweep-cupti/2) map
CUPTI's timestamps onto CLOCK_REALTIME, so each timed iteration's window can be set against
the sweep's clock readings (sweep.node.sampling). The files are the real H100 capture
gemm_nvtx.txt (sweep-cupti/1, made before the pairs; tests/data/h100/cupti/README.md)
edited in tmp_path into the format the library writes now, so each test states the pairs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.profile import Invocation, cupti
from sweep.profile.cupti_file import FORMAT, read_capture

DATA = Path(__file__).resolve().parents[1] / "data" / "h100" / "cupti"
NVTX = DATA / "gemm_nvtx.txt"
OFFSET = 3_000_000_017          # wall clock minus CUPTI's clock in the edited captures (ns)
FIRST_TIMED, PER_ITERATION = 15, 3   # launches 15-74 are the 20 timed iterations, 3 launches each


def kernel_times(path: Path) -> dict[int, tuple[int, int]]:
    """Each kern record's (start, end) by correlation id, read straight from the file."""
    rows = (line.split("\t") for line in path.read_text().splitlines())
    return {int(f[1]): (int(f[2]), int(f[3])) for f in rows if f[0] == "kern"}


def gpu_spans(path: Path) -> list[tuple[int, int]]:
    """Per timed iteration, its first launch's start to its last launch's end, in CUPTI's clock."""
    times = kernel_times(path)
    spans = []
    for i in range(20):
        mine = [times[c] for c in range(FIRST_TIMED + PER_ITERATION * i, FIRST_TIMED + PER_ITERATION * (i + 1))]
        spans.append((min(s for s, _ in mine), max(e for _, e in mine)))
    return spans


def with_clock_pairs(tmp_path: Path, start: tuple[int, int], flush: tuple[int, int] | None = None) -> Path:
    """gemm_nvtx.txt as the library writes it now: a sweep-cupti/2 header, the `start` pair
    (cupti_ns, realtime_ns) right after it and the `flush` pair before the `end` line."""
    lines = NVTX.read_text().splitlines(keepends=True)
    header = lines[0].replace("sweep-cupti/1", FORMAT, 1)
    body = lines[1:-1]
    end = lines[-1]
    assert end.startswith("end\t")
    pair = "clock\t{}\t{}\n".format
    out = [header, pair(*start), *body, *([pair(*flush)] if flush else []), end]
    path = tmp_path / "gemm_nvtx_clock.txt"
    path.write_text("".join(out))
    return path


def start_ns() -> int:
    return int(read_capture(NVTX).header["start_ns"])


def test_one_clock_pair_places_each_iteration_on_the_wall_clock_by_its_offset(tmp_path):
    path = with_clock_pairs(tmp_path, (start_ns(), start_ns() + OFFSET))
    got = cupti.parse(path)
    assert got.iterations == 20
    assert got.windows == tuple((s + OFFSET, e + OFFSET) for s, e in gpu_spans(NVTX))


def test_a_second_pair_at_the_final_flush_follows_drift_between_the_clocks(tmp_path):
    a = start_ns()
    b = max(e for _, e in kernel_times(NVTX).values()) + 1_000_000
    drift = 50_000                                            # the wall clock ran 50 us ahead over the run
    path = with_clock_pairs(tmp_path, (a, a + OFFSET), (b, b + OFFSET + drift))
    rate = (b - a + drift) / (b - a)
    want = [(a + OFFSET + round((s - a) * rate), a + OFFSET + round((e - a) * rate)) for s, e in gpu_spans(NVTX)]
    got = cupti.parse(path).windows
    assert len(got) == 20
    assert all(abs(g - w) <= 1 for gw, ww in zip(got, want) for g, w in zip(gw, ww))
    assert got[-1][1] - gpu_spans(NVTX)[-1][1] > OFFSET       # the late iterations moved by more than the offset


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.txt")))
def test_real_captures_from_before_the_clock_pairs_still_parse_with_no_windows(name):
    got = cupti.parse(DATA / name)
    assert read_capture(DATA / name).clock_pairs == () and got.windows is None
    assert sum(launch.duration_ns for launch in got.timed_launches) == pytest.approx(
        sum(sum(m.iter_total_ns) for m in got.measurements))


def test_the_backend_hands_the_sampler_windows_and_the_launches_to_drop_iterations_from(tmp_path):
    path = with_clock_pairs(tmp_path, (start_ns(), start_ns() + OFFSET))
    parsed = cupti.BACKEND.parse(Invocation([], path), "")
    assert len(parsed.windows) == 20 and len(parsed.timed_launches) == 60
    fewer = parsed.without({0, 7})
    kept = [i for i in range(20) if i not in (0, 7)]
    assert fewer.windows == tuple(parsed.windows[i] for i in kept)
    for before, after in zip(parsed.measurements, fewer.measurements):
        assert after.iter_total_ns == tuple(before.iter_total_ns[i] for i in kept)
        assert after.calls == 1 and after.instances == 18
    old = cupti.BACKEND.parse(Invocation([], NVTX), "")
    assert old.windows is None and old.measurements == parsed.measurements
