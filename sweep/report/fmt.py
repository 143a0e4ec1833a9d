"""How values are shown, the same in the tables, the plots, the markdown and the comparison:
times in ns/µs/ms, ratios, margins, macro values, long lists, and job statuses in the
order they are shown (failures first).

A leaf of the report package: the tables and the plots both import it.
"""

from __future__ import annotations

import math
from typing import Any

from sweep.records import OWN_SIZES, values_words

NOT_FAILED = ("ok", "skipped", "pending", "running", "built")   # every other status is a failure
MAX_LISTED = 12          # tags listed inline before "… and N more"


def clean_value(v: Any) -> Any:
    """A JSON-able python value from a pandas/numpy one (NaN -> None)."""
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def fmt_ns(ns: float | None) -> str:
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "—"
    if abs(ns) < 1e4:
        return f"{ns:,.0f} ns"
    if abs(ns) < 1e6:
        return f"{ns / 1e3:,.2f} µs"
    return f"{ns / 1e6:,.3f} ms"


def fmt_ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.4g} ms"


def fmt_ratio(r: float | None, suffix: str = "×") -> str:
    return "—" if r is None else f"{r:.3f}{suffix}"


def fmt_pct(r: float | None) -> str:
    return "—" if r is None else f"{100 * r:+.1f}%"


def fmt_ci(low: float | None, high: float | None, confidence: float | None) -> str:
    """A margin's interval, e.g. '95% CI +0.3% … +1.2%' (an open end shows as ∞)."""
    if confidence is None or (low is None and high is None):
        return ""
    lo = fmt_pct(low) if low is not None else "−∞"
    hi = fmt_pct(high) if high is not None else "+∞"
    pct = 100 * confidence
    level = f"{pct:.0f}" if abs(pct - round(pct)) < 0.05 else f"{pct:.2f}"
    return f"{level}% CI {lo} … {hi}"


def fmt_values(values: dict) -> str:
    """"X=8, Y=8"; a pick with no values is the program's own launch sizes (records.OWN_SIZES)."""
    return values_words(values, ", ", names=True)


def value_list(values: dict) -> list[str]:
    return [f"{k}={v}" for k, v in values.items()] or [OWN_SIZES]


def time_unit(max_ns: float) -> tuple[float, str]:
    """Scale and unit for a plot axis whose largest time is max_ns."""
    if max_ns < 1e4:
        return 1.0, "ns"
    if max_ns < 1e6:
        return 1e3, "µs"
    return 1e6, "ms"


def listed(items: list[str], limit: int = MAX_LISTED) -> str:
    return ", ".join(items[:limit]) + (f" … and {len(items) - limit} more" if len(items) > limit else "")


def by_weight(statuses: dict[str, int]) -> list[str]:
    """Statuses, failures first, then the most frequent."""
    return sorted(statuses, key=lambda k: (k in NOT_FAILED, -statuses[k], k))


def main_status(statuses: dict[str, int]) -> str:
    return by_weight(statuses)[0]
