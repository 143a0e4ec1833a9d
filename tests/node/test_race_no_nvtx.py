"""A race round's sample for a program without NVTX iteration ranges (no GPU): the sum of the
governed kernels' launches in that run, not the run's own time. Recorded: tests/data/h100/cupti/
gemm_shapes.txt, tiled_gemm run without --nvtx (74 launches: 8 check, 6 warm-up, 60 timed; the
check also launches gemm_reference_kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.node import race
from sweep.profile import Invocation, cupti
from sweep.profile.cupti_file import read_capture
from sweep.stats import Entrant

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "h100" / "cupti" / "gemm_shapes.txt"


def launches_ns(kernel: str) -> list[int]:
    return [k.end - k.start for k in read_capture(CAPTURE).kernels if k.kernel == kernel]


def test_a_round_without_nvtx_ranges_samples_the_governed_kernels_launches_of_the_run_not_its_time():
    parsed = cupti.BACKEND.parse(Invocation([], CAPTURE), "")
    assert parsed.env["iterations"] == 1                            # no NVTX ranges: the run is one iteration
    tiled, reference = launches_ns("gemm_tiled_kernel"), launches_ns("gemm_reference_kernel")
    assert len(tiled) == 70 and len(reference) == 4                 # every launch of the run counts, checks too
    want = float(sum(tiled))
    assert race.group_ns(parsed.measurements, ["gemm_tiled_kernel"]) == pytest.approx(want)
    kernels = read_capture(CAPTURE).kernels
    span = max(k.end for k in kernels) - min(k.start for k in kernels)
    assert want < span                                              # not the run's (nor its GPU span's) time

    a, b = Entrant("A", 256, True), Entrant("B", 128)
    plan = race.RacePlan((race.Lane(("BM",), ("gemm_tiled_kernel",), (a, b), {"A": {"BM": 64}, "B": {"BM": 128}}),),
                         {"A": "/a", "B": "/b"}, {}, 1e9, 9)
    t = iter(range(1000))
    raced = race.race(plan, race.each_run(lambda tag: parsed.measurements), clock=lambda: next(t))
    assert raced.results[("BM",)].medians == {"A": pytest.approx(want), "B": pytest.approx(want)}
