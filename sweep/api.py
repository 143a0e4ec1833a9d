"""Run a sweep from a script or a notebook: `from sweep import run`.

    import sweep
    summary = sweep.run("examples/tiled_gemm/space.yaml", dry_run=True, arch="sm_90")
    summary.counts            # {"ok": 26, ...}: configurations by status
    summary.best.choices      # each kernel group's pick (None for a dry run)
    summary.results_dir       # best/conf.cuh, best.json, measurements.parquet, report.html

It is the command line's `run` without the printing: the same options, by keyword,
and the same files written. Bad input raises sweep.core.errors.SweepError with the
one-line message the command line prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sweep.core import paths
from sweep.pipeline import driver
from sweep.pipeline.driver import Options, RunSummary

__all__ = ["Options", "RunSummary", "run"]


def run(space: str | Path = paths.DEFAULT_SPACE, *, executor: str = "local", jobs_dir: str | Path = paths.JOBS,
        results_dir: str | Path = paths.RESULTS, name: str | None = None, strategy: str | None = None,
        backend: str | None = None, samples: int | None = None, dry_run: bool = False, arch: str | None = None,
        retry_failed: bool = False, confirm: bool = True, certify: bool | None = None, report: bool = True,
        slurm: dict[str, Any] | None = None) -> RunSummary:
    """Sweep `space` (a space file; `spaces/...` and `examples/...` also name the shipped ones)
    and return what the run measured and picked (RunSummary: counts, best, confirmation,
    results_dir, seconds). Keywords are the command line's `run` options."""
    opts = Options(executor=executor, jobs_root=Path(jobs_dir), results_root=Path(results_dir), dry_run=dry_run,
                   arch=arch, retry_failed=retry_failed, confirm=confirm, certify=certify, report=report)
    return driver.run(paths.shipped_file(Path(space)), opts, name=name, strategy=strategy, backend=backend,
                      samples=samples, slurm=slurm or None)
