"""What exists of a sweep's results (results/<sweep>/), and what is missing.

    load(results_dir)             SweepData: tables, manifest, picks, confirmation, best/conf.cuh, space
    read_best(results_dir, notes) best.json as written by select (the one place that reads it)
    resolve_space_path(recorded)  the manifest's space file, also from a checkout that moved

Nothing here guesses: an input that is absent or damaged is None, and why is
added to SweepData.notes, which the report shows at the top.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sweep.core import paths
from sweep.decide import collect, select as select_mod
from sweep.space import target
from sweep.records import Best, load_record
from sweep.core.errors import SweepError
from sweep.space import Space
from sweep.core.paths import COMMAND


@dataclass(frozen=True, slots=True)
class SweepData:
    name: str
    results_dir: Path
    configs: pd.DataFrame
    measurements: pd.DataFrame
    manifest: dict
    best: dict | None                  # best.json (or provisional: selected here from a partial sweep)
    confirmation: dict | None
    conf_text: str | None
    space: Space | None
    jobs_dir: Path | None = None
    provisional: bool = False
    notes: list[str] = field(default_factory=list)   # degraded inputs, said at the top of the report


def load(results_dir: Path, *, space: Space | None = None, jobs_dir: Path | None = None) -> SweepData:
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise SweepError(f"no results in {results_dir}: run `{COMMAND} collect {results_dir.name}` "
                         f"(or `{COMMAND} run SPACE.yaml --name {results_dir.name}`) first")
    tables = collect.load_tables(results_dir)
    configs = tables.configs.copy()
    if "role" not in configs:
        configs["role"] = "sweep"
    notes: list[str] = []
    manifest = tables.manifest.to_dict() if tables.manifest else {}
    if not manifest:
        notes.append(f"no manifest.json in {results_dir}: space, strategy and executor are unknown")
    if space is None:
        space = _load_space(manifest, notes, results_dir)
    best = read_best(results_dir, notes)
    provisional = False
    if best is None:
        best, provisional = _provisional_best(space, tables.measurements, notes)
    conf = _read_json(results_dir / "confirmation.json", notes)
    conf_path = results_dir / "best" / "conf.cuh"
    conf_text = conf_path.read_text() if conf_path.is_file() else None
    return SweepData(results_dir.name, results_dir, configs, tables.measurements, manifest, best, conf, conf_text,
                     space, Path(jobs_dir) if jobs_dir else None, provisional, notes)


def read_best(results_dir: Path, notes: list[str]) -> dict | None:
    """results_dir/best.json, read as the Best record (schema checked) and given as its dict;
    None when absent, damaged or of another version (said in notes)."""
    path = Path(results_dir) / "best.json"
    try:
        best = load_record(Best, path)
    except SweepError as e:
        notes.append(f"{e}: ignored")
        return None
    return best.to_dict() if best is not None else None


def _read_json(path: Path, notes: list[str]) -> dict | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        notes.append(f"{path.name} is damaged ({e}): ignored; run `{COMMAND} collect` again")
        return None


def resolve_space_path(recorded: str) -> Path | None:
    """The manifest's space file; if that absolute path is gone (another checkout), the same
    relative path inside this repository (e.g. /old/clone/tests/data/toy_space.yaml)."""
    p = Path(recorded)
    if p.is_file():
        return p
    parts = p.parts[1:] if p.is_absolute() else p.parts
    for i in range(len(parts)):
        candidate = paths.CHECKOUT.joinpath(*parts[i:])
        if candidate.is_file():
            return candidate
    return None


def _load_space(manifest: dict, notes: list[str], results_dir: Path) -> Space | None:
    recorded = manifest.get("space")
    snapshot = Path(results_dir) / target.SNAPSHOT
    if recorded and snapshot.is_file():   # the space as the sweep ran it, whatever became of the file since
        try:
            return target.load_snapshot(snapshot, Path(recorded))
        except (SweepError, OSError, ValueError) as e:
            notes.append(f"the space snapshot {snapshot} could not be loaded ({e}); trying {recorded}")
    if not recorded:
        notes.append("the space file is unknown (no manifest): groups come from best.json and the tables' macro columns")
        return None
    path = resolve_space_path(recorded)
    if path is None:
        notes.append(f"space file {recorded} not found: groups come from best.json and the tables' macro columns; "
                     "parameter defaults are not shown")
        return None
    try:
        return target.load(path)
    except (SweepError, OSError, ValueError, KeyError) as e:
        notes.append(f"space file {path} could not be loaded ({e}): groups come from best.json and the tables' "
                     "macro columns; parameter defaults are not shown")
        return None


def _provisional_best(space: Space | None, measurements: pd.DataFrame, notes: list[str]) -> tuple[dict | None, bool]:
    """Picks selected here from the measurements so far, for a sweep with no best.json yet:
    (best as a dict, True), or (None, False) with why in notes."""
    ok = not measurements.empty and (measurements["status"] == "ok").any()
    if space is None or not ok:
        why = "nothing was measured yet" if not ok else "the space file is unavailable"
        notes.append(f"no best.json yet and no picks can be made here ({why})")
        return None, False
    try:
        best = select_mod.select(space, measurements).to_dict()
    except (SweepError, KeyError, ValueError) as e:
        notes.append(f"no best.json yet, and selecting from the measurements failed ({e})")
        return None, False
    notes.append("no best.json yet: the picks below are provisional, selected from the configurations measured so far")
    return best, True
