"""bench/kt_cache.py: a sweep's results folder as a Kernel Tuner cache file, on a real excerpt
of a brute force (tests/data/h200/stencil_large_excerpt: three kernels timed, one swept)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd

from bench import kt_cache

EXCERPT = Path(__file__).resolve().parents[1] / "data" / "h200" / "stencil_large_excerpt"


def test_only_the_kernels_the_space_sweeps_count_in_a_configurations_time():
    cache = kt_cache.cache_of(EXCERPT)["cache"]
    m = pd.read_csv(EXCERPT / "measurements.csv")
    assert set(m["kernel"]) == {"jacobi_kernel", "residual_partial_kernel", "residual_sum_kernel"}
    jacobi = m[m["kernel"] == "jacobi_kernel"].set_index("tag")["total_median_ns"] / 1e6
    assert cache["64,1,1,4,0"]["time"] == jacobi["B64x1_T1x4_S0"]
    assert {k: e["time"] for k, e in cache.items()} == {
        "64,1,1,4,0": jacobi["B64x1_T1x4_S0"], "32,1,1,1,0": jacobi["B32x1_T1x1_S0"],
        "128,1,2,8,1": jacobi["B128x1_T2x8_S1"]}


def test_configurations_the_constraints_skipped_are_left_out_as_kernel_tuner_leaves_them():
    configs = pd.read_csv(EXCERPT / "configs.csv")
    assert (configs["status"] == "skipped").sum() == 2
    assert len(kt_cache.cache_of(EXCERPT)["cache"]) == 3


def test_a_flag_declared_without_values_is_0_and_1_in_the_caches_tune_params():
    data = kt_cache.cache_of(EXCERPT)
    assert data["tune_params"]["STENCIL_USE_SHARED"] == [0, 1]
    assert data["tune_params"]["STENCIL_BLOCK_X"] == [16, 32, 64, 128, 256]


def test_the_written_file_reads_back_as_the_cache_it_printed(tmp_path, capsys):
    out = tmp_path / "c.json.gz"
    assert kt_cache.main([str(EXCERPT), str(out)]) == 0
    assert json.loads(gzip.open(out).read())["cache"] == kt_cache.cache_of(EXCERPT)["cache"]
    assert "3 configurations (3 measured), optimum 0.3005 ms on NVIDIA H200" in capsys.readouterr().out
