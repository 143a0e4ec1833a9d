"""bench/strategies.py's table: each strategy's runs (traces of distinct evaluations) summarized
per space and budget, and printed.

    best_at(trace, optimum, b)    best found in the first b evaluations / optimum (inf: none found)
    evals_to(trace, optimum, t)   evaluations until within t of the optimum (inf: never)
    summarize(runs, budgets, ..)  one row per space x strategy: quartiles per budget (over the runs
                                  that went at least that far; with each_budget, the runs told that
                                  budget), evaluations to within 1% and 5%, CPU per suggestion,
                                  short and restarted runs
    fmt_table(rows, budgets)      the rows as printed
    failure_lines(failed)         the runs whose strategy raised, as printed below the table
"""

from __future__ import annotations

import math

import numpy as np


def best_at(trace, optimum, b):
    vals = [t for t in trace[:b] if t is not None]
    return min(vals) / optimum if vals else math.inf


def evals_to(trace, optimum, tol):
    for i, t in enumerate(trace):
        if t is not None and t <= optimum * (1 + tol):
            return i + 1
    return math.inf


def summarize(runs, budgets, each_budget=False):
    """each_budget: every budget's column from the runs told that budget ("limit"), the rest of the
    row from the largest budget's; else every column from the same runs' first evaluations."""
    rows = []
    groups = {}
    for r in runs:
        groups.setdefault((r["space"], r["strategy"]), []).append(r)
    for (space, strategy), every in sorted(groups.items()):
        rs = [r for r in every if r.get("limit", max(budgets)) == max(budgets)] if each_budget else every
        if not rs:
            continue
        row = {"space": space, "strategy": strategy, "seeds": len(rs)}
        for b in budgets:   # only runs that went at least b evaluations
            told = [r for r in every if r.get("limit", max(budgets)) == b] if each_budget else rs
            v = np.array([best_at(r["trace"], r["optimum"], b) for r in told if len(r["trace"]) >= b])
            q = np.percentile(v, [25, 50, 75]) if len(v) else [math.nan] * 3
            row[f"best@{b}"] = [float(x) for x in q]
        row["horizon"] = min(len(r["trace"]) for r in rs)
        for tol in (0.01, 0.05):
            e = np.array([evals_to(r["trace"][: row["horizon"]], r["optimum"], tol) for r in rs], dtype=float)
            row[f"evals_to_{int(tol * 100)}pct"] = float(np.median(e))
        row["cpu_per_suggestion_s"] = float(np.median([r["cpu_per_suggestion"] for r in rs]))
        row["short_runs"] = sum(len(r["trace"]) < max(budgets) for r in rs)
        row["restarted_runs"] = sum(r.get("starts", 1) > 1 for r in rs)
        rows.append(row)
    return rows


def fmt_table(rows, budgets):
    head = f"{'space':8} {'strategy':22} {'n':>3}" + "".join(f" {'best@' + str(b) + ' med [q1,q3]':>24}" for b in budgets) \
        + f" {'to1%':>6} {'to5%':>6} {'cpu/sugg':>9}"
    lines = [head, "-" * len(head)]
    last = None
    for r in rows:
        if last is not None and r["space"] != last:
            lines.append("")
        last = r["space"]
        s = f"{r['space']:8} {r['strategy']:22} {r['seeds']:3d}"
        for b in budgets:
            q1, m, q3 = r[f"best@{b}"]
            s += f" {'-':>24}" if math.isnan(m) else f" {m:8.3f} [{q1:6.3f},{q3:6.3f}]"
        for tol in ("1", "5"):
            e = r[f"evals_to_{tol}pct"]
            s += f" {('>' + str(r['horizon'])) if math.isinf(e) else str(int(round(e))):>6}"
        s += f" {r['cpu_per_suggestion_s']:9.4f}"
        lines.append(s)
    return "\n".join(lines)


def failure_lines(failed: list[dict]) -> list[str]:
    """The failed runs, one line per space, strategy and failure, left out of the table."""
    groups: dict[tuple, list[dict]] = {}
    for r in failed:
        groups.setdefault((r["space"], r["strategy"], r["error"]), []).append(r)
    lines = ["", "runs whose strategy failed (left out of the table):"] if groups else []
    for (space, strategy, error), rs in sorted(groups.items()):
        seeds = ", ".join(map(str, sorted({r["seed"] for r in rs})))
        limits = sorted({r["limit"] for r in rs if "limit" in r})   # --each-budget: a run per seed and budget
        told = f" (told {', '.join(map(str, limits))} evaluations)" if len(limits) > 1 else ""
        lines.append(f"  {space} {strategy}: {len(rs)} run(s), seeds {seeds}{told}: {error}")
    return lines
