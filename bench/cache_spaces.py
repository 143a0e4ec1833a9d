"""Brute-forced Kernel Tuner cache files as bench/strategies.py replays them: the space (its
parameters, the legal set, each configuration's cost or failure kind), the objective it declares,
and the Evaluator that answers a strategy's configurations and records the trace of distinct
evaluations. Stdlib only."""

from __future__ import annotations

import gzip
import json
import math
import sys
from functools import lru_cache
from pathlib import Path

FAILURE_KINDS = {"CompilationFailedConfig": "compile_failed", "RuntimeFailedConfig": "runtime_failed",
                 "InvalidConfig": "invalid"}


# -- spaces ------------------------------------------------------------------------------
# Which way a cache file's declared objective goes (Kernel Tuner's own defaults for these names):
# rates are maximized, times and costs minimized.
HIGHER_IS_BETTER = {"time": False, "energy": False, "cost": False, "loss": False, "fitness": True,
                    "GFLOP/s": True, "TFLOP/s": True, "GB/s": True, "TB/s": True,
                    "GFLOPS/W": True, "TFLOPS/W": True, "GFLOP/J": True, "TFLOP/J": True}


class SpaceError(ValueError):
    """A space file the bench cannot replay: the message names the file and what to do."""


def load_space(path: str | Path) -> dict:
    """A brute-forced Kernel Tuner cache file as the bench replays it. Every strategy minimizes one
    cost per configuration: the file's declared objective ("objective", time by default) where
    lower is better, its reciprocal where higher is (GFLOP/s: the hub's hotspot caches), so that
    best-found / optimum reads the same way for both. Failed configurations carry their kind."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        data = json.load(f)
    if isinstance(data, dict) and "results" in data and "cache" not in data:
        raise SpaceError(f"{path}: a T4 results file, not a Kernel Tuner cache; the bench replays caches (Kernel "
                         "Tuner's simulation mode reads only those): give the cache file the T4 file was made from")
    objective = data.get("objective") or "time"
    if objective not in HIGHER_IS_BETTER:
        raise SpaceError(f"{path}: objective {objective!r} has no known direction (known: "
                         f"{', '.join(HIGHER_IS_BETTER)}); set the file's \"objective\" to one of them")
    higher = HIGHER_IS_BETTER[objective]
    keys = data["tune_params_keys"]
    params = {k: list(data["tune_params"][k]) for k in keys}
    table = {}
    for entry in data["cache"].values():
        t = entry.get(objective)
        cfg = tuple(entry[k] for k in keys)
        ok = isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t > 0
        table[cfg] = (1.0 / t if higher else float(t)) if ok else FAILURE_KINDS.get(str(t), "failed")
    times = [v for v in table.values() if isinstance(v, float)]
    if not times:
        raise SpaceError(f"{path}: no configuration has a positive {objective!r}: nothing to replay")
    # bench/brute_force.py's caches say which parameters are enumerations (type: choice), which a
    # Kernel Tuner cache cannot: {"PNPOLY_METHOD": "choice", ...}; absent, the strategy infers
    kinds = data.get("parameter_kinds") or {}
    return {"name": load_name(path), "path": str(path), "keys": keys, "params": params, "table": table,
            "kinds": {k: kinds[k] for k in keys if k in kinds},
            "optimum": min(times), "objective": objective, "higher_is_better": higher, "data": data}


def check_space(path: Path) -> None:
    """Exit with one line naming the file and the fix if it cannot be replayed. The space it reads
    stays in this process's cache: the runs made here, and the workers forked from here, reuse it."""
    try:
        cached_space(str(path))
    except SpaceError as e:
        sys.exit(f"error: {e}")
    except OSError as e:
        sys.exit(f"error: {path}: {e.strerror or e}; give --spaces a Kernel Tuner cache file (.json or .json.gz) "
                 "or a folder of them")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        sys.exit(f"error: {path}: not a brute-forced Kernel Tuner cache file ({type(e).__name__}: {e}); "
                 "give --spaces a cache file (.json or .json.gz with tune_params_keys, tune_params and cache)")


@lru_cache(maxsize=None)
def cached_space(path: str) -> dict:
    """The replayed space, read once per worker process (a worker replays the same few files
    for every run it is given; nothing a run does changes the dict)."""
    return load_space(path)


def load_name(path: str | Path) -> str:
    return Path(path).name.split(".")[0]


def space_files(spec: list[str]) -> list[Path]:
    out = []
    for s in spec:
        p = Path(s)
        if p.is_dir():
            out += sorted(q for q in p.iterdir() if q.name.endswith((".json", ".json.gz")) and "_T4" not in q.name
                          and "T1" not in q.name and "results" not in q.name and "metadata" not in q.name)
        else:
            out.append(p)
    return out


class Evaluator:
    """Answers configurations from the table; records the trace of distinct evaluations."""

    last: "Evaluator | None" = None   # the latest one, for bench/landscape.py to read a run's configurations

    def __init__(self, space: dict, limit: int):
        self.space, self.limit = space, limit
        Evaluator.last = self
        self.trace: list[float | None] = []
        self.seen: dict[tuple, float | str] = {}

    def __call__(self, cfg: tuple):
        if cfg in self.seen:
            return self.seen[cfg]
        v = self.space["table"][cfg]
        self.seen[cfg] = v
        self.trace.append(v if isinstance(v, float) else None)
        return v

    @property
    def done(self) -> bool:
        return len(self.trace) >= self.limit
