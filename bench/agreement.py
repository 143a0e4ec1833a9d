"""Two sweeps of the same configurations, measured two ways (exclusive and overlap mode, two
context-creation settings, ...): do their per-launch medians and picks agree?

    medians(results)       a sweep's per-launch medians and noise, by configuration x kernel x launch
                           shape (its results folder's measurements.csv: ok sweep jobs only)
    picks(results)         its combined pick (best.json's config), {} when it picked nothing
    agreement(a, b, names) both side by side: how many launch shapes agree within the larger of
                           1% and the two runs' measured noise, the median and largest difference,
                           and whether the picks are the same; with the joined table for printing

Used by bench/overlap_check.py and bench/scaling.py (--variant)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

SAME = 0.01                 # medians within 1% (or within the measured noise)


def medians(results: Path) -> pd.DataFrame:
    m = pd.read_csv(results / "measurements.csv")
    m = m[(m["status"] == "ok") & (m["role"] == "sweep")]
    key = [c for c in m.columns if c.isupper()] + ["kernel", "grid", "block"]
    return m[key + ["median_ns", "noise"]].set_index(key)


def picks(results: Path) -> dict[str, Any]:
    """The combined pick (best.json's config: every macro), {} when the sweep picked nothing."""
    try:
        return json.loads((results / "best.json").read_text()).get("config", {})
    except OSError:
        return {}


def agreement(a: Path, b: Path, names: tuple[str, str] = ("a", "b")) -> tuple[dict[str, Any], pd.DataFrame]:
    """Sweep results folders `a` and `b` side by side (module docstring). The table's columns carry
    `names` as suffixes (median_ns_<name>, noise_<name>), with rel = a / b - 1, allowed and same."""
    x, y = names
    j = medians(a).merge(medians(b), left_index=True, right_index=True, suffixes=(f"_{x}", f"_{y}"), how="inner")
    j["rel"] = j[f"median_ns_{x}"] / j[f"median_ns_{y}"] - 1
    j["allowed"] = j[[f"noise_{x}", f"noise_{y}"]].fillna(0).max(axis=1).clip(lower=SAME)
    j["same"] = j["rel"].abs() <= j["allowed"]
    pa, pb = picks(a), picks(b)
    summary = {"pairs": len(j), "same": int(j["same"].sum()),
               "rel_median": float(j["rel"].median()) if len(j) else None,
               "rel_max_abs": float(j["rel"].abs().max()) if len(j) else None,
               "picks": {x: pa, y: pb, "same": pa == pb}}
    return summary, j
