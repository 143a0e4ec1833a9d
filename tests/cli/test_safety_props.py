"""Property: whatever a space file or the command line holds (shell and make metacharacters
in names, macros, values, make targets, nvcc flags, the target's folder, the jobs and results
folders), a dry run ends with 0 or 1, never a traceback, and changes nothing outside the
sweep's own jobs and results folders.

The dry run is the CLI's, in-process, on a copy of the CPU toy target, with make and the
object cache for real; only nvcc is a stand-in that writes its -o file (a real compile
takes tens of seconds and reads nothing the shell could misread that make does not).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import TOY_TARGET, toy_space_dict
from sweep import cli

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

PAYLOADS = [";", "$", "`", "'", '"', "#", "\n", "\t", ":", "%", "\\", " ", "..", "/", "$(touch pwned)",
            "`touch pwned`", "; touch pwned;", "\n\ttouch pwned", "$$", "&&", "|", "*", "=", "-"]
MAKE_PAYLOADS = [p for p in PAYLOADS if p not in ("-", "/", "..")]   # "a-b", "a/b": valid target names
WORDS = ["a", "all", "B2", "x_y", "-O2", "v.1"]
FAKE_NVCC = """#!/bin/sh
# stands in for nvcc: writes the file after -o, prints something for -E and --version
out=""
prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out="$a"
  case "$a" in -E) echo "int x;"; exit 0;; --version) echo "fake nvcc"; exit 0;; esac
  prev="$a"
done
[ -n "$out" ] && : > "$out" && chmod +x "$out"
exit 0
"""


def text(min_size: int = 1):
    """Words with metacharacters mixed in (sometimes none: a plain, valid word)."""
    return st.lists(st.sampled_from(WORDS + PAYLOADS), min_size=min_size, max_size=3).map("".join)


PLAIN = {"name": "toy", "macro": "ALPHA_BLOCK", "values": [64], "nvcc_flags": ["-O2"], "make_targets": ["all"],
         "target_dir": "toy_target", "jobs": "jobs", "results": "results"}


@st.composite
def cases(draw):
    """A plain, valid toy space with one or two fields (or none) holding metacharacters:
    each field's way to make and the shell is tried on its own, and some runs build."""
    poisoned = draw(st.lists(st.sampled_from(sorted(PLAIN)), max_size=2, unique=True))
    f = dict(PLAIN)
    for key in poisoned:
        if key == "make_targets":     # a plain word would be a target the toy Makefile lacks (exit 3, rightly)
            f[key] = draw(st.lists(st.tuples(text(0), st.sampled_from(MAKE_PAYLOADS), text(0)).map("".join),
                                   min_size=1, max_size=3))
        elif key == "nvcc_flags":
            f[key] = draw(st.lists(text(), min_size=1, max_size=3))
        elif key == "values":
            f[key] = draw(st.lists(st.one_of(st.integers(1, 1024), text()), min_size=1, max_size=2, unique=True))
        else:
            f[key] = draw(text())
    d = toy_space_dict()
    d["name"] = f["name"]
    d["parameters"] = {f["macro"]: {"tag": "A", "values": f["values"], "kernels": ["alpha_kernel"]}}
    d["build"] = {"arch": ["sm_90"], "nvcc_flags": f["nvcc_flags"], "make_targets": f["make_targets"]}
    return d, f["target_dir"], f["jobs"], f["results"]


def snapshot(root: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for p in root.rglob("*"):
        out[str(p)] = os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else "dir"
    return out


def _under(path: str, roots: list[Path]) -> bool:
    p = Path(path)
    return any(p == r or r in p.parents for r in roots)


@hypothesis.settings(max_examples=int(os.environ.get("SAFETY_FUZZ_EXAMPLES", 25)), deadline=None, database=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(case=cases())
def test_a_dry_run_of_any_space_exits_0_or_1_without_a_traceback_and_touches_nothing_outside_its_folders(case):
    space, target_dir, jobs_name, results_name = case
    with tempfile.TemporaryDirectory() as tmp:
        sandbox = Path(tmp) / "sandbox"
        work = sandbox / "work"
        bin_dir = Path(tmp) / "bin"
        for d in (sandbox, work, bin_dir):
            d.mkdir(parents=True, exist_ok=True)
            (d / "SENTINEL").write_text("must survive")
        (bin_dir / "nvcc").write_text(FAKE_NVCC)
        (bin_dir / "nvcc").chmod(0o755)
        src = work / target_dir
        try:
            shutil.copytree(TOY_TARGET, src, ignore=shutil.ignore_patterns("build"))
        except (OSError, shutil.Error):
            hypothesis.assume(False)   # a folder name the filesystem itself refuses ('..', '/')
        space["target"]["dir"] = str(src)
        (work / "space.yaml").write_text(yaml.safe_dump(space, sort_keys=False))
        before = snapshot(Path(tmp))
        jobs, results = work / jobs_name, work / results_name
        err, old_path = io.StringIO(), os.environ["PATH"]
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{old_path}"
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                rc = cli.main(["run", str(work / "space.yaml"), "--dry-run", "--executor", "debug", "--no-report",
                               "--jobs-dir", str(jobs), "--results-dir", str(results)])
        finally:
            os.environ["PATH"] = old_path
        after = snapshot(Path(tmp))
        hypothesis.event(f"exit {rc}")
        assert rc in (0, 1), err.getvalue()[-2000:]
        assert "Traceback" not in err.getvalue()
        roots = [Path(os.path.abspath(jobs)), Path(os.path.abspath(results))]
        changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
        outside = {p for p in changed if not _under(p, roots)}
        assert not outside, (sorted(outside)[:5], err.getvalue()[-500:])
        assert not any(p for p in changed if p.endswith("SENTINEL") or Path(p).name == "pwned")
        assert all(before.get(p) == after.get(p) for p in before if _under(p, [src]) and not _under(p, roots))
