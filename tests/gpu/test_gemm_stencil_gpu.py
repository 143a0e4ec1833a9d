"""examples/gemm_stencil on a GPU: the program checks both stages and times them (each kernel its
own entry in the events JSON), and a sweep with `auto` learns a model per parameter group: each
build carries a new point of both groups, each group is told its own kernel's time, and each
kernel's pick is its fastest measured."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd

from sweep.pipeline import driver as pipeline
from tests.examples.conf_build import built
from tests.conftest import needs_nvcc
from tests.gpu.conftest import example_space

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gemm_stencil"
pytestmark = needs_nvcc
GEMM = ("GEMM_BM", "GEMM_BN", "GEMM_BK", "GEMM_TM", "GEMM_TN")
JACOBI = ("STENCIL_BLOCK_X", "STENCIL_BLOCK_Y", "STENCIL_TILE_X", "STENCIL_TILE_Y", "STENCIL_USE_SHARED")


def test_the_program_checks_both_stages_then_times_each_kernel_apart(tmp_path):
    events = tmp_path / "events.json"
    p = subprocess.run([str(built(EXAMPLE, tmp_path) / "gemm_stencil"), "--gemm-sizes", "256,512", "--grid", "1026",
                        "--sweeps", "3", "--iters", "4", "--nvtx", "--json", str(events)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "check: ok (3 GEMM shapes, 2 grids)" in p.stdout
    calls = {(k["kernel"], tuple(k["grid"])): k for k in json.loads(events.read_text())["kernels"]}
    assert sorted(k for k, _ in calls) == ["gemm_tiled_kernel", "gemm_tiled_kernel", "jacobi_kernel",
                                           "residual_partial_kernel", "residual_sum_kernel"]
    assert all(len(k["iter_total_ns"]) == 4 and min(k["iter_total_ns"]) > 0 for k in calls.values())


def test_auto_sweeps_each_group_with_a_model_of_its_own_and_picks_each_kernels_fastest(tmp_path, sweep_roots, capsys):
    path = example_space(EXAMPLE, tmp_path, name="gemm-stencil-gpu", strategy={"name": "auto", "budget": 10})
    jobs, results = sweep_roots
    s = pipeline.run(path, pipeline.Options(executor="local", jobs_root=jobs, results_root=results, confirm=False))
    assert "a model per parameter group (2: 1,552 x 634 legal)" in "".join(capsys.readouterr())
    assert sum(s.counts.values()) == 10 and s.counts.get("ok", 0) >= 8, s.counts
    m = pd.read_csv(s.results_dir / "measurements.csv")
    m = m[(m["role"] == "sweep") & (m["status"] == "ok")]
    per_tag = m.groupby(["tag", "kernel"])["total_median_ns"].sum().unstack()
    configs = m.drop_duplicates("tag").set_index("tag")
    assert len({tuple(configs.loc[t, list(GEMM)]) for t in per_tag.index}) == len(per_tag)     # new each build
    assert len({tuple(configs.loc[t, list(JACOBI)]) for t in per_tag.index}) == len(per_tag)
    best = {tuple(c["kernels"]): c["values"] for c in json.loads((s.results_dir / "best.json").read_text())["choices"]}
    for kernel, macros in (("gemm_tiled_kernel", GEMM), ("jacobi_kernel", JACOBI)):
        fastest = per_tag[kernel].idxmin()
        (values,) = [v for k, v in best.items() if kernel in k]
        assert {n: values[n] for n in macros} == {n: int(configs.loc[fastest, n]) for n in macros}
