"""Commands over a sweep's files, from any shell: status, collect again, clean.

`clean` deletes only inside the sweep's own folders: jobs/<sweep>/ and
results/<sweep>/, named by a sweep name (never a path), never through a link,
and only where sweep.json says the folder is a sweep.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

from sweep.core import paths
from sweep.decide import collect as collect_mod
from sweep.node import lock
from sweep.space import target
from sweep.core.errors import SweepError
from sweep.pipeline.finish import finish
from sweep.pipeline.driver import Options, Sweep
from sweep.records import FAILED, MANIFEST, Best, Manifest, read_json
from sweep.space import NAME_RE, Space
from sweep.core.paths import COMMAND


def sweep_dir_of(sweep: str, jobs_root: Path) -> Path:
    """jobs_root/<sweep>, for a sweep name only: refuses paths, '.', '..' and links."""
    if not isinstance(sweep, str) or not NAME_RE.match(sweep) or sweep in (".", ".."):
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
            running.append({"tag": d.name, **read_json(d / "state.json")})
        except (OSError, SweepError, TypeError):
            pass
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


def clean(sweep: str, jobs_root: Path = paths.JOBS, results_root: Path = paths.RESULTS,
          everything: bool = False) -> list[Path]:
    """Remove build products and raw profiles (result.json files stay), or the whole sweep
    (its jobs/ and results/ folders) with everything=True. Returns what was removed."""
    sweep_dir = sweep_dir_of(sweep, jobs_root)
    if not _owned(sweep_dir, jobs_root) or not (sweep_dir / MANIFEST).is_file():
        raise SweepError(f"no sweep {sweep!r} under {jobs_root} (no {MANIFEST} there); "
                         f"`{COMMAND} status` lists the sweeps")
    driver = lock.holder(sweep_dir)
    if driver and driver.get("alive"):
        raise SweepError(f"sweep {sweep} is being run (host {driver.get('host')}, pid {driver.get('pid')}); "
                         "clean it after that driver ends")
    removed: list[Path] = []
    if everything:
        results_dir = sweep_dir_of(sweep, results_root)
        for d, root in ((sweep_dir, jobs_root), (results_dir, results_root)):
            if _owned(d, root):
                shutil.rmtree(d)
                removed.append(d)
        return removed
    for d in collect_mod.job_dirs(sweep_dir):
        if d.is_symlink():
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
