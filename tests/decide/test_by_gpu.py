"""A sweep measured on several GPU models (slurm.partitions): its jobs grouped per model (no cluster needed).

The real sweep over two partitions is pinned in tests/slurm/test_sweep_gpu_models.py."""

from __future__ import annotations

import pandas as pd
import pytest

from sweep.decide import by_gpu
from sweep.pipeline import driver as pipeline
from sweep.space import target
from sweep.core.errors import SweepError


@pytest.mark.parametrize("tag, partition, expected", [
    ("A128_B32", "h100", "A128_B32__h100"),
    ("A128_B32", "gpu-a100.long", "A128_B32__gpu_a100_long"),   # a tag is letters, digits and '_'
])
def test_a_configuration_gets_one_job_folder_per_partition(tag, partition, expected):
    assert by_gpu.partition_tag(tag, partition) == expected


def test_gpu_model_names_become_name_parts():
    assert by_gpu.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert by_gpu.slug("NVIDIA A100-SXM4-40GB") == "nvidia-a100-sxm4-40gb"


CONFIGS = pd.DataFrame([
    {"tag": "A64__h100", "status": "ok", "gpu": "NVIDIA H100 80GB HBM3"},
    {"tag": "A128__h100", "status": "ok", "gpu": "NVIDIA H100 80GB HBM3"},
    {"tag": "A96__h100", "status": "compile_failed", "gpu": ""},          # failed before naming its GPU
    {"tag": "A64__a100", "status": "ok", "gpu": "NVIDIA A100-SXM4-40GB"},
    {"tag": "A128__a100", "status": "pending"},                             # no result yet
])


def test_jobs_are_grouped_by_the_gpu_model_they_ran_on_or_their_partitions():
    assert by_gpu.models(CONFIGS) == ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"]
    assert list(by_gpu.model_of_rows(CONFIGS)) == ["NVIDIA H100 80GB HBM3"] * 3 + ["NVIDIA A100-SXM4-40GB"] * 2


def test_a_sweep_on_one_gpu_model_is_not_split():
    assert by_gpu.models(CONFIGS[CONFIGS["tag"].str.endswith("h100")]) == ["NVIDIA H100 80GB HBM3"]
    assert by_gpu.models(pd.DataFrame([{"tag": "A64", "status": "ok", "gpu": "toy"}])) == ["toy"]


@pytest.mark.parametrize("executor, strategy, match", [
    ("local", "grid", r"slurm.partitions measures every configuration on each of a100, h100: run it with --executor slurm"),
    ("slurm", "optuna", r"strategy optuna learns from one objective, but slurm.partitions measures on 2 GPU models"),
])
def test_partitions_are_refused_where_they_cannot_work(write_space, tmp_path, executor, strategy, match):
    space = target.load(write_space(strategy=strategy, slurm={"partitions": ["a100", "h100"]}))
    with pytest.raises(SweepError, match=match):
        pipeline.preflight(space, pipeline.Options(executor=executor, jobs_root=tmp_path / "jobs"))
