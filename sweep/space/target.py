"""Targets: what identifies a target's sources, and the plugin targets a space names.

A custom target is a folder whose Makefile takes CONF_DIR, BUILD_DIR, NVCC, ARCH
and NVCCFLAGS, plus the commands that verify and time it (sweep.space.Target).
A plugin target is named in a space file (`target: engine`) and supplied by a
module with `target(options) -> Target`; its Target may carry a prepare step
(`Prepare`), run once while the builds run, that makes files the programs read
and the placeholder values naming them. The GPT-2 engine (gpt2_engine) is one.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import subprocess
from pathlib import Path
from typing import Any, Mapping, Protocol

from sweep import space as space_mod
from sweep.core import paths
from sweep.core.errors import SweepError

PLUGINS = {"engine": "gpt2_engine"}     # `target: NAME` -> the module providing target(options)
DEFAULT_SPACE = paths.DEFAULT_SPACE
# Every file of the target's folder its build may read: sources, headers and build scripts
# (make, CMake). A changed build (CMakeLists.txt, flags.mk) is a different measurement.
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".inl", ".inc", ".cpp", ".cc", ".cxx", ".c",
                   ".mk", ".cmake")
BUILD_NAMES = ("Makefile", "makefile", "GNUmakefile", "CMakeLists.txt")   # also Makefile.inc and the like
# Folders a build writes, not reads: never part of the digest (nor hidden ones: .git, caches)
OUTPUT_FOLDERS = ("build", "_build", "__pycache__", "CMakeFiles")
MAX_DIGEST_BYTES = 64 << 20


class Prepare(Protocol):
    """A plugin target's step before measuring (the engine: export the model)."""

    def values(self, jobs_root: Path) -> dict[str, str]:
        """Placeholder values the programs read (known before prepare runs)."""

    def describe(self, jobs_root: Path) -> str:
        """One line saying what prepare does."""

    def prepare(self, jobs_root: Path) -> dict[str, str]:
        """Make the files; returns the placeholder values."""


def plugin_target(name: str, options: Mapping[str, Any] | None) -> space_mod.Target:
    module = PLUGINS.get(name)
    if module is None:
        raise SweepError(f"target {name!r} is not a plugin target (plugins: {', '.join(PLUGINS)}); or give a custom "
                         "target as a mapping with name, dir and profile")
    try:
        return importlib.import_module(module).target(options)
    except ImportError as e:
        raise SweepError(f"target {name!r} needs the {module} package, which cannot be imported ({e}); run from a "
                         "checkout of the repository") from None


def load(path: Path | str) -> space_mod.Space:
    """Load a space file, with the plugin targets available (`target: engine`); a T1 file
    (JSON with a ConfigurationSpace, sweep.space.t1) loads as a replay-only space."""
    from sweep.space import t1

    data = t1.read(Path(path))
    if t1.is_t1(data):
        return t1.parse(data, Path(path))
    return space_mod.parse_space(data, Path(path), plugin_target=plugin_target)


SNAPSHOT = "space.yaml"     # the space file as run, kept in jobs/<sweep>/ and results/<sweep>/


def load_snapshot(snapshot: Path, recorded: Path) -> space_mod.Space:
    """A space from its snapshot's text, with relative paths (a custom target's dir)
    resolved from where the original file was when the sweep ran."""
    from sweep.space import reader, t1

    data = reader.read(Path(snapshot))
    if t1.is_t1(data):
        return t1.parse(data, Path(recorded))
    return space_mod.parse_space(data, Path(recorded), plugin_target=plugin_target)


def read_by_build(name: str) -> bool:
    """Whether a file named `name` is one the build may read (SOURCE_SUFFIXES, BUILD_NAMES)."""
    return name.endswith(SOURCE_SUFFIXES) or name.startswith(BUILD_NAMES)


def _output_folder(name: str) -> bool:
    return name.startswith(".") or name in OUTPUT_FOLDERS or name.startswith(("build-", "cmake-build-"))


def build_inputs(source_dir: Path) -> list[Path]:
    """The files of the target's folder its build may read, sorted; build output and hidden
    folders are skipped."""
    out = []
    for root, dirs, names in os.walk(source_dir):
        dirs[:] = [d for d in dirs if not _output_folder(d)]
        out.extend(Path(root) / n for n in names if read_by_build(n) and os.path.isfile(os.path.join(root, n)))
    return sorted(out)


def source_digest(target: space_mod.Target) -> str:
    """sha256 over every file of the target's folder the build may read (sources, headers,
    Makefiles, *.mk, CMakeLists.txt, *.cmake): results measured on another build are not reused."""
    h = hashlib.sha256()
    total = 0
    for p in build_inputs(target.source_dir):
        data = p.read_bytes()
        total += len(data)
        if total > MAX_DIGEST_BYTES:
            raise SweepError(f"target {target.source_dir} holds over {MAX_DIGEST_BYTES >> 20} MiB of sources; "
                             "point the target's dir at the folder with the kernels and their Makefile")
        h.update(str(p.relative_to(target.source_dir)).encode() + b"\0" + data)
    return h.hexdigest()[:16]


def commit(path: Path) -> str:
    """The git commit of `path` (with -dirty when its files differ from it: modified, or present and
    neither committed nor ignored, as a new kernel not yet added is), or 'unknown' outside git."""
    try:
        rev = subprocess.run(["git", "-C", str(path), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        if rev.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=normal", "."],
                               capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
