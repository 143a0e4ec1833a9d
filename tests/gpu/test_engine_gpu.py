"""The engine on a real GPU: kernels against a CPU reference, logits and greedy
tokens against transformers, and a real sweep through every profile backend."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_every_kernel_matches_its_cpu_reference(engine_build):
    p = subprocess.run([str(engine_build / "kernel_check")], capture_output=True, text=True, timeout=600)
    summary = json.loads(p.stdout[p.stdout.rfind('{"schema"'):])
    assert p.returncode == 0 and summary["failures"] == 0, p.stdout[-3000:]
    assert summary["checks"] >= 55


def test_odd_shape_logits_match_transformers_on_every_path(engine_build, odd_model):
    p = subprocess.run([str(engine_build / "gpt2_verify"), "--weights", str(odd_model.weights), "--ref",
                        str(odd_model.reference)], capture_output=True, text=True, timeout=600)
    report = json.loads(p.stdout)
    assert p.returncode == 0 and report["failures"] == 0
    assert len(report["checks"]) >= 12 and max(c["max_abs_err"] for c in report["checks"]) <= 1e-3


def small_seed_space(tmp_path: Path, backend: str) -> Path:
    space = yaml.safe_load((ROOT / "spaces" / "seed.yaml").read_text())
    space["name"] = f"gpu-{backend}"
    space["model"] = {"preset": "odd", "seed": 0}
    space["tuples"]["rows"] = [[64, 64, 5, 64, 64], [256, 256, 8, 256, 256]]
    space["run"].update({"iterations": 5, "warmup": 2})
    space["profile"] = {"backend": backend, "ncu_iterations": 2}
    path = tmp_path / f"{backend}.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    return path


BACKENDS = ["events", pytest.param("nsys", marks=pytest.mark.skipif(not (os.environ.get("NSYS") or shutil.which("nsys")),
                                                                      reason="nsys not on PATH")),
            pytest.param("ncu", marks=pytest.mark.skipif(not (os.environ.get("NCU") or shutil.which("ncu")),
                                                         reason="ncu not on PATH"))]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_real_sweep_measures_every_swept_kernel_and_confirms_the_pick(tmp_path, sweep_roots, backend):
    from sweep.pipeline import driver as pipeline

    jobs, results = sweep_roots
    s = pipeline.run(small_seed_space(tmp_path, backend),
                     pipeline.Options(executor="local", jobs_root=jobs, results_root=results))
    assert s.counts == {"ok": 2}
    kernels = {k for c in s.best.choices for k in c.kernels}
    assert {"residual_kernel", "gelu_kernel", "encoder_kernel", "layernorm_kernel", "prepare_bias_kernel"} <= kernels
    assert s.best.unmeasured == ()
    assert s.confirmation.best_total_ns > 0 and s.confirmation.default_total_ns > 0
    # the two end-to-end jobs kept their per-iteration samples: the pick against the defaults has evidence
    assert s.confirmation.vs_default is not None
    assert backend == "ncu" or s.confirmation.vs_default["verdict"] in ("faster", "slower", "tie")
    assert (results / f"gpu-{backend}" / "best" / "conf.cuh").is_file()
    # Every backend records where it measured, even when a profiler wraps the program's output.
    import pandas as pd
    rows = pd.read_csv(results / f"gpu-{backend}" / "measurements.csv")
    assert rows["gpu"].str.len().min() > 0 and rows["cuda_runtime"].notna().all(), rows[["gpu", "cuda_runtime"]]
