"""Commands over a sweep's files, from any shell: status, collect again, clean.

`clean` deletes only what the sweep wrote: inside its own folders, jobs/<sweep>/ and
results/<sweep>/, named by a sweep name (never a path), never through a link, and
only the entries its marker and manifest list (sweep.core.safe), its job folders and
the driver's own files; a file of the user's there is left, and so is its folder.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

from sweep.core import paths, safe
from sweep.decide import collect as collect_mod
from sweep.node import lock
from sweep.space import target
from sweep.core.errors import SweepError
from sweep.pipeline.finish import finish
from sweep.pipeline.driver import Options, Sweep
from sweep.records import FAILED, MANIFEST, Best, Manifest, read_json
from sweep.space import Space
from sweep.space.sections import sweep_name_problem
from sweep.core.paths import COMMAND


def sweep_dir_of(sweep: str, jobs_root: Path) -> Path:
    """jobs_root/<sweep>, for a sweep name only: refuses paths, '.', '..' and links."""
    if sweep_name_problem(sweep) or sweep in (".", ".."):
        raise SweepError(f"{sweep!r} is not a sweep name: give the name (letters, digits, '.', '_', '-'), as "
                         f"`{COMMAND} status` lists them, not a path")
    d = Path(jobs_root) / sweep
    if d.is_symlink():
        raise SweepError(f"{d} is a link; the tool never acts through links: remove it by hand if it is yours")
    return d


def status(sweep: str, jobs_root: Path = paths.JOBS) -> dict[str, Any]:
    """Counts, running jobs and the driver of a sweep, from its files alone."""
    sweep_dir = sweep_dir_of(sweep, jobs_root)
    c = collect_mod.collect(sweep_dir)
    counts = c.configs["status"].value_counts().to_dict() if not c.configs.empty else {}
    running = []
    for d in collect_mod.job_dirs(sweep_dir):
        try:
            state = read_json(d / "state.json")
        except (OSError, SweepError):
            continue
        if isinstance(state, dict) and not collect_mod.process_gone(state):
            running.append({"tag": d.name, **state})
    failures = c.configs[c.configs["status"].isin(FAILED)][["tag", "status", "stage", "reason", "log"]].to_dict("records") \
        if not c.configs.empty else []
    built = c.configs[c.configs["status"] == "built"][["tag", "resources"]].to_dict("records") \
        if not c.configs.empty and "resources" in c.configs else []
    return {"sweep": sweep, "manifest": c.manifest.to_dict(), "counts": counts, "running": running,
            "failures": failures, "built": built, "driver": lock.holder(sweep_dir), "arrays": slurm_arrays(sweep_dir)}


def slurm_arrays(sweep_dir: Path) -> list[dict[str, Any]]:
    """The sweep's Slurm arrays (none for other executors): per array its tasks pending, with the
    reasons Slurm gives, running and done, from one squeue call (totals only where squeue is missing)."""
    from sweep.dispatch import slurm_queue, slurm_submit

    records = slurm_submit.load_records(sweep_dir)
    queued = None
    if records and shutil.which("squeue"):
        try:
            queued = slurm_queue.queue([r["array_id"] for r in records])
        except SweepError:
            queued = None
    return slurm_submit.array_status(records, queued)


def load_snapshot(manifest: Manifest, sweep_dir: Path) -> Space:
    """The space the sweep ran with: its snapshot in the sweep folder, else the original file."""
    snap = sweep_dir / (manifest.space_snapshot or target.SNAPSHOT)
    if snap.is_file():
        return target.load_snapshot(snap, Path(manifest.space))
    return target.load(manifest.space)


def recollect(sweep: str, jobs_root: Path = paths.JOBS, results_root: Path = paths.RESULTS,
              report: bool = True) -> tuple[Best | None, Any]:
    sweep_dir = sweep_dir_of(sweep, jobs_root)
    manifest = Manifest.load(sweep_dir)
    space = dataclasses.replace(load_snapshot(manifest, sweep_dir), name=sweep)
    sw = Sweep(space, Options(jobs_root=jobs_root, results_root=results_root, report=report), sweep_dir,
               manifest.source_digest, manifest.commit, {}, manifest)
    return finish(space, sw, Path(results_root) / sweep, confirm=False)


def _owned(path: Path, root: Path) -> bool:
    """A real folder directly under root (no link on the way)."""
    return path.is_dir() and not path.is_symlink() and path.resolve().parent == Path(root).resolve()


# What the driver writes directly into jobs/<sweep>/ besides job folders, and what finish
# writes into results/<sweep>/ (a sweep from before the marker has no list of its own).
JOBS_FILES = (MANIFEST, target.SNAPSHOT, lock.LOCK, "_dispatch", "_slurm", "_races", safe.MARKER)
RESULTS_FILES = ("manifest.json", target.SNAPSHOT, "best.json", "confirmation.json", "best_by_gpu.json", "best",
                 "report.html", "report.md", "configs.csv", "configs.parquet", "measurements.csv",
                 "measurements.parquet")


def _job_folder_of(d: Path, sweep: str) -> bool:
    """A folder the sweep rendered: its config.json names this sweep and this folder's tag."""
    try:
        cfg = read_json(d / safe.JOB_FILE)
    except (OSError, SweepError):
        return False
    return isinstance(cfg, dict) and cfg.get("sweep") == sweep and cfg.get("tag") == d.name


def _jobs_entries(sweep: str, sweep_dir: Path) -> set[str]:
    """Names directly in jobs/<sweep>/ that are the sweep's own: what its marker and manifest
    list, its job folders and the driver's own files. Anything else there is left alone."""
    names = {e.split("/")[0] for e in safe.recorded(sweep_dir)} | set(JOBS_FILES)
    try:
        names |= set(Manifest.load(sweep_dir).tags)
    except SweepError:
        pass
    names |= {d.name for d in sweep_dir.iterdir() if d.is_dir() and _job_folder_of(d, sweep)}
    return names


def _remove(path: Path, folder: Path, removed: list[Path]) -> None:
    """Delete `path` (a folder with what it holds), only where it lies under `folder` with no link on the way."""
    if not safe.inside(path, folder) or not path.exists():
        return
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    removed.append(path)


def _prune(folder: Path, written: list[str]) -> None:
    """Remove the folders the tool made for what it wrote (`written`, relative to `folder`) once empty."""
    made = {folder.joinpath(*Path(w).parts[:i]) for w in written for i in range(1, len(Path(w).parts))}
    for d in sorted(made, key=lambda p: -len(p.parts)):
        if d.is_dir() and not d.is_symlink() and safe.inside(d, folder) and not any(d.iterdir()):
            d.rmdir()


def _clean_all(sweep: str, sweep_dir: Path, results_dir: Path) -> list[Path]:
    removed: list[Path] = []
    for name in sorted(_jobs_entries(sweep, sweep_dir) - {safe.MARKER}):
        _remove(sweep_dir / name, sweep_dir, removed)
    written: list[str] = []
    if results_dir.is_dir() and not results_dir.is_symlink():
        written = safe.recorded(results_dir) if safe.has_marker(results_dir) else list(RESULTS_FILES)
        for rel in written:
            _remove(results_dir / rel, results_dir, removed)
    for d, made in ((sweep_dir, []), (results_dir, written)):  # the marker last: till then the folder is known as ours
        if d.is_dir() and not d.is_symlink():
            _prune(d, made)
            marker = d / safe.MARKER
            if safe.has_marker(d):        # what it listed is gone; a file of the user's keeps the folder (and marker)
                safe.write_new(marker, safe.MARKER_HEADER.encode())
                safe.forget(d)
                if all(p == marker for p in d.iterdir()):
                    marker.unlink()
            if not any(d.iterdir()):
                d.rmdir()
                removed.append(d)
    return removed


def clean(sweep: str, jobs_root: Path = paths.JOBS, results_root: Path = paths.RESULTS,
          everything: bool = False) -> list[Path]:
    """Remove build products and raw profiles (result.json files stay), or the whole sweep
    with everything=True: what the sweep wrote into its jobs/ and results/ folders, and
    those folders once nothing else is left in them. Returns what was removed."""
    sweep_dir = sweep_dir_of(sweep, jobs_root)
    if not _owned(sweep_dir, jobs_root) or not (safe.has_marker(sweep_dir) or (sweep_dir / MANIFEST).is_file()):
        raise SweepError(f"no sweep {sweep!r} under {jobs_root} (no {MANIFEST} there); "
                         f"`{COMMAND} status` lists the sweeps")
    driver = lock.holder(sweep_dir)
    if driver and driver.get("alive"):
        raise SweepError(f"sweep {sweep} is being run (host {driver.get('host')}, pid {driver.get('pid')}); "
                         "clean it after that driver ends")
    if everything:
        results_dir = sweep_dir_of(sweep, results_root)
        if safe.nested(jobs_root, results_root):
            raise SweepError(f"--jobs-dir {jobs_root} and --results-dir {results_root} are the same folder or one "
                             "holds the other; give the two folders the sweep was run with")
        return _clean_all(sweep, sweep_dir, results_dir)
    removed: list[Path] = []
    owned = _jobs_entries(sweep, sweep_dir)
    for d in collect_mod.job_dirs(sweep_dir):
        if d.is_symlink() or d.name not in owned:
            continue
        for p in [d / "build", *d.glob("*.nsys-rep"), *d.glob("*.sqlite"), *d.glob("*.ncu-rep")]:
            if p.is_symlink():
                p.unlink()
            elif p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
            else:
                continue
            removed.append(p)
    trees = sweep_dir / "_cmake"        # a CMake target's configured trees (sweep.node.cmake): rebuilt on demand
    if trees.is_dir() and not trees.is_symlink():
        shutil.rmtree(trees)
        removed.append(trees)
    return removed
