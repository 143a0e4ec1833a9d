"""Real H100 captures of the engine's decoding steps (tests/data/h100/overlap, README there):
under programmatic dependent launch a kernel's GPU span overlaps the one before it on the
stream, and the backends time each kernel from that one's end, so an iteration's kernel
times add up to its GPU time instead of half as much again."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.profile import Invocation, cupti, nsys
from sweep.profile.overlap import NOTICEABLE_NS

DATA = Path(__file__).resolve().parents[1] / "data" / "h100" / "overlap"
LAUNCHES = 256      # a timed iteration: four decoding steps of 64 launches


def cupti_parsed(name: str):
    return cupti.BACKEND.parse(Invocation(["gpt2_generate"], DATA / name), "")


def per_iteration(launches, windows):
    """(GPU time of the iteration, its kernels' clipped sum, their spans' sum), per timed iteration."""
    out = []
    for i, (start, end) in enumerate(windows):
        mine = [x for x in launches if x.iteration == i]
        assert len(mine) == LAUNCHES
        out.append((end - start, sum(x.duration_ns for x in mine), sum(x.duration_ns + x.overlap_ns for x in mine)))
    return out


@pytest.mark.parametrize("launches_and_windows", [
    lambda: (lambda p: (p.timed_launches, p.windows))(cupti_parsed("cupti_generate_pdl.txt")),
    lambda: (lambda e: (e.launches, e.windows))(nsys.read_export(DATA / "nsys_generate_pdl.sqlite")),
], ids=["cupti", "nsys"])
def test_overlapped_kernels_add_up_to_the_iterations_gpu_time_where_their_spans_count_it_half_again(launches_and_windows):
    launches, windows = launches_and_windows()
    rows = per_iteration(launches, windows)
    assert len(rows) == 2
    for gpu, clipped, spans in rows:
        assert 0.97 * gpu <= clipped <= gpu     # what the stream was busy with, less the graph's short gaps
        assert spans > 1.3 * gpu                # the spans double-count the overlap


def test_a_pdl_capture_names_its_overlap_and_an_ordinary_one_does_not():
    pdl, plain = cupti_parsed("cupti_generate_pdl.txt"), cupti_parsed("cupti_generate_no_overlap.txt")
    early = [x.overlap_ns for x in pdl.timed_launches if x.overlap_ns > 0]
    assert len(early) >= 0.9 * len(pdl.timed_launches) and min(early) > 1000
    assert pdl.env["overlap"].startswith(f"{len(early)} launches started before the kernel ahead")
    slivers = [x.overlap_ns for x in plain.timed_launches if x.overlap_ns > 0]
    assert slivers and max(slivers) < 100 < NOTICEABLE_NS     # timestamp granularity, not early starts
    assert "overlap" not in plain.env


def test_without_overlap_the_clip_leaves_the_spans_as_they_were():
    plain = cupti_parsed("cupti_generate_no_overlap.txt")
    for gpu, clipped, spans in per_iteration(plain.timed_launches, plain.windows):
        assert spans - clipped < 1000 and clipped <= gpu
