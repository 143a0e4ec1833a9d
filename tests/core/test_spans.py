"""sweep.core.spans: the time intervals cover, overlaps counted once."""

from __future__ import annotations

from sweep.core.spans import covered


def test_overlapping_spans_count_once_and_clipping_keeps_only_the_window():
    spans = [(0.0, 4.0), (2.0, 6.0), (8.0, 9.0), (5.0, 5.0)]
    assert covered(spans) == 7.0
    assert covered(spans, lo=3.0, hi=8.5) == 3.5       # 3-6 and 8-8.5
    assert covered([(10, 20)], lo=30, hi=40) == 0
