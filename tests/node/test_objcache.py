"""The object cache: content-addressed nvcc objects shared by job folders."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import needs_nvcc

TOY_TARGET = Path(__file__).resolve().parents[1] / "data" / "toy_target"

pytestmark = needs_nvcc
OBJCACHE = Path(__file__).resolve().parents[2] / "sweep" / "node" / "objcache.py"


def build(tmp: Path, name: str, conf: str, cache: Path, flags: str = "-O2") -> str:
    """make the toy target with `conf` as conf.cuh through the cache; returns make's output."""
    job = tmp / name
    job.mkdir()
    (job / "conf.cuh").write_text(conf)
    nvcc = f"{sys.executable} -I {OBJCACHE} --dir {cache} -- nvcc"
    p = subprocess.run(["make", "-C", str(TOY_TARGET), f"CONF_DIR={job}", f"BUILD_DIR={job}/build", f"NVCC={nvcc}",
                        f"NVCCFLAGS={flags}"], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout + p.stderr


def hits_misses(out: str) -> tuple[set[str], set[str]]:
    hits = {Path(l.split()[2]).name for l in out.splitlines() if l.startswith("objcache: hit")}
    misses = {Path(l.split()[2]).name for l in out.splitlines() if l.startswith("objcache: miss")}
    return hits, misses


def test_changing_one_macro_recompiles_only_the_objects_that_read_it(tmp_path):
    # BETA_Y is read by beta.cu and toy_bench.cu (which prints it), not by alpha.cu or toy_check.cu
    cache = tmp_path / "cache"
    first = build(tmp_path, "a", "#define ALPHA_BLOCK 64\n#define BETA_Y 1\n", cache)
    assert hits_misses(first) == (set(), {"alpha.o", "beta.o", "toy_bench.o", "toy_check.o"})
    second = build(tmp_path, "b", "#define ALPHA_BLOCK 64\n#define BETA_Y 4\n", cache)
    hits, misses = hits_misses(second)
    assert misses == {"beta.o", "toy_bench.o"} and hits == {"alpha.o", "toy_check.o"}


def test_cached_object_is_identical_to_a_fresh_compile_and_links(tmp_path):
    cache = tmp_path / "cache"
    build(tmp_path, "a", "#define ALPHA_BLOCK 64\n", cache)
    build(tmp_path, "b", "#define ALPHA_BLOCK 64\n// only a comment differs\n", cache)
    assert (tmp_path / "a/build/alpha.o").read_bytes() == (tmp_path / "b/build/alpha.o").read_bytes()
    assert subprocess.run([tmp_path / "b/build/toy_check"]).returncode == 0


def test_different_flags_miss_the_cache(tmp_path):
    cache = tmp_path / "cache"
    build(tmp_path, "a", "#define ALPHA_BLOCK 64\n", cache, flags="-O2")
    hits, misses = hits_misses(build(tmp_path, "b", "#define ALPHA_BLOCK 64\n", cache, flags="-O1"))
    assert hits == set() and "alpha.o" in misses


def test_hit_writes_the_dependency_file_make_asked_for(tmp_path):
    cache = tmp_path / "cache"
    build(tmp_path, "a", "#define ALPHA_BLOCK 64\n", cache)
    build(tmp_path, "b", "#define ALPHA_BLOCK 64\n", cache)
    dep = (tmp_path / "b/build/alpha.d").read_text()
    assert dep.startswith(str(tmp_path / "b/build/alpha.o") + ":")
    assert str(tmp_path / "b/conf.cuh") in dep and "common.h" in dep


def test_a_failing_compile_reports_the_compiler_error_and_caches_nothing(tmp_path):
    cache = tmp_path / "cache"
    src = tmp_path / "bad.cu"
    src.write_text("int f() { return undefined_name; }\n")
    p = subprocess.run([sys.executable, "-I", str(OBJCACHE), "--dir", str(cache), "--", "nvcc", "-c", str(src), "-o",
                        str(tmp_path / "bad.o")], capture_output=True, text=True)
    assert p.returncode != 0 and "undefined_name" in p.stderr
    assert not any(cache.rglob("*.o"))


# What both stand-ins for nvcc share: `--version` prints a version, `-E` the source.
NVCC_STAND_IN = r'''#!/usr/bin/env python3
import hashlib, sys, time
args = sys.argv[1:]
if "--version" in args:
    print("fake nvcc 1.0"); sys.exit(0)
src = next(a for a in args if a.endswith(".cu"))
text = open(src, "rb").read()
if "-E" in args:
    sys.stdout.buffer.write(text); sys.exit(0)
'''

# A stand-in for nvcc whose `-c SRC -o OUT` writes a 4 MiB object derived from SRC in 64 KiB pieces
# with pauses, so a writer that was not atomic would be caught half-way by the others.
FAKE_NVCC = NVCC_STAND_IN + r'''piece = hashlib.sha256(text).digest() * 2048
with open(args[args.index("-o") + 1], "wb") as f:
    for _ in range(64):
        f.write(piece); f.flush(); time.sleep(0.005)
'''


def test_many_concurrent_builders_of_one_object_share_one_whole_cache_entry(tmp_path):
    import hashlib
    import time

    nvcc = tmp_path / "nvcc"
    nvcc.write_text(FAKE_NVCC)
    nvcc.chmod(0o755)
    src = tmp_path / "kernel.cu"
    src.write_text("__global__ void k() {}\n")
    cache, n = tmp_path / "cache", 16
    expected = hashlib.sha256(src.read_bytes()).digest() * 2048 * 64

    def builders(wave: str, stagger_s: float) -> list[subprocess.Popen]:
        procs = []
        for i in range(n):
            procs.append(subprocess.Popen([sys.executable, "-I", str(OBJCACHE), "--dir", str(cache), "--", str(nvcc),
                                           "-O2", "-c", str(src), "-o", str(tmp_path / f"{wave}{i}.o")],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            time.sleep(stagger_s)
        return procs

    # staggered on an empty cache: the first ones compile and store while later ones find the entry
    # and copy it; then all at once on the full cache
    for wave, stagger_s in (("first", 0.04), ("second", 0.0)):
        procs = builders(wave, stagger_s)
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0] * n, outs
        for i in range(n):
            assert (tmp_path / f"{wave}{i}.o").read_bytes() == expected, f"{wave}{i}.o is not the whole object"
    entries = list(cache.rglob("*.o"))
    assert len(entries) == 1 and entries[0].read_bytes() == expected
    assert not [p for p in cache.rglob("*") if p.name.startswith(".tmp-")]  # no writer left a temporary file
    assert all("objcache: hit" in err for _, err in outs)


QUICK_NVCC = NVCC_STAND_IN + r'''open(args[args.index("-o") + 1], "wb").write(b"OBJECT:" + text)
'''


def test_a_corrupted_cache_entry_is_evicted_and_rebuilt_with_a_note_not_served(tmp_path):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(QUICK_NVCC)
    nvcc.chmod(0o755)
    src = tmp_path / "prog.cu"
    src.write_text("__global__ void k() {}\n")
    cache = tmp_path / "cache"

    def compile_(out: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-I", str(OBJCACHE), "--dir", str(cache), "--", str(nvcc), "-c",
                               str(src), "-o", str(tmp_path / out)], capture_output=True, text=True)

    assert "objcache: miss" in compile_("a.o").stderr
    [entry] = [p for p in cache.rglob("*.o") if p.is_file()]   # beside it: what the compile printed (.log)
    entry.write_bytes(b"OBJECT:garbage")                  # same size class, wrong bytes: a damaged copy
    p = compile_("b.o")
    assert p.returncode == 0 and "objcache: hit" not in p.stderr
    assert "damaged" in p.stderr and "evicted" in p.stderr and str(entry.name) in p.stderr
    assert (tmp_path / "b.o").read_bytes() == b"OBJECT:" + src.read_bytes()
    p = compile_("c.o")                                   # rebuilt: a good entry again
    assert "objcache: hit" in p.stderr and (tmp_path / "c.o").read_bytes() == (tmp_path / "b.o").read_bytes()


# A stand-in for nvcc that notes each compile in COMPILES (one line) and takes SLOW_S seconds
# over it, as a real translation unit does: so builders that start together overlap.
COUNTING_NVCC = NVCC_STAND_IN + r'''import os
with open(os.environ["COMPILES"], "a") as f:
    f.write(f"{os.getpid()}\n")
time.sleep(float(os.environ.get("SLOW_S", "0")))
open(args[args.index("-o") + 1], "wb").write(b"OBJECT:" + text)
'''


def counting_builder(tmp: Path, cache: Path, out: str, slow_s: float) -> subprocess.Popen:
    nvcc = tmp / "nvcc"
    if not nvcc.exists():
        nvcc.write_text(COUNTING_NVCC)
        nvcc.chmod(0o755)
        (tmp / "kernel.cu").write_text("__global__ void k() {}\n")
    env = {**os.environ, "COMPILES": str(tmp / "compiles.txt"), "SLOW_S": str(slow_s)}
    return subprocess.Popen([sys.executable, "-I", str(OBJCACHE), "--dir", str(cache), "--", str(nvcc), "-O2", "-c",
                             str(tmp / "kernel.cu"), "-o", str(tmp / out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_builders_missing_one_object_together_compile_it_once_and_the_others_wait_for_it(tmp_path):
    cache = tmp_path / "cache"
    procs = [counting_builder(tmp_path, cache, f"b{i}.o", slow_s=1.5) for i in range(4)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errs
    assert len((tmp_path / "compiles.txt").read_text().splitlines()) == 1      # one compile for the four
    assert sum("objcache: miss" in e for e in errs) == 1
    waited = [e for e in errs if "waiting for another build compiling it" in e]
    assert len(waited) == 3 and all("objcache: hit" in e for e in waited)
    assert {(tmp_path / f"b{i}.o").read_bytes() for i in range(4)} == {b"OBJECT:__global__ void k() {}\n"}


def test_a_builder_killed_while_compiling_does_not_hold_up_the_next(tmp_path):
    cache = tmp_path / "cache"
    stuck = counting_builder(tmp_path, cache, "stuck.o", slow_s=600)
    deadline = time.monotonic() + 60
    while not (tmp_path / "compiles.txt").is_file() and time.monotonic() < deadline:
        time.sleep(0.05)     # compiling, so holding the entry's lock
    stuck.kill()             # kill -9: the kernel drops its lock (its stand-in compiler lingers on, lockless)
    stuck.communicate()
    t0 = time.monotonic()
    nxt = counting_builder(tmp_path, cache, "next.o", slow_s=0)
    _, err = nxt.communicate(timeout=60)
    assert nxt.returncode == 0 and "objcache: miss" in err, err
    assert time.monotonic() - t0 < 30 and (tmp_path / "next.o").read_bytes().startswith(b"OBJECT:")


def test_a_builder_that_waited_past_its_limit_compiles_the_object_itself_and_says_so(tmp_path, monkeypatch, capsys):
    import fcntl

    from sweep.node import objcache

    cache, key = tmp_path / "cache", "ab" * 32
    (cache / key[:2]).mkdir(parents=True)
    with open(cache / key[:2] / f"{key}.lock", "w") as other:     # another builder holds it, and never lets go
        fcntl.flock(other, fcntl.LOCK_EX)
        monkeypatch.setattr(objcache, "WAIT_FOR_OTHER_S", 0.3)
        with objcache._compile_lock(cache, key) as waited_s:
            assert waited_s >= 0.3
    assert "gave up waiting after" in capsys.readouterr().err


# The counting stand-in, failing: each compile notes its start and end and fails after SLOW_S.
FAILING_NVCC = NVCC_STAND_IN + r'''import os
start = time.time()
time.sleep(float(os.environ.get("SLOW_S", "0")))
with open(os.environ["COMPILES"], "a") as f:
    f.write(f"{start} {time.time()}\n")
print("kernel.cu(1): error: a shared header is broken", file=sys.stderr)
sys.exit(2)
'''


def test_builders_waiting_on_a_compile_that_fails_then_compile_together_not_one_after_another(tmp_path):
    (tmp_path / "nvcc").write_text(FAILING_NVCC)      # counting_builder keeps a stand-in already there
    (tmp_path / "nvcc").chmod(0o755)
    (tmp_path / "kernel.cu").write_text("__global__ void k() {}\n")
    cache = tmp_path / "cache"
    procs = [counting_builder(tmp_path, cache, f"b{i}.o", slow_s=1.5) for i in range(4)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [2] * 4 and all("a shared header is broken" in e for e in errs)
    spans = sorted(tuple(map(float, line.split())) for line in (tmp_path / "compiles.txt").read_text().splitlines())
    assert len(spans) == 4                                  # each builder compiled it: a failure is not served
    first, waiters = spans[0], spans[1:]
    assert all(start >= first[1] for start, _ in waiters)  # they waited for the first compile...
    assert max(start for start, _ in waiters) < min(end for _, end in waiters)   # ...then compiled at once
    assert not list(cache.rglob("*.o"))
