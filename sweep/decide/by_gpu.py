"""A sweep measured on several GPU models (slurm.partitions): results and picks per model.

Every configuration is measured once on each partition: its job folder per partition
is the configuration's tag with the partition appended (`A128_B32__h100`). After
collecting, the jobs are grouped by the GPU model they ran on (result.json's env.gpu;
a job that failed before naming one counts for its partition's model), and when
there are several, each model gets what a one-GPU sweep writes, in a results folder
of its own:

    results/<sweep>.<model>/   configs, measurements, best.json, best/conf.cuh, report
    results/<sweep>/best/<model>/conf.cuh      one conf.cuh per GPU model
    results/<sweep>/best_by_gpu.json           model -> its results folder and picks

so `compare <sweep>.<model-a> <sweep>.<model-b>` sets the models side by side. The
picks are made by sweep.decide.select on each model's measurements alone, unchanged, and
sweep.pipeline.finish certifies and confirms them on that model's own partition (its race,
baseline and combined best are jobs of that partition: `default__h100`, `best__h100`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from sweep.core import atomic
from sweep.decide import collect as collect_mod
from sweep.records import Best
from sweep.space import Space

SEPARATOR = "__"   # between a configuration's tag and its partition


def partition_tag(tag: str, partition: str) -> str:
    """The job folder's tag of `tag` measured on `partition` (tags are letters, digits and '_')."""
    return f"{tag}{SEPARATOR}{re.sub(r'[^A-Za-z0-9]+', '_', partition).strip('_') or 'p'}"


def slug(model: str) -> str:
    """A GPU model as a name part: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") or "unknown"


def model_of_rows(configs: pd.DataFrame) -> pd.Series:
    """Each job's GPU model: the one it ran on, else the one its partition's other jobs ran on."""
    if configs.empty or "tag" not in configs:
        return pd.Series(dtype=str)
    gpu = configs["gpu"].fillna("").astype(str) if "gpu" in configs else pd.Series("", index=configs.index)
    part = configs["tag"].astype(str).map(lambda t: t.rsplit(SEPARATOR, 1)[1] if SEPARATOR in t else "")
    known = pd.DataFrame({"part": part, "gpu": gpu})[gpu != ""]
    by_part = known.groupby("part")["gpu"].agg(lambda s: s.mode().iloc[0]).to_dict() if not known.empty else {}
    return pd.Series([g or by_part.get(p, "") for g, p in zip(gpu, part)], index=configs.index)


def models(configs: pd.DataFrame) -> list[str]:
    """The GPU models the sweep's jobs ran on (sorted)."""
    return sorted({m for m in model_of_rows(configs) if m})


def split(c: collect_mod.Collected) -> dict[str, collect_mod.Collected]:
    """The collected tables per GPU model."""
    row_model = model_of_rows(c.configs)
    out = {}
    for model in models(c.configs):
        tags = set(c.configs.loc[row_model == model, "tag"])
        m = c.measurements[c.measurements["tag"].isin(tags)] if not c.measurements.empty else c.measurements
        out[model] = collect_mod.Collected(c.configs[c.configs["tag"].isin(tags)].reset_index(drop=True),
                                           m.reset_index(drop=True), c.manifest)
    return out


def partitions_of(space: Space, c: collect_mod.Collected) -> dict[str, str]:
    """GPU model -> the partition (of slurm.partitions) its jobs ran in: where its race,
    baseline and combined best run."""
    suffix = {partition_tag("", p)[len(SEPARATOR):]: p for p in space.slurm.partitions}
    row_model = model_of_rows(c.configs)
    out = {}
    for model in models(c.configs):
        parts = c.configs.loc[row_model == model, "tag"].astype(str).map(
            lambda t: t.rsplit(SEPARATOR, 1)[1] if SEPARATOR in t else "")
        named = [suffix[x] for x in parts if x in suffix]
        out[model] = max(set(named), key=named.count) if named else ""
    return out


def empty(c: collect_mod.Collected) -> collect_mod.Collected:
    """No jobs yet: the shape of c's tables with no rows."""
    return collect_mod.Collected(c.configs.iloc[0:0], c.measurements.iloc[0:0], c.manifest)


def results_dir(sweep_results: Path, space: Space, model: str) -> Path:
    """results/<sweep>.<model>/ beside results/<sweep>/."""
    return Path(sweep_results).parent / f"{space.name}.{slug(model)}"


def write_index(space: Space, sweep_results: Path, picks: dict[str, Best | None]) -> None:
    """results/<sweep>/best/<model>/conf.cuh for each model with a pick (a copy of its results
    folder's best/conf.cuh, written by sweep.pipeline.finish), and best_by_gpu.json."""
    index: dict[str, Any] = {}
    for model, best in picks.items():
        folder = results_dir(sweep_results, space, model)
        index[model] = {"results": folder.name, "conf": None}
        if best is None:
            continue
        atomic.write_text(Path(sweep_results) / "best" / slug(model) / "conf.cuh",
                          (folder / "best" / "conf.cuh").read_text())
        index[model] = {"results": folder.name, "conf": f"best/{slug(model)}/conf.cuh", "best": best.to_dict()}
    atomic.write_json(Path(sweep_results) / "best_by_gpu.json", index)
