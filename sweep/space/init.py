"""A starter space file from a program's folder: `config-sweep init PROGRAM_DIR`.

What it reads: the `#ifndef NAME / #define NAME <integer>` macros of the sources
(their defaults; the values to try are a guess: powers of two around a size, 0 and
1 for a 0/1 default), whether the sources include conf.cuh (if none does, the
macros go to nvcc as -DNAME=value: build.macros: define), the build (a Makefile
taking CONF_DIR, else a CMakeLists.txt: build: cmake) and the program it makes,
and the kernels of a build when one exists (sweep.pipeline.adopt finds them; they
are matched by their short demangled names, as the profilers report them). What it
cannot know is written as comments saying what to fill in. Nothing here runs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from sweep.space.loader import MACRO_RE
from sweep.space.target import SOURCE_SUFFIXES

DEFAULT_MACRO = re.compile(r"^[ \t]*#[ \t]*ifndef[ \t]+(?P<name>[A-Z_][A-Z0-9_]*)[ \t]*(?://[^\n]*)?\n"
                           r"[ \t]*#[ \t]*define[ \t]+(?P=name)[ \t]+\(?(?P<value>\d+)[uUlL]*\)?[ \t]*(?://[ \t]*(?P<doc>[^\n]*))?$",
                           re.M)
CMAKE_EXECUTABLE = re.compile(r"add_executable\s*\(\s*([A-Za-z0-9_.+-]+)")
MAKE_ALL = re.compile(r"^all\s*:(?P<deps>[^\n]*)$", re.M)
MAKE_ASSIGN = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t]*(?::=|\?=|=)[ \t]*(?P<value>[^\n#]*)", re.M)
MAKE_INCLUDE = re.compile(r"^-?include[ \t]+(?P<files>[^\n#]+)", re.M)
MAKE_VARIABLE = re.compile(r"\$[({](?P<name>[A-Za-z_][A-Za-z0-9_]*)[)}]")
SKIP_DIRS = ("build", ".git", "CMakeFiles")
MAX_FILES = 2000


@dataclass(frozen=True, slots=True)
class Macro:
    name: str
    default: int
    doc: str
    where: str          # file it was found in, relative to the program's folder


def scan_macros(program_dir: Path) -> list[Macro]:
    """The `#ifndef X / #define X N` defaults of the program's sources, first definition wins."""
    found: dict[str, Macro] = {}
    for p in source_files(program_dir):
        try:
            text = p.read_text(errors="replace")
        except OSError:           # unreadable (permissions, a dangling link): it defines nothing we can see
            continue
        for m in DEFAULT_MACRO.finditer(text):
            name = m.group("name")
            if name not in found and MACRO_RE.match(name):
                found[name] = Macro(name, int(m.group("value")), (m.group("doc") or "").strip(),
                                    str(p.relative_to(program_dir)))
    return list(found.values())


def source_files(program_dir: Path) -> list[Path]:
    out = []
    for p in sorted(Path(program_dir).rglob("*")):
        if any(part in SKIP_DIRS for part in p.relative_to(program_dir).parts[:-1]):
            continue
        if p.is_file() and p.suffix in SOURCE_SUFFIXES and p.suffix != ".cmake":
            out.append(p)
            if len(out) >= MAX_FILES:
                break
    return out


def guess_values(default: int) -> tuple[str, list[int]]:
    """(type, values): 0/1 -> a flag; a power of two -> half, itself, double; else the default alone."""
    if default in (0, 1):
        return "flag", [0, 1]
    if default & (default - 1) == 0:
        return "size", [default // 2, default, default * 2]
    return "size", [default]


def build_system(program_dir: Path) -> tuple[str, str]:
    """("make" | "cmake", the program's guessed name): a Makefile that takes CONF_DIR is the
    target contract; else a CMakeLists.txt; else a Makefile anyway (the comments say what it must take)."""
    mk_text = makefile_text(program_dir)
    cm = program_dir / "CMakeLists.txt"
    if cm.is_file() and "CONF_DIR" not in mk_text:
        names = CMAKE_EXECUTABLE.findall(cm.read_text(errors="replace"))
        return "cmake", names[0] if names else program_dir.name
    variables: dict[str, str] = {}
    for a in MAKE_ASSIGN.finditer(mk_text):          # the first assignment wins: the Makefile's own
        variables.setdefault(a.group("name"), a.group("value").strip())
    m = MAKE_ALL.search(mk_text)
    words = [expanded(w, variables).rsplit("/", 1)[-1] for w in (m.group("deps").split() if m else [])]
    return "make", next((w for w in words if re.fullmatch(r"[A-Za-z0-9_.+-]+", w)), program_dir.name)


def makefile_text(program_dir: Path) -> str:
    """The folder's Makefile, then the makefiles it includes where their paths resolve from the folder
    (a leading variable that names the Makefile's own folder, one set from MAKEFILE_LIST or CURDIR,
    read as that folder): an example's Makefile names its PROGRAM and includes the rules
    (examples/common/program.mk). Read only, never run."""
    mk = program_dir / "Makefile"
    if not mk.is_file():
        return ""
    text = mk.read_text(errors="replace")
    here = {a.group("name") for a in MAKE_ASSIGN.finditer(text)
            if "MAKEFILE_LIST" in a.group("value") or "CURDIR" in a.group("value")} | {"CURDIR"}
    parts = [text]
    for inc in MAKE_INCLUDE.finditer(text):
        for word in inc.group("files").split():
            lead = MAKE_VARIABLE.match(word)
            path = program_dir / word[lead.end():].lstrip("/") if lead and lead.group("name") in here else \
                program_dir / word
            if "$" not in str(path) and path.is_file():
                parts.append(path.read_text(errors="replace"))
    return "\n".join(parts)


def expanded(word: str, variables: dict[str, str], depth: int = 4) -> str:
    """`word` with each $(NAME) or ${NAME} of a simple assignment replaced by its value (nested ones
    too, a few levels deep); the others stay as they are."""
    for _ in range(depth):
        new = MAKE_VARIABLE.sub(lambda v: variables.get(v.group("name"), v.group(0)), word)
        if new == word:
            break
        word = new
    return word


def includes_conf(program_dir: Path) -> bool:
    return any("conf.cuh" in p.read_text(errors="replace") for p in source_files(program_dir))


def starter(program_dir: Path, space_path: Path | None, kernels: list[str], kernels_from: str = "") -> str:
    """The starter space file's text, for a space file to be written at `space_path` (its
    target dir relative to it), or printed (None: the folder's absolute path)."""
    program_dir = Path(program_dir).resolve()
    macros = scan_macros(program_dir)
    kind, program = build_system(program_dir)
    where = os.path.relpath(program_dir, Path(space_path).resolve().parent) if space_path else str(program_dir)
    shown = Path(space_path).name if space_path else "SPACE.yaml"
    name = re.sub(r"[^A-Za-z0-9._-]", "-", program_dir.name) or "my-sweep"
    lines = [f"# A starter space for {program_dir} (config-sweep init): check every line marked FILL IN,",
             f"# then `config-sweep validate {shown}` and a `run --dry-run --arch sm_90`.",
             f"name: {name}",
             "target:",
             f"  name: {program}",
             f"  dir: {where}"]
    if kind == "cmake":
        lines += ["  build: cmake                 # found a CMakeLists.txt (and no Makefile taking CONF_DIR)",
                  f"  cmake_target: {program}         # the add_executable() found first; FILL IN if another",
                  "  cmake_args: [-DCMAKE_BUILD_TYPE=Release]"]
    else:
        lines += ["  # build: make (the Makefile must take CONF_DIR, BUILD_DIR, NVCC, ARCH and NVCCFLAGS)"]
    lines += [f"  profile: [\"{{build}}/{program}\", \"{{args}}\"]   # FILL IN: how to time it (iterations: "
              "{iterations}, warm-up: {warmup})",
              "  # verify: [\"{build}/my_check\"]   # FILL IN: a command that exits 1 on wrong results, or `verify: "
              "profile` if the program checks itself before timing",
              "  # events: [\"--json\", \"{events_json}\"]   # if it writes engine-timing/1 JSON (docs/bring-your-own.md)",
              "strategy: grid                 # factorized once the kernels: lists below are right"]
    found = f" (from {kernels_from})" if kernels_from else ""
    lines.append(f"# kernels in the build{found}: " + (", ".join(kernels) if kernels else
                                                      "none found (build it, then run init again or validate --build)"))
    lines.append("parameters:")
    if not macros:
        lines.append("  # FILL IN: no `#ifndef NAME / #define NAME <integer>` defaults found in the sources")
        lines.append("  MY_BLOCK_SIZE: {values: [128, 256], default: 256, kernels: [my_kernel]}")
    globs = "[" + ", ".join(kernels) + "]" if kernels else "[]"
    for m in macros:
        kind_, values = guess_values(m.default)
        typ = ", type: flag" if kind_ == "flag" else ""
        doc = f"  # {m.where}: {m.doc}" if m.doc else f"  # {m.where}"
        lines.append(f"  {m.name}: {{values: {values}{typ}, default: {m.default}, kernels: {globs}}}{doc}")
    lines += ["  # FILL IN each kernels: list with the kernels the macro governs (globs over the names above)",
              "constraints: []                # FILL IN the rules a legal point keeps, e.g. - expr: BX * BY <= 1024",
              "build:",
              "  arch: auto                   # the GPU of the node that builds; or [sm_90]"]
    if macros and not includes_conf(program_dir):
        lines.append("  macros: define               # no source includes conf.cuh: each macro goes to nvcc as -DNAME=value")
    lines += ["profile:",
              "  backend: cupti               # or events (the program's own timing), nsys, ncu",
              "run:",
              "  warmup: 2",
              "  iterations: 20",
              ""]
    return "\n".join(lines)
