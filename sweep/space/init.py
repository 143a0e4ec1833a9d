"""A starter space file from a program's folder: `config-sweep init PROGRAM_DIR`.

What it reads: the `#ifndef NAME / #define NAME <integer>` macros of the sources
(their defaults; the values to try are a guess: powers of two around a size, 0 and
1 for a 0/1 default), whether the sources include conf.cuh (if none does, the
macros go to nvcc as -DNAME=value: build.macros: define), the build (a Makefile
taking CONF_DIR, else a CMakeLists.txt: build: cmake) and the program it makes,
the timing flags its sources compare their arguments with (sweep.space.run_flags: the
profile command), and the kernels of a build when one exists (sweep.pipeline.adopt finds
them; they are matched by their short demangled names, as the profilers report them). What it
cannot know is written as comments saying what to fill in. Nothing here runs.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sweep.space import expr
from sweep.space.build_files import build_system, header_dirs, read_makefiles
from sweep.space.loader import MACRO_RE
from sweep.space.run_flags import included_headers, read_run_flags
from sweep.space.source_facts import SourceFacts, read_sources
from sweep.space.source_text import reads_once, source_text
from sweep.space.target import SOURCE_SUFFIXES

DEFAULT_MACRO = re.compile(r"^[ \t]*#[ \t]*ifndef[ \t]+(?P<name>[A-Z_][A-Z0-9_]*)[ \t]*(?://[^\n]*)?\n"
                           r"[ \t]*#[ \t]*define[ \t]+(?P=name)[ \t]+\(?(?P<value>\d+)[uUlL]*\)?[ \t]*(?://[ \t]*(?P<doc>[^\n]*))?$",
                           re.M)
SKIP_DIRS = ("build", ".git", "CMakeFiles")
ENUMERATED = 6             # rules that keep at most this many small values enumerate them
SMALL_MOST = 1024          # how far up "small" goes
NEARBY_MOST = 729         # the most combinations of other macros' nearby values tried for one guessed value
FACTORIZED_MOST = 256      # the most builds a factorized starter makes (its largest group's grid)
MAX_FILES = 2000


@dataclass(frozen=True, slots=True)
class Macro:
    name: str
    default: int
    doc: str
    where: str          # file it was found in, relative to the program's folder


def scan_macros(program_dir: Path, files: list[Path] | None = None) -> list[Macro]:
    """The `#ifndef X / #define X N` defaults of the program's sources (`files`, found here when
    None), first definition wins."""
    found: dict[str, Macro] = {}
    for p in source_files(program_dir) if files is None else files:
        try:
            text = source_text(p)
        except OSError:           # unreadable (permissions, a dangling link): it defines nothing we can see
            continue
        for m in DEFAULT_MACRO.finditer(text):
            name = m.group("name")
            if name not in found and MACRO_RE.match(name):
                found[name] = Macro(name, int(m.group("value")), (m.group("doc") or "").strip(),
                                    os.path.relpath(p, program_dir))
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


def with_included_headers(program_dir: Path, files: list[Path], dirs: list[Path] | None = None) -> list[Path]:
    """The folder's `files`, then the headers they include from other folders its build names
    (`dirs`, header_dirs when None): a program built on another folder's kernels (examples/gemm_stencil)
    has its macros, kernels and static_asserts there."""
    dirs = header_dirs(program_dir) if dirs is None else dirs
    return files + included_headers(files, [program_dir, *dirs], outside=program_dir)


def program_sources(program_dir: Path) -> list[Path]:
    """The program's own source files, then the headers they include from the other folders its
    build names (with_included_headers): what init and validate read its macros and kernels from."""
    return with_included_headers(program_dir, source_files(program_dir))


def nearby_values(default: int) -> tuple[int, ...]:
    """The values near a macro's own that a guessed value of another may need it at (parameter_lines):
    its own first, then half and double for a power of two (half of 1 is none), the other of 0 and 1."""
    if default in (0, 1):
        return (default, 1 - default)
    if default & (default - 1) == 0:
        return (default, default // 2, 2 * default)
    return (default,)


def guess_values(default: int, allowed: Callable[[int], bool] = lambda v: True) -> tuple[str, list[int]]:
    """(type, values) from the default and `allowed` (the sources' rules, see parameter_lines): the values the
    rules keep, where they keep at most ENUMERATED small ones (`X == 1 || X == 4`, `M >= 0 && M <= 2`:
    a flag for 0 and 1, an enumeration where 0 is among them, sizes otherwise); else, for a power of two,
    the three powers of two nearest it they keep (half, itself and double where they say nothing),
    for 0/1 a flag, and the default alone otherwise."""
    lowest = 0 if default in (0, 1) else 1       # 0 only as a switch's or an enumeration's value
    small = [v for v in range(lowest, min(2 * default, SMALL_MOST) + 17) if v == default or allowed(v)]
    if len(small) <= ENUMERATED:
        if small == [0, 1]:
            return "flag", small
        return ("choice" if 0 in small else "size"), small       # sizes start at 1
    if default in (0, 1) and allowed(0) and allowed(1):
        return "flag", [0, 1]
    if default & (default - 1) == 0:
        ladder = [1 << i for i in range(max(0, default.bit_length() + 3))]
        kept = sorted((v for v in ladder if v == default or allowed(v)),
                      key=lambda v: (abs(v.bit_length() - default.bit_length()), -v))[:3]
        return "size", sorted(kept)
    return "size", [default]


def includes_conf(files: list[Path]) -> bool:
    return any("conf.cuh" in source_text(p) for p in files)


@reads_once
def starter(program_dir: Path, space_path: Path | None, kernels: list[str], kernels_from: str = "") -> str:
    """The starter space file's text, for a space file to be written at `space_path` (its
    target dir relative to it), or printed (None: the folder's absolute path)."""
    program_dir = Path(program_dir).resolve()
    files = source_files(program_dir)       # walked once: the macros, the flags, the kernels and rules read them
    makefiles = read_makefiles(program_dir)
    dirs = header_dirs(program_dir, makefiles)   # read from the build once: the headers and the flags look there
    sources = with_included_headers(program_dir, files, dirs)
    macros = scan_macros(program_dir, sources)
    kind, program = build_system(program_dir, makefiles)
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
    lines += [profile_line(program_dir, program, files, dirs),
              "  # verify: [\"{build}/my_check\"]   # FILL IN: a command that exits 1 on wrong results, or `verify: "
              "profile` if the program checks itself before timing",
              "  # events: [\"--json\", \"{events_json}\"]   # if it writes engine-timing/1 JSON (docs/bring-your-own.md)"]
    facts = read_sources(program_dir, sources, {m.name: m.default for m in macros})
    parameters, swept = parameter_lines(macros, facts, kernels)
    lines.append(strategy_line(swept))
    found = f" (from {kernels_from})" if kernels_from else ""
    lines.append(f"# kernels in the build{found}: " + (", ".join(kernels) if kernels else
                                                      "none found (build it, then run init again or validate --build)"))
    lines.append("parameters:")
    if not macros:
        lines.append("  # FILL IN: no `#ifndef NAME / #define NAME <integer>` defaults found in the sources")
        lines.append("  MY_BLOCK_SIZE: {values: [128, 256], default: 256, kernels: [my_kernel]}")
    lines += parameters
    lines += constraint_lines(facts)
    lines += ["build:",
              "  arch: auto                   # the GPU of the node that builds; or [sm_90]"]
    if macros and not includes_conf(sources):
        lines.append("  macros: define               # no source includes conf.cuh: each macro goes to nvcc as -DNAME=value")
    lines += ["profile:",
              "  backend: cupti               # or events (the program's own timing), nsys, ncu",
              "run:",
              "  warmup: 2",
              "  iterations: 20",
              ""]
    return "\n".join(lines)


def profile_line(program_dir: Path, program: str, files: list[Path], dirs: list[Path]) -> str:
    """The target's profile command: the program with the timing flags its sources (`files`, and the
    headers they include from `dirs`) name (sweep.space.run_flags), or with none and a FILL IN."""
    flags = read_run_flags(program_dir, files, dirs)
    words = json.dumps(flags.profile_words(program))
    if not flags.iterations:
        found = [f for f in (flags.warmup, flags.nvtx) if f]
        return (f"  profile: {words}   # FILL IN: how to time it (iterations: {{iterations}}, warm-up: {{warmup}})"
                + (f"; found {', '.join(found)} in {', '.join(flags.where)}" if found else ""))
    nvtx = "" if flags.nvtx else "; no --nvtx flag found: without NVTX ranges per iteration cupti times the run as one"
    return f"  profile: {words}   # CHECK: the flags its sources compare arguments with ({', '.join(flags.where)}){nvtx}"


def strategy_line(swept: list[tuple[int, set[str]]]) -> str:
    """The starter's strategy: factorized where the kernels: lists split the macros into groups
    that read different kernels (each group small enough to sweep whole), the grid for a small
    space, else auto (the learning strategy on a large one)."""
    groups: list[tuple[int, set[str]]] = []          # (product of the values, kernels) of macros sharing kernels
    for n, kernels in swept:
        joined = [g for g in groups if g[1] & kernels or not kernels or not g[1]]
        groups = [g for g in groups if g not in joined]
        groups.append((n * math.prod(g[0] for g in joined), kernels.union(*(g[1] for g in joined))))
    grid = math.prod(g[0] for g in groups)
    builds = max((g[0] for g in groups), default=1)
    if len(groups) > 1 and builds <= FACTORIZED_MOST:
        return (f"strategy: factorized          # {len(groups)} groups of macros read by different kernels: at most "
                f"{builds} builds instead of the grid's {grid:,} (CHECK the kernels: lists)")
    if grid <= 64:
        return f"strategy: grid                 # {grid} points: sweep them all"
    per_group = (f" with a model per group ({len(groups)} groups of macros read by different kernels, the "
                 f"largest {builds:,} points)" if len(groups) > 1 else "")
    return (f"strategy: auto                 # {grid:,} points: the learning strategy{per_group}, 100 evaluations "
            "at most (strategy: {name: learning, budget: N} to say how many)")


def parameter_lines(macros: list[Macro], facts: SourceFacts, kernels: list[str]
                    ) -> tuple[list[str], list[tuple[int, set[str]]]]:
    """The parameters section's lines, and each macro's number of values and kernels (for
    strategy_line). A value is guessed legal where it keeps every rule of the sources that names its
    macro, the others at the program's own values: each value guessed is legal at least there. Where
    that leaves one value, rules couple it to other macros (`(WM / TM) * (WN / TN) == 32` holds at the
    others' own values for one value of each) and a starter sweeping one value is no starter: its
    values are then those legal with the other macros the rules name at their own values or one
    power of two from them (nearby_values)."""
    own = {m.name: m.default for m in macros}
    nearby = {m.name: nearby_values(m.default) for m in macros}
    named = {r.expr: expr.names(r.expr) for r in facts.rules}
    naming = {m.name: [r for r in named if m.name in named[r]] for m in macros}

    def holds(rules: list[str], point: dict[str, int]) -> bool:
        try:
            return all(expr.evaluate(rule, point) for rule in rules)
        except (ArithmeticError, ValueError, TypeError):
            return False

    def keeps(name: str, value: int) -> bool:
        return holds(naming[name], {**own, name: value})

    def keeps_nearby(name: str, value: int) -> bool:
        rules = naming[name]
        if math.prod(len(nearby[o]) for o in others(rules, name)) <= NEARBY_MOST:
            return holds_near(rules, name, value)
        return all(holds_near([rule], name, value) for rule in rules)   # too many to try together

    def others(rules: list[str], name: str) -> list[str]:
        return sorted(set().union(*(named[r] for r in rules)) & own.keys() - {name})

    def holds_near(rules: list[str], name: str, value: int) -> bool:
        """The rules hold with the others they name at some combination of their nearby values
        (the first combination is their own values), NEARBY_MOST tried at most."""
        names = others(rules, name)
        combos = itertools.islice(itertools.product(*(nearby[o] for o in names)), NEARBY_MOST)
        return any(holds(rules, {**own, name: value, **dict(zip(names, combo))}) for combo in combos)

    lines, swept = [], []
    for m in macros:
        kind, values = guess_values(m.default, lambda v, name=m.name: keeps(name, v))
        if len(values) == 1 and len(guess_values(m.default)[1]) > 1:   # pinned by rules coupling it to others
            kind, values = guess_values(m.default, lambda v, name=m.name: keeps_nearby(name, v))
        typ = f", type: {kind}" if kind != "size" else ""
        governed, read = governed_kernels(facts.governs.get(m.name, ()), kernels)
        doc = f"{m.where}: {m.doc}" if m.doc else m.where
        unread = "" if read else "; no kernel reads it, so every kernel is listed: FILL IN"
        lines.append(f"  {m.name}: {{values: {values}{typ}, default: {m.default}, kernels: [{', '.join(governed)}]}}"
                     f"  # {doc}{unread}")
        swept.append((len(values), set(governed)))
    if macros:
        lines.append("  # CHECK each kernels: list: the kernels whose code, launch or template arguments read the macro,"
                     " as the sources say")
    return lines, swept


def governed_kernels(read_by: tuple[str, ...], built: list[str]) -> tuple[list[str], bool]:
    """(the kernels a macro's kernels: list names, whether the sources showed a kernel reading it):
    those of the build that read it; the sources' names where the build has none of them (or
    none was found); every kernel of the build where no kernel reads it."""
    if not read_by:
        return list(built), False
    in_build = [k for k in built if k in read_by]
    return (in_build or list(read_by)), True


def constraint_lines(facts: SourceFacts) -> list[str]:
    """The constraints section: the sources' static_asserts over the macros, translated, and a
    comment for each that could not be."""
    if not facts.rules:
        lines = ["constraints: []                # FILL IN the rules a legal point keeps, e.g. - expr: BX * BY <= 1024"]
    else:
        lines = ["constraints:                   # the sources' static_asserts: a point breaking one is skipped unbuilt"]
        for r in facts.rules:
            lines += [f"  - expr: {json.dumps(r.expr)}", f"    why: {json.dumps(r.why)}   # {r.where}"]
    for u in facts.untranslated:
        shown = u.text if len(u.text) <= 80 else u.text[:77] + "..."
        lines.append(f"  # {u.where}: static_assert({shown}) not translated ({u.reason}): FILL IN a rule if it "
                     "limits the macros")
    return lines
