"""The documentation's commands still run, and still print what the pages show.

Convention: a fenced block whose info string is ``console`` and whose opening fence
comes right after an HTML comment ``<!-- tested -->`` (on the line above; blank lines
between are allowed) is run by this test. The comment may carry ``exit=N`` when the
documented command is meant to fail (``<!-- tested exit=1 -->``); the default is 0.
Inside the block, a line starting with ``$ `` is a command and the lines up to the
next command are what it printed (stdout and stderr together, in order).

Commands start with ``config-sweep``; the test runs them as ``python config_sweep.py``
(the interpreter running the tests) in a scratch copy of the checkout (its code, examples,
spaces and the recordings of ``bench/data``), so whatever they write lands in that copy's
``jobs/`` and ``results/``, never in the repository.
Before a page's first block the copy's ``results/`` holds the recorded H100 sweeps
of ``tests/data/h100_sweep`` (``seed``, ``seed-events``, ``seed-ncu``, ``inference``)
and ``tests/data/toy_results/toy``; the blocks of one page run in order in one copy
(a later block sees what an earlier one left), each page in a copy of its own. No GPU
is visible to them (``CUDA_VISIBLE_DEVICES`` is empty).

Matching: the documented output is cut into chunks at lines that read ``...``; each
chunk's lines must appear as consecutive lines of what the command printed, the chunks
in order (so ``...`` stands for lines left out of the page, and the lines the page
shows may not be reordered or changed). Before comparing, both sides are normalised:
trailing whitespace is dropped, blank lines are ignored, the scratch copy's path reads
``...``, elapsed times (``0:45``) read ``M:SS`` and durations (``in 45 s``) read
``in N s``. Nothing else varies: a changed figure or message fails the test, and the
page is to be updated with the command's real output.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
MARK = re.compile(r"^<!--\s*tested(?:\s+exit=(\d+))?\s*-->\s*$")
COPIED = ("config_sweep.py", "sweep", "templates", "spaces", "examples", "gpt2_engine", "kernels", "bench/data")
RECORDED = [ROOT / "tests/data/h100_sweep" / name for name in ("seed", "seed-events", "seed-ncu", "inference")] + [
    ROOT / "tests/data/toy_results/toy"]


@dataclass
class Command:
    line: str
    expected: list[str] = field(default_factory=list)


@dataclass
class Block:
    page: Path
    lineno: int
    exit_code: int
    commands: list[Command]


def blocks_of(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        m = MARK.match(lines[i].strip())
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        assert j < len(lines) and lines[j].strip() == "```console", \
            f"{page}:{i + 1}: <!-- tested --> must come right before a ```console block"
        commands: list[Command] = []
        k = j + 1
        while k < len(lines) and lines[k].strip() != "```":
            if lines[k].startswith("$ "):
                commands.append(Command(lines[k][2:].strip()))
            else:
                assert commands, f"{page}:{k + 1}: a tested block starts with a `$ ` command"
                commands[-1].expected.append(lines[k])
            k += 1
        assert commands, f"{page}:{j + 1}: a tested block holds no `$ ` command"
        found.append(Block(page, j + 1, int(m.group(1) or 0), commands))
        i = k + 1
    return found


def normalise(text: str, workspace: Path | None = None) -> list[str]:
    if workspace is not None:
        for w in {str(workspace), str(workspace.resolve())}:
            text = text.replace(w, "...")
    out = []
    for line in text.splitlines():
        line = re.sub(r"\b\d+:\d\d\b", "M:SS", line.rstrip())
        line = re.sub(r"\bin \d+ s\b", "in N s", line)
        if line.strip():
            out.append(line)
    return out


def chunks(expected: list[str]) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for line in expected:
        if line.strip() == "...":
            parts.append([])
        else:
            parts[-1].extend(normalise(line))
    return [p for p in parts if p]


def find_in_order(actual: list[str], parts: list[list[str]]) -> str | None:
    """None when every chunk appears contiguously, in order; else the first chunk that does not."""
    start = 0
    for part in parts:
        for at in range(start, len(actual) - len(part) + 1):
            if actual[at:at + len(part)] == part:
                start = at + len(part)
                break
        else:
            return "\n".join(part)
    return None


def workspace(tmp: Path) -> Path:
    ws = tmp / "checkout"
    ws.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "jobs", "results")
    for name in COPIED:
        src = ROOT / name
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree(src, ws / name, ignore=ignore) if src.is_dir() else shutil.copy2(src, ws / name))
    for rec in RECORDED:
        shutil.copytree(rec, ws / "results" / rec.name)
    return ws


def argv(command: str, ws: Path) -> list[str]:
    words = shlex.split(command)
    assert words[0] == "config-sweep", f"a tested command starts with config-sweep: {command}"
    return [sys.executable, str(ws / "config_sweep.py"), *words[1:]]


PAGES_WITH_BLOCKS = [p for p in PAGES if blocks_of(p)]


def test_the_documentation_marks_commands_to_run():
    assert PAGES_WITH_BLOCKS, "no <!-- tested --> console block found under docs/ or in README.md"


@pytest.mark.parametrize("page", PAGES_WITH_BLOCKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_documented_commands_print_what_the_page_shows(page, tmp_path):
    ws = workspace(tmp_path)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", COLUMNS="100", PYTHONDONTWRITEBYTECODE="1")
    for block in blocks_of(page):
        for cmd in block.commands:
            where = f"{page.relative_to(ROOT)}:{block.lineno}: $ {cmd.line}"
            p = subprocess.run(argv(cmd.line, ws), cwd=ws, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=300)
            code = block.exit_code if cmd is block.commands[-1] else 0
            assert p.returncode == code, f"{where}\nexit {p.returncode}, documented {code}:\n{p.stdout[-3000:]}"
            missing = find_in_order(normalise(p.stdout, ws), chunks(cmd.expected))
            assert missing is None, (f"{where}\nthe page shows\n{missing}\nbut the command printed\n"
                                     + "\n".join(normalise(p.stdout, ws)))
