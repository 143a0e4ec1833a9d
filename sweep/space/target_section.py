"""The target section of a space file: a custom target (a folder whose Makefile or CMake
project builds the programs, and the commands that verify and time them) or a plugin
target by name (`target: engine`). Same contract as sweep.space.sections: each reader
returns the model's dataclass or raises one SweepError naming the key and the fix."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Mapping

from sweep.core import safe
from sweep.core.errors import SweepError
from sweep.space.model import (Program, Target, VERIFY_IN_PROFILE)
from sweep.space.sections import (NAME_RE, Section, show)


PluginTarget = Callable[[str, Mapping[str, Any] | None], Target]


def target(top: Section, path: Path, plugin_target: PluginTarget | None) -> Target:
    """A custom target (a mapping), or a plugin target by name (`target: engine`, the
    default), built by `plugin_target(name, options)` from the file's `model:` options."""
    raw = top.data.get("target", "engine")
    options = top.data.get("model")
    if isinstance(raw, str):
        if plugin_target is None:
            raise SweepError(f"{top.at('target')}: the {raw} target needs sweep.space.target (load spaces through sweep.space.target.load)")
        if options is not None and not isinstance(options, dict):
            raise SweepError(f"{top.at('model')}: expected a mapping of the {raw} target's options, got {show(options)}")
        try:
            return plugin_target(raw, options)
        except SweepError as e:
            raise SweepError(f"{top.at('model' if options is not None else 'target')}: {e}") from None
    if options is not None:
        raise SweepError(f"{top.at('model')}: 'model' belongs to the engine target (a plugin target's options); a custom "
                         "target exports nothing, remove 'model'")
    s = Section(raw, f"{path}: target", ("name", "dir", "verify", "profile", "events", "check_args", "programs",
                                          "build", "cmake_target", "cmake_args"))
    name = s.str("name", None)
    src = s.str("dir", None)
    if not name or not src:
        raise SweepError(f"{path}: target: a custom target needs 'name' and 'dir' (a folder whose Makefile takes "
                         "CONF_DIR, BUILD_DIR, NVCC, ARCH, NVCCFLAGS, or with build: cmake its CMakeLists.txt); "
                         "or write target: engine")
    kind = s.data.get("build", "make")
    if kind not in ("make", "cmake"):
        raise SweepError(f"{s.at('build')}: {show(kind)} is not a build system the tool drives; write make (a Makefile "
                         "taking CONF_DIR, BUILD_DIR, NVCC, ARCH, NVCCFLAGS) or cmake (a CMakeLists.txt)")
    build_file = "Makefile" if kind == "make" else "CMakeLists.txt"
    try:
        source_dir = (path.parent / src).resolve()
        has_build_file = (source_dir / build_file).is_file()
    except (OSError, ValueError, RuntimeError) as e:    # a NUL byte, a name too long, a symlink loop
        raise SweepError(f"{s.at('dir')}: {show(src)} is not a usable folder ({e}); point dir at the folder holding "
                         f"your {build_file}") from None
    if not has_build_file:
        raise SweepError(f"{s.at('dir')}: {source_dir} has no {build_file}; point dir at the folder holding your "
                         f"{build_file}" + ("" if kind == "cmake" else " (or set build: cmake for a CMake project)"))
    safe.check_make_path(source_dir, f"{s.at('dir')}:")   # every job's Makefile names it to make and the shell
    cmake = cmake_settings(s, name) if kind == "cmake" else ("", ())
    verify = s.data.get("verify", [])
    if verify == VERIFY_IN_PROFILE:
        verify = VERIFY_IN_PROFILE  # the timing program checks itself first
    elif isinstance(verify, list) and verify and all(isinstance(v, str) for v in verify):
        verify = [verify]  # one command
    if verify != VERIFY_IN_PROFILE and (not isinstance(verify, list) or not all(isinstance(v, list) for v in verify)):
        raise SweepError(f"{s.at('verify')}: expected a command as a list of strings, a list of such commands, or "
                         f"'{VERIFY_IN_PROFILE}' (the timing program checks its own results before it times); got "
                         f"{show(verify)}")
    checks = verify if verify == VERIFY_IN_PROFILE else tuple(tuple(str(x) for x in v) for v in verify)
    return Target(name, source_dir, checks, timing_command(s), s.strings("events", ()),
                  check_args=check_args(s, checks), programs=programs(s, checks), build=kind,
                  cmake_target=cmake[0], cmake_args=cmake[1])


CMAKE_TARGET_RE = re.compile(r"^[A-Za-z0-9_.+-]+\Z")
CMAKE_ARG_RE = re.compile(r"^-D([A-Za-z_][A-Za-z0-9_]*)(:[A-Z]+)?=[^$`\n]*\Z")
CMAKE_OWNED = ("CMAKE_CUDA_ARCHITECTURES", "CMAKE_CUDA_COMPILER_LAUNCHER")   # set by the tool (build.arch, the cache)


def cmake_settings(s: Section, name: str) -> tuple[str, tuple[str, ...]]:
    """A CMake target's (cmake_target, cmake_args): the target defaults to the target's name;
    the arguments are -DNAME=value words (no '$' or backticks: CMake writes them into Makefiles)."""
    cmake_target = s.str("cmake_target", name)
    if not isinstance(cmake_target, str) or not CMAKE_TARGET_RE.match(cmake_target):
        raise SweepError(f"{s.at('cmake_target')}: {show(cmake_target)} is not a CMake target name; give the name "
                         "of the add_executable() to build, e.g. cmake_target: stencil")
    args = s.strings("cmake_args", ())
    for a in args:
        m = CMAKE_ARG_RE.match(a)
        if not m:
            raise SweepError(f"{s.at('cmake_args')}: {show(a)} is not a -DNAME=value cache setting (no '$' or "
                             "backticks); write e.g. -DCMAKE_BUILD_TYPE=Release")
        if m.group(1) in CMAKE_OWNED:
            raise SweepError(f"{s.at('cmake_args')}: {m.group(1)} is set by the tool (the architectures from "
                             "build.arch or --arch, the launcher is its object cache); remove it")
    return cmake_target, args


def timing_command(s: Section) -> tuple[str, ...]:
    """A section's `profile:`, the timing command: a non-empty list of words."""
    cmd = s.strings("profile", ())
    if not cmd:
        raise SweepError(f"{s.at('profile')}: missing; give the timing command, e.g. "
                         "['{build}/my_bench', '--iters', '{iterations}']")
    return cmd


def check_args(s: Section, verify: tuple[tuple[str, ...], ...] | str) -> tuple[str, ...]:
    """A section's `check_args:`, the words that make its timing program check its results before
    it times (added to its first run of a configuration); they mean something only with verify:
    profile, so anything else is refused rather than silently never used."""
    args = s.strings("check_args", ())
    if args and verify != VERIFY_IN_PROFILE:
        raise SweepError(f"{s.at('check_args')}: the timing program is given these words only with "
                         f"verify: {VERIFY_IN_PROFILE} (it checks itself in its first run); set target.verify: "
                         f"{VERIFY_IN_PROFILE}, or remove check_args and keep the check commands")
    return args


def programs(target_section: Section, verify: tuple[tuple[str, ...], ...] | str) -> dict[str, Program]:
    """target.programs: more programs a workload can name, each with its own timing command
    (and `events:`, `check_args:`), read as the target's own `profile:`, `events:` and
    `check_args:` are."""
    raw = target_section.data.get("programs") or {}
    where = target_section.at("programs")
    if not isinstance(raw, dict):
        raise SweepError(f"{where}: expected a mapping of program names to {{profile: [...], events: [...], "
                         f"check_args: [...]}}, got "
                         f"{show(raw)}")
    out = {}
    for name, spec in raw.items():
        if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > 64:
            raise SweepError(f"{where}: {show(name)} is not a program name; use letters, digits, '.', '_' or '-' "
                             "(a workload names it: program: NAME)")
        s = Section(spec, f"{where}.{name}", ("profile", "events", "check_args"))
        out[name] = Program(timing_command(s), s.strings("events", ()), check_args(s, verify))
    return out
