"""A learning sweep's GPU-seconds budget on a GPU: examples/pnpoly through the local executor,
which keeps proposals in flight (builds running ahead of the GPU). What the sweep's jobs held the
GPU for stays within the budget and one configuration's cost, and the run says that rule stopped it:
a budget of many configurations, and one smaller than the proposals in flight (the first goes alone)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sweep.pipeline import driver as pipeline
from sweep.records import gpu_time, read_result

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pnpoly"


@pytest.mark.parametrize("budget_s", [12, 2])
def test_a_learning_sweep_spends_at_most_its_gpu_seconds_budget_and_one_configuration(tmp_path, sweep_roots,
                                                                                         budget_s):
    space = yaml.safe_load((EXAMPLE / "space.yaml").read_text())
    space["name"] = f"pnpoly-budget-s-{budget_s}"    # its own sweep: the roots are shared
    space["target"]["dir"] = str(EXAMPLE)
    space["strategy"] = {"name": "learning", "budget": 100, "budget_s": budget_s}
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    jobs, results = sweep_roots
    s = pipeline.run(path, pipeline.Options(executor="local", jobs_root=jobs, results_root=results, confirm=False,
                                            report=False))
    done = [r for r in (read_result(d) for d in s.sweep_dir.iterdir() if d.is_dir()) if r is not None]
    spent = gpu_time.Spent()
    costs = [spent.of(r) or 0.0 for r in done]
    stopped = json.loads((s.sweep_dir / "sweep.json").read_text())["runs"][-1]["stopped"]
    print(f"{len(done)} configurations, {sum(costs):.1f} GPU-seconds (budget {budget_s}, the costliest "
          f"{max(costs):.2f} s); {stopped}")
    assert 0 < s.measured < 100 and len(done) == sum(s.counts.values())
    assert sum(costs) <= budget_s + max(costs), (sum(costs), sorted(costs))
    assert f"its budget of {budget_s} GPU-seconds" in stopped, stopped
