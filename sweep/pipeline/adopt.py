"""Bringing a program to the tool: `init` (a starter space file from its folder) and
`validate` (what a space file would do, checked before any build). The CLI calls
these; the work is in sweep.space.init, sweep.plan.validate and sweep.node.resources
(the kernel names a build holds)."""

from __future__ import annotations

import os
from pathlib import Path

from sweep.core import atomic, paths
from sweep.core.errors import SweepError
from sweep.node import resources
from sweep.pipeline import recorded
from sweep.pipeline.overrides import apply_overrides
from sweep.plan import validate as validate_mod
from sweep.space import init as init_mod, target

PROGRAM_MAGIC = b"\x7fELF"


def kernel_names(folder: Path) -> list[str]:
    """The kernels a build folder holds: ptxas' lines in its build.log (a job folder), else
    `nm` over the programs in it and its build/ (host launch stubs), demangled."""
    folder = Path(folder)
    log = folder / "build.log"
    if log.is_file():
        names = sorted({k["name"] for k in resources.kernels(log.read_text(errors="replace"))})
        if names:
            return names
    programs = [p for d in (folder, folder / "build") if d.is_dir() for p in sorted(d.iterdir()) if is_program(p)]
    return resources.program_kernels(programs)


def is_program(p: Path) -> bool:
    try:
        return p.is_file() and os.access(p, os.X_OK) and p.open("rb").read(4) == PROGRAM_MAGIC
    except OSError:
        return False


def init(program_dir: Path, out: Path | None, build: Path | None = None) -> str:
    """The starter space of `program_dir`, written to `out` (refusing to overwrite), or returned for stdout."""
    program_dir = Path(program_dir)
    if not program_dir.is_dir():
        raise SweepError(f"{program_dir}: no such folder; give the folder holding the program's sources and its "
                         "Makefile or CMakeLists.txt")
    if not init_mod.source_files(program_dir):
        raise SweepError(f"{program_dir}: no CUDA or C++ sources (.cu, .cuh, .h, .cpp) in it; give the program's folder")
    if out is not None and out.exists():
        raise SweepError(f"{out} exists: init never overwrites a file; give another -o FILE, or remove it first")
    where = Path(build) if build else program_dir / "build"
    names = kernel_names(where) if where.is_dir() else []
    text = init_mod.starter(program_dir, out, names, str(where) if names else "")
    if out is not None:
        atomic.write_text(out, text)
    return text


def validate(space_path: Path, build: Path | None = None, jobs_root: Path = paths.JOBS, strategy: str | None = None,
             budget: int | None = None, start_from: Path | None = None) -> validate_mod.Validation:
    """Load, count and plan the space (with `strategy`, `budget` and `start_from` overriding the file's,
    as `run`'s options do; a warm start's recording read as the run would read it); check its kernel
    globs against `build`'s kernels, else those of a job folder a previous (dry) run of it built."""
    space = apply_overrides(target.load(space_path), strategy=strategy, budget=budget, start_from=start_from)
    warm = recorded.start_points(space)
    if build is not None:
        if not Path(build).is_dir():
            raise SweepError(f"--build {build}: no such folder; give a job folder of a dry run or a folder of built programs")
        return validate_mod.validate(space, kernel_names(build), str(build), warm)
    sweep_dir = Path(jobs_root) / space.name
    for job in sorted(sweep_dir.glob("*/build.log")) if sweep_dir.is_dir() else []:
        names = kernel_names(job.parent)
        if names:
            return validate_mod.validate(space, names, str(job.parent), warm)
    return validate_mod.validate(space, warm=warm)

