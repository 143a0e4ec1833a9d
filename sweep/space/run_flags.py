"""The timing flags a program's sources compare its arguments with, for `config-sweep init`'s
profile command: how many iterations to time, how many to run first untimed, and whether to mark
each iteration with an NVTX range (the cupti and nsys backends then time each iteration apart, so
a sweep sees the noise between them). `--nvtx` is taken only where the program's own files name it
(in their parsing or their usage text) and the sources open an NVTX range (`nvtxRangePushA(...)`,
`nvtx3::scoped_range`): a shared header can parse the flag for the programs that take it and refuse
it for the others (examples/stencil_cmake exits 2 on `--nvtx`; every configuration of a starter that
passed it failed so on an H200).

What it reads: the string literals `"--iters"`, `"--warmup"`, `"--nvtx"` (and their usual
spellings; `"--iters="` for a flag that takes its value in the same word) in the program's
sources and the headers they include with `#include "..."`, found beside the including file, in
the program's folder, or in a folder its build puts on the include path (sweep.space.init's
header_dirs: examples/common/run_options.cuh, which every example includes, parses them). A literal is a reading, not a proof: the starter
marks the command CHECK. Nothing is built or run.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from sweep.space.source_text import source_text

ITERATIONS = ("--iters", "--iterations", "--iter", "--repeat", "--repeats", "--reps", "--runs")
WARMUP = ("--warmup", "--warmups", "--warm-up", "--warmup-iters")
NVTX = ("--nvtx",)
FLAG_LITERAL = re.compile(r'"(--[A-Za-z][A-Za-z0-9-]*=?)"')
NVTX_RANGE = re.compile(r"\bnvtx(?:Domain)?Range(?:Push|Start)(?:A|W|Ex)?\s*\(|\bnvtx3::scoped_range")
NVTX_WORD = re.compile(r"(?<![\w-])--nvtx\b")
QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"(?P<path>[^"\n]+)"', re.M)
MOST_HEADERS = 200            # headers followed beyond the program's own files


@dataclass(frozen=True, slots=True)
class RunFlags:
    """The flags found, each as the program spells it ("" where none was), and the files they were in."""
    iterations: str = ""
    warmup: str = ""
    nvtx: str = ""
    where: tuple[str, ...] = ()

    def profile_words(self, program: str) -> list[str]:
        """The profile command: the program, the flags found with their placeholders, then {args}."""
        words = [f"{{build}}/{program}"]
        if self.nvtx:
            words.append(self.nvtx)
        for flag, value in ((self.iterations, "{iterations}"), (self.warmup, "{warmup}")):
            if flag:
                words += [flag + value] if flag.endswith("=") else [flag, value]
        return words + ["{args}"]


def read_run_flags(program_dir: Path, files: list[Path], header_dirs: list[Path] = ()) -> RunFlags:
    """The timing flags the program's sources (`files`) and the headers they include name;
    header_dirs: the folders besides the program's own its build finds headers in."""
    program_dir = Path(program_dir)
    dirs = [program_dir, *header_dirs]
    found: dict[str, Path] = {}
    own = {p.resolve() for p in files}
    ranges = named = False
    for path, text in _with_headers(files, dirs):
        for m in FLAG_LITERAL.finditer(text):
            found.setdefault(m.group(1), path)
        ranges = ranges or bool(NVTX_RANGE.search(text))
        named = named or path.resolve() in own and bool(NVTX_WORD.search(text))

    def first(names: tuple[str, ...]) -> str:
        return next((f for n in names for f in (n, n + "=") if f in found), "")

    # --nvtx only where the program's own files name it (its parsing or its usage text) and some
    # file opens an NVTX range: a shared header that parses it may refuse it for this program
    flags = {"iterations": first(ITERATIONS), "warmup": first(WARMUP), "nvtx": first(NVTX) if ranges and named else ""}
    where = sorted({_shown(found[f], program_dir) for f in flags.values() if f})
    return RunFlags(**flags, where=tuple(where))


def _with_headers(files: list[Path], dirs: list[Path]):
    """(path, text) of each file, then of each header a quoted include names that resolves (from the
    including file's folder, then `dirs`), each once, MOST_HEADERS of them at most."""
    queue, seen, headers = list(files), {p.resolve() for p in files}, 0
    while queue:
        path = queue.pop(0)
        try:
            text = source_text(path)
        except OSError:
            continue
        yield path, text
        for m in QUOTED_INCLUDE.finditer(text):
            name = m.group("path")
            for base in [path.parent, *dirs]:
                header = (base / name).resolve()
                if header.is_file():
                    if header not in seen and headers < MOST_HEADERS:
                        seen.add(header)
                        headers += 1
                        queue.append(header)
                    break


def included_headers(files: list[Path], dirs: list[Path], outside: Path) -> list[Path]:
    """The headers `files` include (quoted, resolved as _with_headers does) that lie outside the
    folder `outside`: those inside are among a folder's own files already."""
    own = {p.resolve() for p in files}
    return [p for p, _ in _with_headers(files, dirs)
            if p.resolve() not in own and not p.resolve().is_relative_to(Path(outside).resolve())]


def _shown(path: Path, program_dir: Path) -> str:
    """A path as the starter's comment names it: relative to the program's folder."""
    return os.path.relpath(path.resolve(), program_dir.resolve())
