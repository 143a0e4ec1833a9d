"""Picking on a large sweep: select over thousands of jobs gives the picks, candidates and
evidence inputs that a plain per-job computation gives (sweep.decide.candidates groups by
row positions, not a DataFrame a job)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pandas as pd

from sweep.decide import select
from sweep.space import target

A_VALUES, B_VALUES, SAMPLES = range(1, 41), range(1, 51), 5   # 2,000 configurations


def _space(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\ntarget: {{name: t, dir: {tmp_path}, profile: [x]}}\nparameters:\n"
                    f"  A: {{tag: A, values: {list(A_VALUES)}, kernels: [k_a]}}\n"
                    f"  B: {{tag: B, values: {list(B_VALUES)}, kernels: [k_b]}}\n")
    (tmp_path / "Makefile").write_text("all:\n")
    return target.load(path)


def _measurements() -> pd.DataFrame:
    """Every (A, B) job: k_a at two launch shapes, k_b at one; some k_b rows without samples."""
    rng = np.random.default_rng(7)
    rows = []
    for a in A_VALUES:
        for b in B_VALUES:
            tag = f"A{a}_B{b}"
            for kernel, base, threads in (("k_a", 1000 + 10 * a, 32 * a), ("k_a", 500.0, 32 * a),
                                          ("k_b", 3000 - 20 * b, 8 * b)):
                samples = list(base * (1 + rng.normal(0, 0.05, SAMPLES)))
                lost = kernel == "k_b" and rng.random() < 0.05
                rows.append({"tag": tag, "role": "sweep", "status": "ok", "A": a, "B": b, "kernel": kernel,
                             "total_median_ns": float(np.median(samples)), "total_std_ns": float(np.std(samples)),
                             "iter_total_ns": None if lost else samples, "threads_per_block": threads,
                             "runs": 1, "iterations": SAMPLES, "gpu_uuid": "GPU-0", "host": "h"})
    return pd.DataFrame(rows)


def _reference(m: pd.DataFrame, macro: str, kernel: str) -> list[dict]:
    """The group's candidates computed job by job in plain Python, fastest first."""
    jobs: dict[str, dict] = {}
    for r in m[m["kernel"] == kernel].to_dict("records"):
        j = jobs.setdefault(r["tag"], {"value": r[macro], "rows": []})
        j["rows"].append(r)
    by_value: dict[int, list] = {}
    for tag in sorted(jobs):
        rows = jobs[tag]["rows"]
        if all(r["iter_total_ns"] is not None for r in rows):
            samples = [sum(xs) for xs in zip(*(r["iter_total_ns"] for r in rows))]
            ns = statistics.median(samples)
        else:
            samples, ns = None, sum(r["total_median_ns"] for r in rows)
        std = math.sqrt(sum(r["total_std_ns"] ** 2 for r in rows))
        by_value.setdefault(jobs[tag]["value"], []).append((tag, ns, std, samples, max(r["threads_per_block"]
                                                                                        for r in rows)))
    cands = []
    for value, js in sorted(by_value.items()):
        fastest = min(js, key=lambda j: j[1])
        pooled = None if any(j[3] is None for j in js) else [x for j in js for x in j[3]]
        cands.append({"value": value, "tag": fastest[0], "ns": statistics.median(j[1] for j in js),
                      "std_ns": statistics.median(j[2] for j in js), "jobs": len(js),
                      "samples": len(pooled) if pooled else 0, "threads": max(j[4] for j in js)})
    return sorted(cands, key=lambda c: (c["ns"], c["threads"]))


def test_picks_over_thousands_of_jobs_match_a_plain_per_job_computation(tmp_path):
    space, m = _space(tmp_path), _measurements()
    best = select.select(space, m)
    assert len(best.choices) == 2
    for choice in best.choices:
        (macro,) = choice.macros
        want = _reference(m, macro, {"A": "k_a", "B": "k_b"}[macro])
        got = [{"value": c.values[macro], "tag": c.tag, "ns": c.ns, "std_ns": c.std_ns, "jobs": c.jobs,
                "samples": c.samples, "threads": c.threads} for c in choice.candidates]
        assert got == want
        assert choice.values == {macro: want[0]["value"]} and choice.runner_up.values == {macro: want[1]["value"]}
    assert any(c.samples == 0 for c in best.choices[1].candidates)   # the jobs without samples were weighed too
