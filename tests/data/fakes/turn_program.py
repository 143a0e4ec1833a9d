#!/usr/bin/env python3
"""A CUDA program under the CUPTI injection library in turn mode, without a GPU: speaks the
library's side of the turn protocol (cupti_inject.cpp's header: "ready N" / "go" / "flush" /
"stop" / "done N GO DONE" on the fds of $SWEEP_CUPTI_TURN) and writes what the library
writes to $SWEEP_CUPTI_OUT: the header, a clock pair, a `turn` record per turn, and the
kern records of each turn's iteration between its go and done times, held back as CUPTI
holds them until a "flush", a "stop" or the end.

    turn_program.py [--iterations N] [--replay CAPTURE] [--kernel NAME=NS ...] [--scale X]
                    [--noise X] [--process-sd X] [--seed N] [--turn-log FILE] [--no-range]
                    [--error WORDS] [--startup-s S] [--crash-in N] [--max-alive N --alive-dir DIR]

--replay CAPTURE  a real turn-mode capture recorded on an H100 (tests/data/h100/lockstep/):
                  turn i writes that capture's kernels of its turn i (times shifted to now)
--kernel NAME=NS  else, a kernel launched once per iteration, NS long (before --scale and --noise)
--scale X         every kernel X times as long (a slower configuration)
--noise X         relative noise of each kernel's time (normal, sd X), seeded by --seed
--process-sd X    an offset of this process's own on every kernel's time (normal, sd X, drawn
                  once a process): what a process adds on a real GPU
--turn-log FILE   appends "<pid> <start_ns> <end_ns>" for each turn (wall clock), for tests
                  that two programs never had the GPU at once
--no-range        a program with no NVTX iteration range: runs without ever waiting, exits 0
--error WORDS     says "error WORDS" instead of "ready" and waits for "stop" (no CUDA context)
--startup-s S     sleeps S seconds before the first iteration (a program's start-up)
--crash-in N      dies (exit 3) inside turn N
--max-alive N     exits 1 at start-up ("out of memory") when more than N processes given the same
--alive-dir DIR   --alive-dir are running (each leaves a file there while it runs)
"""
import argparse
import os
import random
import sys
import time
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--iterations", type=int, default=10)
ap.add_argument("--replay")
ap.add_argument("--kernel", action="append", default=[])
ap.add_argument("--scale", type=float, default=1.0)
ap.add_argument("--noise", type=float, default=0.0)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--turn-log")
ap.add_argument("--no-range", action="store_true")
ap.add_argument("--error")
ap.add_argument("--startup-s", type=float, default=0.0)
ap.add_argument("--crash-in", type=int, default=-1)
ap.add_argument("--process-sd", type=float, default=0.0)
ap.add_argument("--max-alive", type=int, default=0)
ap.add_argument("--alive-dir")
a, _ = ap.parse_known_args()
if a.alive_dir:
    me = Path(a.alive_dir) / str(os.getpid())
    me.touch()
    alive = [f for f in Path(a.alive_dir).iterdir() if f.name.isdigit() and Path(f"/proc/{f.name}").exists()]
    if a.max_alive and len(alive) > a.max_alive:
        print("out of memory", file=sys.stderr)
        sys.exit(1)

out = open(os.environ["SWEEP_CUPTI_OUT"].replace("%p", str(os.getpid())), "w")
write = lambda line: (out.write(line + "\n"), out.flush())   # noqa: E731
held = []        # kern lines CUPTI would still hold in its buffers


def flush() -> None:
    for line in held:
        write(line)
    held.clear()
now = time.time_ns
write(f"sweep-cupti/2\tpid={os.getpid()}\tcupti_api=0\tstart_ns={now()}\texe={sys.argv[0]}")
t = now()
write(f"clock\t{t}\t{t}")        # this fake's CUPTI clock is the wall clock

if a.replay:     # the recorded kernels of each turn (those between its go and done), and its go and done
    windows, names, kern = [], {}, []
    for line in Path(a.replay).read_text().splitlines():
        f = line.split("\t")
        if f[0] == "name":
            names[f[1]] = line
        elif f[0] == "kern":
            kern.append(f)
        elif f[0] == "turn":
            windows.append((int(f[2]), int(f[3])))
    turns = [([k for k in kern if go <= int(k[2]) and int(k[3]) <= done], go, done) for go, done in windows]
    for line in names.values():
        write(line)
else:
    kernels = [k.split("=") for k in a.kernel] or [["fake_kernel", "10000"]]
    for i, (name, _) in enumerate(kernels):
        write(f"name\t{i}\t_Z{len(name)}{name}v\tvoid {name}()")
# Seeded by --seed and the capture's name (lockstep_<process number>.txt): each process its own
# draws, the same ones every time the same race runs.
process = int("".join(c for c in Path(os.environ["SWEEP_CUPTI_OUT"]).stem if c.isdigit()) or 0)
rng = random.Random(a.seed * 1_000_003 + process)
offset = 1 + a.process_sd * random.Random(a.seed * 7919 + process + 1).gauss(0, 1)
written = 0

if a.no_range:
    sys.exit(0)
turn_spec = os.environ.get("SWEEP_CUPTI_TURN", "")
rfd, wfd = (int(x) for x in turn_spec.split(","))
inbox = os.fdopen(rfd, "r")


def say(word: str) -> None:
    os.write(wfd, (word + "\n").encode())


def stop() -> None:
    flush()
    write(f"end\tkernels={written}\tcalls=0\tmarks=0\tdropped=0\tfails=0")
    sys.exit(0)


def wait_for_go() -> bool:
    while True:
        order = inbox.readline().strip()
        if order != "flush":
            return order == "go"
        flush()
        say("flushed")


if a.error:
    say(f"error {a.error}")
    while inbox.readline().strip() not in ("stop", ""):
        pass
    stop()
time.sleep(a.startup_s)
iterations = len(turns) if a.replay else a.iterations
for n in range(iterations):
    say(f"ready {n}")
    if not wait_for_go():
        stop()
    go = now()
    if n == a.crash_in:
        sys.exit(3)
    t = go + 1000
    if a.replay:
        recorded, rgo, _ = turns[n]
        for k in recorded:
            shift = go - rgo
            held.append("\t".join(k[:2] + [str(int(k[2]) + shift), str(int(k[3]) + shift)] + k[4:]))
            written += 1
        t = max([go] + [int(k[3]) + shift for k in recorded])
    else:
        for i, (_, ns) in enumerate(kernels):
            dur = max(1, int(float(ns) * a.scale * offset * (1 + a.noise * rng.gauss(0, 1))))
            held.append(f"kern\t{written}\t{t}\t{t + dur}\t0\t1\t7\t4\t1\t1\t128\t1\t1\t32\t0\t0\t0\t{i}")
            written += 1
            t += dur + 500
    while now() < t:      # the GPU is busy as long as the kernels run
        pass
    done = now()
    if a.turn_log:
        with open(a.turn_log, "a") as f:
            f.write(f"{os.getpid()} {go} {done}\n")
    write(f"turn\t{n}\t{go}\t{done}")
    say(f"done {n} {go} {done}")
stop()
