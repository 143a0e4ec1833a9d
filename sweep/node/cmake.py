"""Build one configuration of a CMake target, configuring the project once per sweep:

    python3 cmake.py --source DIR --trees JOBS/SWEEP/_cmake --job JOB_DIR --target NAME
                     --arch "sm_90" --objcache OBJCACHE.py --cache DIR [--cmake-arg -DX=Y]... [--flag WORD]... [-j N]

A job folder's Makefile (templates/Makefile.j2, for `target: {build: cmake}`) runs it.

Configure once: the first build of a sweep (for these architectures, cmake arguments
and CMake files) runs `cmake -S DIR -B <trees>/<key>` with the object cache as
CMAKE_CUDA_COMPILER_LAUNCHER; every later one reuses that tree. CMake's compiler
identification is most of a configure's time (about 20 s on a busy 2-core machine), so it
is paid once, not per configuration. The configure runs in a private folder renamed into
place (builds on several nodes may race; the first rename wins) and, on one host, under
an flock so parallel builds wait for one configure instead of running their own.

Build each: the configured tree is copied into the job's build/cmake/ and relocated (its
Makefiles, cache and install script name its folder: the copy's path replaces it, the
files' times kept so CMake sees nothing to regenerate), skipping CMake's
compiler-identification folders (their objects are not the configuration's). The
launcher reads the copy's sweep_flags.json and puts those words first on every nvcc
compile: `-I JOB_DIR` (the configuration's conf.cuh, found before the project's own
headers), the macros as -DNAME=value with build.macros: define, and build.nvcc_flags.
Then `cmake --build build/cmake --target NAME`, and the program is copied to build/NAME.

Stdlib only: it runs on build nodes with nothing but python3, like objcache.py.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ORIGIN = ".sweep_origin"          # the folder the tree was configured in (its files name it)
FLAGS = "sweep_flags.json"        # the words the launcher puts first on each compile
SKIP = ("CompilerIdCUDA", "CompilerIdCXX", "CompilerIdC", "CMakeScratch", "CMakeTmp")
TEXT_LIMIT = 8 << 20              # larger files are not CMake's text: copied as they are


def cuda_architectures(arch: str) -> str:
    """"sm_80 sm_90a" -> "80;90a" (CMAKE_CUDA_ARCHITECTURES)."""
    return ";".join(a.removeprefix("sm_") for a in arch.split())


def cmake_files_digest(source: Path) -> str:
    """The CMake files' content: a changed CMakeLists.txt gets a fresh configure."""
    h = hashlib.sha256()
    for p in sorted(source.rglob("*")):
        if p.is_file() and (p.name == "CMakeLists.txt" or p.suffix == ".cmake"):
            h.update(str(p.relative_to(source)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def tree_key(source: Path, archs: str, cmake_args: list[str], launcher: list[str]) -> str:
    blob = json.dumps([str(source), archs, cmake_args, launcher, cmake_files_digest(source)])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def configure(source: Path, trees: Path, archs: str, cmake_args: list[str], launcher: list[str]) -> Path:
    """The configured tree for these settings, configuring it when there is none yet."""
    trees.mkdir(parents=True, exist_ok=True)
    tree = trees / tree_key(source, archs, cmake_args, launcher)
    with open(trees / f"{tree.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)        # one configure per host at a time; the others wait for it
        if (tree / ORIGIN).is_file():
            return tree
        tmp = trees / f"{tree.name}.tmp-{os.uname().nodename}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = ["cmake", "-S", str(source), "-B", str(tmp), "-G", "Unix Makefiles",
               f"-DCMAKE_CUDA_ARCHITECTURES={archs}",
               "-DCMAKE_CUDA_COMPILER_LAUNCHER=" + ";".join(launcher + ["--job-flags", str(tmp / FLAGS), "--"]),
               *cmake_args]
        print("$ " + " ".join(cmd), flush=True)
        rc = subprocess.run(cmd, stdout=sys.stdout, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise SystemExit(f"cmake configure failed (exit {rc}): see the lines above")
        (tmp / ORIGIN).write_text(str(tmp))
        try:
            os.rename(tmp, tree)                # atomic: another node's tree, if it won, stays whole
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
        return tree


def relocate(tree: Path, dst: Path) -> None:
    """Copy the configured tree to dst, its own path replaced by dst's in every text file."""
    origin = (tree / ORIGIN).read_text().encode()
    for src in sorted(tree.rglob("*")):
        rel = src.relative_to(tree)
        if any(part in SKIP for part in rel.parts) or src.name == ORIGIN:
            continue
        out = dst / rel
        if src.is_dir():
            out.mkdir(parents=True, exist_ok=True)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        st = src.stat()
        data = src.read_bytes() if st.st_size <= TEXT_LIMIT else None
        if data is not None and origin in data and b"\0" not in data:
            out.write_bytes(data.replace(origin, str(dst).encode()))
            os.chmod(out, st.st_mode & 0o7777)
        else:
            shutil.copy2(src, out)
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))   # CMake regenerates when its inputs look newer


def find_program(tree: Path, name: str) -> Path | None:
    """The target's executable in the build tree (its top, else wherever RUNTIME_OUTPUT_DIRECTORY put it)."""
    top = tree / name
    if top.is_file() and os.access(top, os.X_OK):
        return top
    found = [p for p in tree.rglob(name) if p.is_file() and os.access(p, os.X_OK) and "CMakeFiles" not in p.parts]
    return found[0] if found else None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cmake.py")
    ap.add_argument("--source", required=True, type=Path)
    ap.add_argument("--trees", required=True, type=Path)
    ap.add_argument("--job", required=True, type=Path)
    ap.add_argument("--target", required=True)
    ap.add_argument("--arch", required=True)
    ap.add_argument("--objcache", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--cmake-arg", action="append", default=[])
    ap.add_argument("--flag", action="append", default=[])
    ap.add_argument("-j", type=int, default=0)
    a = ap.parse_args(argv)
    if not shutil.which("cmake"):
        print("error: cmake is not installed on this machine; install it (or load its module) where jobs build",
              file=sys.stderr)
        return 2
    launcher = [a.python, "-I", a.objcache, "--dir", a.cache]
    tree = configure(a.source.resolve(), a.trees.resolve(), cuda_architectures(a.arch), a.cmake_arg, launcher)
    job = a.job.resolve()
    dst = job / "build" / "cmake"
    if not (dst / "CMakeCache.txt").is_file():
        shutil.rmtree(dst, ignore_errors=True)
        relocate(tree, dst)
    flags = json.dumps(["-I", str(job), *a.flag])
    if not (dst / FLAGS).is_file() or (dst / FLAGS).read_text() != flags:
        (dst / FLAGS).write_text(flags)          # new words: the objects compiled with the old ones go
        for obj in dst.rglob("*.o"):
            obj.unlink()
    cmd = ["cmake", "--build", str(dst), "--target", a.target, "-j", str(a.j or len(os.sched_getaffinity(0)))]
    print("$ " + " ".join(cmd), flush=True)
    rc = subprocess.run(cmd, stdout=sys.stdout, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        return rc
    program = find_program(dst, a.target)
    if program is None:
        print(f"error: cmake built target {a.target} but no executable named {a.target} is in {dst}; "
              "set cmake_target to the add_executable() the space's commands run", file=sys.stderr)
        return 2
    shutil.copy2(program, job / "build" / a.target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
