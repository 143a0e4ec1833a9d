"""examples/xgemm on a GPU: the program checks and times its kernel, a learning sweep of its
space measures what it proposes through the tool (cupti) and picks the fastest measured, and the
brute-force harness is tested in tests/gpu/test_brute_force_gpu.py."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pandas as pd
import yaml

from sweep.pipeline import driver as pipeline
from tests.examples.conf_build import built
from tests.conftest import needs_nvcc
from tests.gpu.conftest import example_space

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "xgemm"
pytestmark = needs_nvcc


def test_the_program_checks_its_kernel_then_times_it_and_writes_the_events_json(tmp_path):
    events = tmp_path / "events.json"
    p = subprocess.run([str(built(EXAMPLE, tmp_path) / "xgemm"), "--size", "1024", "--iters", "5", "--json", str(events)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "check: ok" in p.stdout and "M=N=K=1024: median" in p.stdout
    timing = json.loads(events.read_text())
    (kernel,) = timing["kernels"]
    assert kernel["kernel"] == "xgemm_kernel" and kernel["grid"] == [16, 16, 1] and kernel["block"] == [256, 1, 1]
    assert len(kernel["iter_total_ns"]) == 5 and all(t > 0 for t in kernel["iter_total_ns"])


def test_a_learning_sweep_of_the_space_measures_its_proposals_and_picks_the_fastest(tmp_path, sweep_roots):
    path = example_space(EXAMPLE, tmp_path, name="xgemm-learning-gpu", strategy={"name": "learning", "budget": 12})
    space = yaml.safe_load(path.read_text())
    jobs, results = sweep_roots
    s = pipeline.run(path, pipeline.Options(executor="local", jobs_root=jobs, results_root=results, confirm=False))
    assert s.counts == {"ok": 12}
    m = pd.read_csv(s.results_dir / "measurements.csv")
    m = m[(m["role"] == "sweep") & (m["status"] == "ok") & (m["kernel"] == "xgemm_kernel")]
    fastest = m.loc[m["total_median_ns"].idxmin()]
    assert s.best.config == {k: int(fastest[k]) for k in space["parameters"]}
    cache = json.loads(gzip.open(ROOT / "bench" / "data" / "xgemm_H200.json.gz").read())
    gpus = set(pd.read_csv(s.results_dir / "configs.csv")["gpu"].dropna())
    if gpus == {cache["device_name"]}:     # the brute force's GPU: the two measurements agree
        keys = cache["tune_params_keys"]
        ratios = [row.total_median_ns / 1e6 / cache["cache"][",".join(str(int(getattr(row, k))) for k in keys)]["time"]
                  for row in m.itertuples()]
        assert 0.8 < sorted(ratios)[len(ratios) // 2] < 1.25, ratios
