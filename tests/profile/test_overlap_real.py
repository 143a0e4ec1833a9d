"""Overlap mode on real captures (tests/data/<gpu>/overlap/<space>/{overlap,exclusive}/<tag>.txt,
written by bench/overlap_check.py: configurations measured concurrently in overlap mode, and
the same configurations measured alone): every GPU record of an overlap capture ran inside its
token windows, no two overlap captures' GPU work overlapped in time, and the per-launch medians
agree within 1% or the measured noise where a capture holds several launches of a shape (a
capture of one launch a shape has no noise to judge by: that comparison is the bench's, over
the jobs' pooled runs). Skips cleanly where the data is absent."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest

from sweep.profile.cupti_file import read_capture
from sweep.profile.cupti_parse import parse
from sweep.profile.cupti_tokens import cross_overlaps, outside

DATA = Path(__file__).resolve().parents[1] / "data"
SPACES = sorted(d for d in DATA.glob("*/overlap/*") if d.is_dir() and (d / "overlap").is_dir())
SAME = 0.01

pytestmark = pytest.mark.skipif(not SPACES, reason=f"no recorded overlap captures in {DATA}/*/overlap (bench/overlap_check.py)")


def _name(space: Path) -> str:
    return f"{space.parents[1].name}-{space.name}"      # e.g. h200-host-heavy


def pairs(space: Path) -> list[tuple[Path, Path]]:
    over = {p.name: p for p in (space / "overlap").glob("*.txt")}
    return [(over[p.name], p) for p in sorted((space / "exclusive").glob("*.txt")) if p.name in over]


@pytest.mark.parametrize("space", SPACES, ids=_name)
def test_per_launch_medians_under_overlap_match_exclusive_runs_within_1pct_or_the_noise(space):
    assert pairs(space), f"{space}: no configuration recorded in both modes"
    judged = 0
    for over, excl in pairs(space):
        a = {(m.kernel, m.grid, m.block): m for m in parse(over).measurements}
        b = {(m.kernel, m.grid, m.block): m for m in parse(excl).measurements}
        assert a.keys() == b.keys(), f"{over.name}: the modes launched different kernels"
        for key, m in b.items():
            if m.calls < 2 or a[key].calls < 2:     # one launch: no noise to judge a difference by
                continue
            judged += 1
            noise = max(m.std_ns, a[key].std_ns) / m.median_ns if m.median_ns else 0.0
            rel = a[key].median_ns / m.median_ns - 1
            assert abs(rel) <= max(SAME, 2 * noise), f"{over.name} {key}: {rel:+.2%} (noise {noise:.2%})"
    if not judged:
        pytest.skip(f"{space}: one launch of each shape a capture, so no noise to judge by; the pooled comparison "
                    "over the jobs' runs is bench/overlap_check.py's")


@pytest.mark.parametrize("space", SPACES, ids=_name)
def test_every_gpu_record_of_an_overlap_capture_ran_inside_its_token_windows(space):
    for over, excl in pairs(space):
        cap = read_capture(over)
        assert cap.tokens, f"{over}: no token windows: not measured in overlap mode"
        assert outside(cap) == [], f"{over}: GPU work outside the token"
        assert not read_capture(excl).tokens, f"{excl}: token windows in an exclusive capture"


@pytest.mark.parametrize("space", SPACES, ids=_name)
def test_no_two_overlap_captures_gpu_work_overlapped_in_time(space):
    caps = [read_capture(p) for p in sorted((space / "overlap").glob("*.txt"))]
    assert len(caps) >= 2, f"{space}: fewer than two overlap captures"
    for a, b in combinations(caps, 2):
        assert cross_overlaps(a, b) == [], f"{a.path.name} and {b.path.name} ran GPU work at once"
    assert any(_lifetimes_overlap(a, b) for a, b in combinations(caps, 2)), \
        f"{space}: no two captures ran at the same time, so nothing was tested"


def _lifetimes_overlap(a, b) -> bool:
    """The two processes' token windows, first to last, overlapped on the wall clock: they ran at once."""
    spans = []
    for cap in (a, b):
        wall = cap.realtime()
        spans.append((wall(min(w.acquired for w in cap.tokens)), wall(max(w.released for w in cap.tokens))))
    (a0, a1), (b0, b1) = spans
    return a0 < b1 and b0 < a1
