"""Workloads on a GPU: examples/tiled_gemm (a bring-your-own program) swept with the cupti backend
over two workloads of different problem sizes (--sizes 256 and --sizes 1024): every configuration
built once and measured on both, every row named after its workload, each workload's own pick and
the overall pick by the weighted objective (1 x small + 2 x large) in best.json and the report."""

from __future__ import annotations

import json

import pandas as pd

from test_byop_gpu import ROWS, example_space, run

MACROS = ("GEMM_BM", "GEMM_BN", "GEMM_BK", "GEMM_TM", "GEMM_TN")
WORKLOADS = [{"name": "small", "weight": 1, "args": ["--sizes", "256"]},
             {"name": "large", "weight": 2, "args": ["--sizes", "1024"]}]


def test_a_cupti_sweep_over_two_workloads_measures_each_and_picks_per_workload_and_overall(tmp_path, sweep_roots):
    space = example_space(tmp_path, "byop-workloads", rows=ROWS[:3], workloads=WORKLOADS)
    s = run(space, sweep_roots, certify=False)       # confirmed end to end; no race (its ties pick by rule)
    assert s.counts == {"ok": 3}

    m = pd.read_csv(s.results_dir / "measurements.csv")
    sweep = m[(m["role"] == "sweep") & (m["status"] == "ok")]
    assert set(sweep["backend"]) == {"cupti"} and set(sweep["kernel"]) == {"gemm_tiled_kernel"}
    assert set(m["workload"]) == {"small", "large"}                            # baseline and best rows too
    for (tag, workload), rows in sweep.groupby(["tag", "workload"]):
        assert len(rows) == 1 and set(rows["iterations"]) == {10}, (tag, workload)   # one problem size each
    per = sweep.pivot_table(index="tag", columns="workload", values="total_median_ns", aggfunc="sum")
    assert (per["small"] < per["large"]).all()                                 # 256^3 is less work than 1024^3
    for tag in per.index:
        for w in ("small", "large"):
            assert (s.sweep_dir / tag / "workloads" / w / "profile_cupti.txt").is_file()

    values = {t: {k: int(sweep.loc[sweep["tag"] == t, k].iloc[0]) for k in MACROS} for t in per.index}
    best = json.loads((s.results_dir / "best.json").read_text())
    assert best["schema"] == "sweep-best/4" and [w["name"] for w in best["workloads"]] == ["small", "large"]
    (choice,) = best["choices"]
    objective = per["small"] + 2 * per["large"]
    assert choice["values"] == values[objective.idxmin()] == s.best.config
    own = {w["workload"]: w for w in choice["workloads"]}
    assert set(own) == {"small", "large"}
    for w in ("small", "large"):
        assert own[w]["values"] == values[per[w].idxmin()]
        assert own[w]["regret"] >= 0 and own[w]["overall_ns"] >= own[w]["ns"]
    configs = pd.read_csv(s.results_dir / "configs.csv")
    assert set(configs.loc[configs["status"] == "ok", "capture"]) == {"whole run"}
    assert 'class="workloads"' in (s.results_dir / "report.html").read_text()
