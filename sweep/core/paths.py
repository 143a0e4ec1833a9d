"""Where the framework finds its own files, installed (`pip install .`) or in a checkout.

Installed, the templates, the engine's kernels, the shipped spaces and the examples
are package data (sweep/templates/, sweep/kernels/, sweep/spaces/, sweep/examples/);
in a checkout they sit at the repository's top level, which the package data is
built from. Jobs and results are the checkout's when the tool runs as the checkout's
`python config_sweep.py` or from a folder inside the checkout, else the working directory's
(an editable install run from a user's project folder writes there, not into the checkout).
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]   # sweep/
CHECKOUT = PACKAGE.parent
IN_CHECKOUT = (CHECKOUT / "config_sweep.py").is_file()


def _shipped(name: str) -> Path:
    """A folder the tool ships: package data when installed, else the checkout's."""
    installed = PACKAGE / name
    return installed if installed.is_dir() else CHECKOUT / name


TEMPLATES = _shipped("templates")
KERNELS = _shipped("kernels")               # the GPT-2 engine's sources (the engine target)
SPACES = _shipped("spaces")
EXAMPLES = _shipped("examples")
OBJCACHE = PACKAGE / "node" / "objcache.py"  # run by each job's Makefile as a script
CMAKE_BUILD = PACKAGE / "node" / "cmake.py"  # run by a CMake target's job Makefile as a script
IMPORT_ROOT = PACKAGE.parent                # the folder that makes `import sweep` work in a job process
DEFAULT_SPACE = SPACES / "seed.yaml"


def command() -> str:
    """How the user started the tool, for the commands messages suggest."""
    prog = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "python config_sweep.py" if prog == "config_sweep.py" else "config-sweep"


COMMAND = command()


def work_root(cwd: Path, command: str = COMMAND, checkout: Path | None = CHECKOUT if IN_CHECKOUT else None) -> Path:
    """The folder that holds jobs/ and results/: the checkout (`checkout`, None when installed)
    when the tool runs as its `python config_sweep.py` or from inside it; else the working
    directory, so an editable install (its package is the checkout's) run from a user's own
    project folder keeps that project's sweeps there instead of writing into the checkout."""
    if checkout is not None and (command == "python config_sweep.py" or cwd == checkout or checkout in cwd.parents):
        return checkout
    return cwd


WORK_ROOT = work_root(Path.cwd().resolve())
JOBS = WORK_ROOT / "jobs"
RESULTS = WORK_ROOT / "results"


def shipped_file(path: Path) -> Path:
    """A path as the user typed it; where it does not exist relative to the working
    directory but names a file the tool ships (`spaces/full.yaml`,
    `examples/tiled_gemm/space.yaml`), that file, so an installed tool runs the
    shipped spaces as a checkout does."""
    if path.exists() or path.is_absolute():
        return path
    parts = path.parts
    if parts and parts[0] in ("spaces", "examples", "kernels"):
        candidate = _shipped(parts[0]).joinpath(*parts[1:])
        if candidate.exists():
            return candidate
    return path
