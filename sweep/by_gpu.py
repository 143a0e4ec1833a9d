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
picks are made by sweep.select on each model's measurements alone, unchanged.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from sweep import atomic, collect as collect_mod, render, select as select_mod, target
from sweep.records import Best
from sweep.space import Space, make_config

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


def finish(space: Space, c: collect_mod.Collected, sweep_dir: Path, results_dir: Path, commit: str,
           report: bool) -> dict[str, Best]:
    """Per GPU model: its results folder, picks and conf.cuh (see the module's docstring)."""
    picks: dict[str, Best] = {}
    index: dict[str, Any] = {}
    snapshot = sweep_dir / (c.manifest.space_snapshot or target.SNAPSHOT)
    for model, sub in split(c).items():
        name = f"{space.name}.{slug(model)}"
        out = results_dir.parent / name
        collect_mod.write_tables(sub, out)
        atomic.write_json(out / "manifest.json", sub.manifest.to_dict())
        if snapshot.is_file():
            atomic.write_bytes(out / target.SNAPSHOT, snapshot.read_bytes())
        index[model] = {"results": name, "conf": None}
        if sub.measurements.empty:
            continue
        best = select_mod.select(space, sub.measurements)
        jc = render.job_config(space, make_config(space, {p.macro: best.config[p.macro] for p in space.swept}),
                               "best", "-", commit)
        conf = render.render_conf(jc)
        select_mod.write_best(best, out, conf)
        atomic.write_text(results_dir / "best" / slug(model) / "conf.cuh", conf)
        picks[model] = best
        index[model] = {"results": name, "conf": f"best/{slug(model)}/conf.cuh", "best": best.to_dict()}
        if report:
            try:
                from sweep import report as report_mod

                report_mod.write_report(out, space=space)
            except Exception as e:  # the report is a view: the results above are already written
                print(f"warning: {out / 'report.html'} not written ({type(e).__name__}: {e})", file=sys.stderr)
    atomic.write_json(results_dir / "best_by_gpu.json", index)
    return picks
