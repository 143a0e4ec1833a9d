"""A sweep's two folders, jobs/<sweep>/ and results/<sweep>/, checked and claimed before
anything is measured: the roots are folders this user can write (not files, not on a
read-only filesystem) and not one inside the other; the jobs root's path is one make and
the shell read as it is; neither sweep folder is a link; and each is the tool's (its
marker, sweep.core.safe) or is made so now, with nothing of the user's in it."""

from __future__ import annotations

from pathlib import Path

from sweep.core import safe
from sweep.core.errors import SweepError
from sweep.records import MANIFEST, Manifest, read_json

RESULTS_MANIFEST = "manifest.json"   # the copy of sweep.json finish writes into results/<sweep>/


def check_roots(jobs_root: Path, results_root: Path) -> None:
    """What can be said of the roots without writing anything (each raises one line)."""
    safe.check_make_path(jobs_root, "--jobs-dir")
    for what, root in (("--jobs-dir", jobs_root), ("--results-dir", results_root)):
        for p in (root, *root.parents):
            if p.exists():
                if not p.is_dir():
                    raise SweepError(f"{what} {root}: {p} is a file, not a folder; give a folder path ({what} DIR)")
                break
    if safe.nested(jobs_root, results_root):
        raise SweepError(f"--jobs-dir {jobs_root} and --results-dir {results_root} are the same folder or one holds "
                         "the other; give two separate folders (the defaults are jobs/ and results/)")


def legacy_jobs(d: Path) -> bool:
    """A sweep folder from before the marker: it holds a valid sweep.json."""
    try:
        Manifest.load(d)
        return (d / MANIFEST).is_file() and not (d / MANIFEST).is_symlink()
    except SweepError:
        return False


def legacy_results(d: Path) -> bool:
    try:
        Manifest.from_dict(read_json(d / RESULTS_MANIFEST), d / RESULTS_MANIFEST)
        return not (d / RESULTS_MANIFEST).is_symlink()
    except (OSError, SweepError):
        return False


def claim(name: str, jobs_root: Path, results_root: Path) -> tuple[Path, Path]:
    """jobs_root/<name> and results_root/<name>, each the tool's (marked) from here on."""
    check_roots(jobs_root, results_root)
    # both sweep folders are checked before either root is made: a refused run creates nothing
    safe.check_claim(jobs_root / name, "jobs folder", legacy_jobs)
    safe.check_claim(results_root / name, "results folder", legacy_results)
    safe.usable_dir(jobs_root, "--jobs-dir")
    safe.usable_dir(results_root, "--results-dir")
    sweep_dir = safe.claim(jobs_root / name, "jobs folder", legacy_jobs)
    return sweep_dir, claim_results(results_root / name)


def claim_results(results_dir: Path) -> Path:
    """results/<sweep>/ (or a GPU model's results/<sweep>.<model>/), the tool's from here on."""
    return safe.claim(results_dir, "results folder", legacy_results)
