"""A brute-forced sweep's results as a Kernel Tuner cache file, so that bench/strategies.py (every
strategy of this project, Optuna's TPE and Kernel Tuner's own, in its simulation mode) can replay a
space measured here the way it replays the community's published spaces.

    python bench/kt_cache.py results/tiled-gemm-large bench/data/tiled_gemm_large_H200.json.gz

One cache entry per configuration the sweep ran (role "sweep"); the points its constraints
rejected are left out, as Kernel Tuner leaves out the points its restrictions reject, so the
entries are the legal set. An entry's "time" is the sweep's own objective in milliseconds: the
sum over the swept kernels' launch shapes of each one's per-launch median (what `best` ranks by);
only the kernels the space's parameters name (`kernels:`) count, so a program's other kernels, timed
beside them at fixed sizes, do not dilute the ratios (all kernels count when no parameter names any);
a configuration that did not measure carries Kernel Tuner's failure string for its status
(CompilationFailedConfig for a build failure, RuntimeFailedConfig for any other). compile_time
and benchmark_time are the job's build and profile seconds (in ms, Kernel Tuner's unit), so a
replay's cost adds up to what the GPU spent.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import pandas as pd

COMPILE_FAILED = {"compile_failed"}


def _ms(seconds: float) -> float:
    """Seconds as Kernel Tuner's milliseconds (0 where the job did not record them)."""
    return float(seconds) * 1000 if pd.notna(seconds) else 0.0


def declared_values(parameter: dict) -> list[int]:
    """A parameter's values as its space declares them; a flag declared without them (type: flag,
    or values: bool) has 0 and 1."""
    values = parameter.get("values")
    if isinstance(values, list):
        return [int(v) for v in values]
    if parameter.get("type") == "flag" or values == "bool":
        return [0, 1]
    raise ValueError(f"a swept parameter declares no values ({parameter}): a cache needs each one's list")


def swept_kernels(space: dict) -> set[str]:
    """The kernels a space's parameters name (their `kernels:` lists); empty when none does."""
    return {k for p in space["parameters"].values() if isinstance(p, dict) for k in p.get("kernels") or ()}


def cache_of(results: Path) -> dict:
    """The Kernel Tuner cache of a sweep's results folder (configs.csv, measurements.csv, space.yaml)."""
    import yaml

    space = yaml.safe_load((results / "space.yaml").read_text())
    keys = list(space["parameters"])
    configs = pd.read_csv(results / "configs.csv")
    configs = configs[(configs["role"] == "sweep") & (configs["status"] != "skipped")]
    m = pd.read_csv(results / "measurements.csv")
    m = m[(m["role"] == "sweep") & (m["status"] == "ok")]
    swept = swept_kernels(space)
    if swept:
        m = m[m["kernel"].isin(swept)]
    total_ms = m.groupby("tag")["total_median_ns"].sum() / 1e6
    cache = {}
    for row in configs.itertuples(index=False):
        cfg = {k: int(getattr(row, k)) for k in keys}
        if row.status == "ok" and row.tag in total_ms.index:
            time: float | str = float(total_ms[row.tag])
        else:
            time = "CompilationFailedConfig" if row.status in COMPILE_FAILED else "RuntimeFailedConfig"
        cache[",".join(str(cfg[k]) for k in keys)] = {
            **cfg, "time": time, "times": [time] if isinstance(time, float) else [],
            "compile_time": _ms(row.build_s), "verification_time": _ms(row.verify_s),
            "benchmark_time": _ms(row.profile_s), "strategy_time": 0, "framework_time": 0,
            "timestamp": str(row.finished_at)}
    gpus = sorted(set(configs["gpu"].dropna()))
    # the kernel the times are of, as a space's replay looks for it; the program's name where several count
    kernel = next(iter(swept)) if len(swept) == 1 else space["target"]["name"]
    return {"device_name": ", ".join(gpus), "kernel_name": kernel, "problem_size": [1],
            "tune_params_keys": keys,
            "tune_params": {k: declared_values(space["parameters"][k]) for k in keys},
            "objective": "time", "cache": cache}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="a sweep's results/<name>/ folder")
    ap.add_argument("out", type=Path, help="the cache file to write (.json or .json.gz)")
    a = ap.parse_args(argv)
    data = cache_of(a.results)
    text = json.dumps(data, indent=None)
    opener = gzip.open if a.out.suffix == ".gz" else open
    with opener(a.out, "wt") as f:
        f.write(text)
    times = [e["time"] for e in data["cache"].values() if isinstance(e["time"], float)]
    print(f"{a.out}: {len(data['cache'])} configurations ({len(times)} measured), optimum {min(times):.4f} ms "
          f"on {data['device_name']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
