"""The report's view of a space's workloads (sweep.decide.objective): per group, each workload's own pick
next to the overall pick, and what the overall pick costs on each workload (its regret).

    declared(sw)            the workloads the sweep ran (best.json's, else the space's)
    describe(w), run_of(w)  one workload as a short line: weight, program and sizes
    workload_rows(ch, ws)   a group's per-workload table: own pick, its time and evidence, the
                            overall pick's time there and its regret
    worst_workload(ch)      the largest regret over the workloads, for the best table

A sweep without workloads has none of this: every function returns nothing for it.
"""

from __future__ import annotations

from typing import Any

from sweep.records.evidence import verdict_words
from sweep.report.fmt import fmt_ns, fmt_pct, fmt_values
from sweep.report.loading import SweepData



def declared(sw: SweepData) -> list[dict[str, Any]]:
    """The sweep's workloads as dicts (name, weight, program, batch, seq_len, ...); [] without them."""
    ws = list((sw.best or {}).get("workloads") or [])
    if not ws and sw.space is not None:
        ws = [w.to_dict() for w in sw.space.workloads]
    return ws


def run_of(w: dict[str, Any]) -> str:
    """What a workload runs, e.g. 'program generate, batch 1 x seq_len 64'."""
    program = f"program {w['program']}, " if w.get("program") else ""
    return f"{program}batch {w.get('batch')} x seq_len {w.get('seq_len')}"


def describe(w: dict[str, Any]) -> str:
    """e.g. 'decode: weight 5, program generate, batch 1 x seq_len 64'."""
    return f"{w['name']}: weight {w.get('weight', 1):g}, {run_of(w)}"


def workload_rows(ch: dict, workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per declared workload of a group: its own pick and the overall pick's regret there
    (a workload that never launches the group's kernels says so: its weight counts for nothing here)."""
    picks = {p["workload"]: p for p in ch.get("workloads") or []}
    if not picks:
        return []
    rows = []
    for w in workloads or [{"name": n, "weight": p["weight"]} for n, p in picks.items()]:
        p = picks.get(w["name"])
        base = {"workload": w["name"], "weight": f"{w.get('weight', 1):g}", "run": run_of(w) if "batch" in w else "—"}
        if p is None:
            rows.append({**base, "pick": "—", "ns": "—", "evidence": "its kernels do not run here", "overall_ns": "—",
                         "regret": "—", "is_overall": False})
            continue
        ru = f"runner-up {fmt_values(p['runner_up'])} {fmt_pct(p.get('margin'))}, " if p.get("runner_up") else ""
        rows.append({**base, "pick": fmt_values(p["values"]), "ns": fmt_ns(p["ns"]),
                     "evidence": ru + verdict_words(p.get("verdict"), p.get("noise_source")),
                     "overall_ns": fmt_ns(p.get("overall_ns")), "regret": fmt_pct(p.get("regret")),
                     "is_overall": p["values"] == ch["values"]})
    return rows


def worst_workload(ch: dict) -> str:
    """'worst workload: +3.1% on decode', or 'best on all 3 workloads' ('' without workloads)."""
    picks = [p for p in ch.get("workloads") or [] if p.get("regret") is not None]
    if not picks:
        return ""
    w = max(picks, key=lambda p: p["regret"])
    return f"worst workload: {fmt_pct(w['regret'])} on {w['workload']}" if w["regret"] > 0 else \
        f"best on all {len(picks)} workloads"
