"""Lockstep: the race's programs take turns on one GPU, a few timed iterations each, in fresh processes.

Why. A race (sweep.node.race) wants paired samples of its entrants, taken close
together in time, one per round. One run of each program after another pays
every program's start-up in turn: for the engine at batch 4 x 64 about 97% of a
run is process start, CUDA context, weights and warm-up (shared/FACTS.md), and
the profiler's own start-up comes on top (nsys about 4 s a run). In lockstep the
programs of many rounds start at once, under the CUPTI injection library in
turn mode (cupti_inject.cpp, SWEEP_CUPTI_TURN), so their start-ups overlap; each
stops at the start of its first timed iteration (its NVTX "iteration" range)
and waits until it is given a turn.

Why a fresh process every round. A process carries an offset of its own: on an
H100, four copies of one engine build, one process each and 40 iterations each,
had residual_kernel medians up to 7.5% apart while one process's iterations
varied by 0.8% (bench/lockstep_copies.py), most likely where its buffers landed
in memory. Paired iteration by iteration inside one process per entrant, a race
took those offsets for differences between launch sizes and "certified" one copy
of the same program over another in 20 of 21 races. The round is therefore a
process, as a run was before lockstep: round r gives each entrant a process of
its own, which takes `turns` turns (3 by default; the sample is their median),
so what a process adds is in the rounds' spread, where the race's test weighs it.

A round. Its processes take their turns pass after pass, in the order the race
asks for (rotated each round): A B C D, A B C D, ... Each turn runs one
iteration alone on the GPU while every other process waits at the start of an
iteration with its GPU work finished (the library synchronises its context
before it says "ready" and after the iteration, and the next turn is given only
once the process that had one waits again). A process that took its turns
waits at its next iteration until its batch (the rounds started together) is
done, then is stopped ("stop": the library flushes its records and ends it).

What a turn measures: the kernels that ran on the GPU between the turn's go and
done times (the library says them with "done"), each timed on its stream
(cupti_parse.turn_launches): that iteration's kernels and nothing else, since
no other kernel of any process ran then. Its window on the wall clock judges it
throttled or not at once; its kernels are read later (`sample`), when the race
looks at its rounds: each waiting process is asked to flush what CUPTI holds
("flush"), and its capture is read as it grew (cupti_file.Follower). A turn
thus costs two context synchronisations and a few words on a pipe.

When lockstep cannot be used (LockstepUnavailable): a program that ends, fails
or says "error" before its first turn (it opens no NVTX iteration range the
library can stop it at, opens it on a thread without a CUDA context, or fails
at start-up). A batch of several rounds that fails to start is tried again as
one round first (many processes at once may not fit the GPU's memory). The race
then takes one run of each program per sample, as before lockstep.

Throttling: the whole race is watched (clocks.Monitor); a round in which a turn
ran under 75% of the default SM clock (clocks.Series.iteration_clocks over the
turns' windows) is dropped, counted, and taken again after a pause (at most
sampling.MAX_THROTTLED times in a row; then it is kept and counted as kept).
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import select
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.core import safe
from sweep.node import clocks, group
from sweep.core.errors import SweepError
from sweep.profile import Measurement, Window, aggregate, cupti
from sweep.profile.cupti_file import Follower, KernelRecord, to_realtime
from sweep.profile.cupti_parse import turn_launches
from sweep.node.sampling import MAX_THROTTLED, PAUSE_S

ENV_TURN = "SWEEP_CUPTI_TURN"      # "<read fd>,<write fd>": the library's end of the coordinator's pipes
ENV_RANGE = "SWEEP_CUPTI_RANGE"    # the NVTX range that is one timed iteration
STOP_S = 10.0                      # a stopped program's time to flush and end before it is killed


class LockstepUnavailable(SweepError):
    """A program cannot take turns (see the module docstring); the race falls back to one run a sample."""


@dataclass(frozen=True, slots=True)
class Program:
    """One program of the race: its key (the job's tag; "<tag>/<workload>" with workloads), its
    timing command, the injection library, where its files go, and its NVTX iteration range."""

    key: str
    command: tuple[str, ...]
    library: Path
    folder: Path
    iteration_range: str = "iteration"


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn: iteration `index` of the program's process `start` (the Lockstep's count of
    processes started when it began), from go_ns to done_ns (CUPTI ns), and that window on the
    wall clock (None: unknown). What it ran: Lockstep.sample."""

    key: str
    start: int
    index: int
    go_ns: int
    done_ns: int
    window: Window | None


class Player:
    """One program's process in turn mode: its pipes, its turns, its capture followed as it grows."""

    def __init__(self, program: Program, start: int):
        self.program, self.start = program, start
        program.folder.mkdir(parents=True, exist_ok=True)
        self.capture = program.folder / f"lockstep_{start}.txt"
        self.capture.unlink(missing_ok=True)
        self.log = program.folder / "lockstep.log"
        child_read, self._write = os.pipe()
        self._read, child_write = os.pipe()
        env = {**os.environ, **cupti.environment(program.library, self.capture),
               ENV_TURN: f"{child_read},{child_write}", ENV_RANGE: program.iteration_range}
        with safe.open_nofollow(self.log, "ab") as log:
            log.write(f"\n$ {' '.join(program.command)}   (lockstep, process {start})\n".encode())
            log.flush()
            try:
                self.proc = subprocess.Popen(list(program.command), env=env, stdout=log, stderr=log,
                                             stdin=subprocess.DEVNULL, pass_fds=(child_read, child_write))
            except OSError as e:
                for fd in (child_read, child_write, self._read, self._write):
                    os.close(fd)
                raise LockstepUnavailable(f"{program.key}: cannot start {program.command[0]}: {e}") from None
        os.close(child_read)
        os.close(child_write)
        self._buf = b""
        self.follower = Follower(self.capture)
        self.to_wall: Callable[[int], int] | None = None
        self.ended = False       # it closed its pipe: the process ended, its capture flushed
        self.turns: list[Turn] = []                     # its turns, in order
        self.kernels: dict[int, list[KernelRecord]] = {}  # turn index -> its kernels read so far
        self._read_kernels = 0   # kern records of the capture already placed in turns
        self._flushed = -1       # the last turn whose kernels are all in the capture

    @property
    def name(self) -> str:
        return Path(self.program.command[0]).name

    def line(self, deadline: float) -> str | None:
        """The program's next line ("ready N", "done N GO DONE", "flushed", "error ..."); None once it
        closed its pipe (it ended). SweepError past the deadline (time.monotonic())."""
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or group.expired():
                raise SweepError(f"{self.program.key}: no word from {self.name} in turn mode before the job's "
                                 f"time limit (see {self.log}); raise the limit (--time)")
            ready, _, _ = select.select([self._read], [], [], min(left, 0.5))
            if not ready:
                continue
            chunk = os.read(self._read, 4096)
            if not chunk:
                self.ended = True
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace").strip()

    def send(self, word: str) -> None:
        try:
            os.write(self._write, f"{word}\n".encode())
        except OSError:       # it ended: the next line() says so
            pass

    def waiting(self, deadline: float) -> bool:
        """Wait until it waits for a turn (True) or has ended (False); LockstepUnavailable when it says "error"."""
        line = self.line(deadline)
        if line is None:
            return False
        if line.startswith("ready"):
            if self.to_wall is None:
                self.follower.poll()     # the header's clock pair: turns onto the wall clock
                self.to_wall = to_realtime(self.follower.records.clock_pairs)
            return True
        if line.startswith("error"):
            raise LockstepUnavailable(f"{self.program.key}: {line[6:]}")
        raise SweepError(f"{self.program.key}: unexpected {line!r} from the injection library while waiting for a turn")

    def turn(self, deadline: float) -> Turn:
        """Give it a turn and wait until its iteration finished."""
        self.send("go")
        line = self.line(deadline)
        words = (line or "").split()
        if len(words) != 4 or words[0] != "done":
            raise SweepError(f"{self.program.key}: {self.name} ended during its timed iteration in the race "
                             f"(exit {self.exit_code()}; see {self.log})")
        n, go, done = (int(w) for w in words[1:])
        window = (self.to_wall(go), self.to_wall(done)) if self.to_wall else None
        t = Turn(self.program.key, self.start, n, go, done, window)
        self.turns.append(t)
        return t

    def read_kernels(self, deadline: float) -> None:
        """Bring its turns' kernels in from the capture: a waiting program is asked to flush first
        (an ended one flushed as it ended), then each new kernel goes to the turn whose window holds it."""
        if self._flushed >= len(self.turns) - 1:
            return
        if not self.ended:
            self.send("flush")
            if self.line(deadline) != "flushed":
                raise SweepError(f"{self.program.key}: {self.name} did not flush its records when asked "
                                 f"(see {self.log})")
        self.follower.poll()
        self._flushed = len(self.turns) - 1
        goes = [t.go_ns for t in self.turns]
        new = self.follower.records.kernels[self._read_kernels:]
        self._read_kernels += len(new)
        for k in new:
            i = bisect.bisect_right(goes, k.start) - 1
            if i >= 0 and k.end <= self.turns[i].done_ns and k.end > k.start:
                self.kernels.setdefault(self.turns[i].index, []).append(k)

    def exit_code(self) -> int | None:
        """Its exit status once it ended (a closed pipe comes a moment before the process is gone);
        None while it still runs after STOP_S."""
        try:
            return self.proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        """Ask it to end (the library flushes and exits)."""
        if not self.ended and self.proc.poll() is None:
            self.send("stop")

    def reap(self) -> None:
        """Wait for it to end (killed if it does not within STOP_S); its pipes closed."""
        try:
            self.proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.ended = True
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass


class Lockstep:
    """The race's programs (key -> Program) on this GPU, taking turns. `round(keys)` takes one
    round: a fresh process of each key, `turns` turns each, interleaved in the order of `keys`;
    `sample(turns)` reads what a process ran in its turns. Processes are started in batches of
    several rounds at once (at most `max_processes` at a time), so their start-ups overlap; a
    process that took its turns waits until its batch is done and is stopped with it. Use as
    a context manager: every process ends with it."""

    def __init__(self, programs: Mapping[str, Program], *, timeout_s: float, turns: int = 3,
                 max_processes: int = 16, reader: clocks.Reader | None = None,
                 facts: Mapping[str, Any] | None = None, sleep: Callable[[float], None] = clocks.sleep,
                 pause_s: float = PAUSE_S):
        self.programs = dict(programs)
        self.timeout_s, self.turns_each, self.max_processes = timeout_s, turns, max_processes
        self.sleep, self.pause_s = sleep, pause_s
        self.default_mhz = clocks.default_clock(dict(facts or {}))
        self.monitor = clocks.Monitor(reader)
        self.waiting: dict[str, list[Player]] = {}     # started, each waiting for its first turn
        self.done: list[Player] = []                    # took their turns; stopped with their batch
        self.started: list[Player] = []                 # every process, by its start number
        self.start_s: list[float] = []  # per batch: seconds until each of its processes waited for a turn
        self.batches = 0
        self.turns = 0
        self.throttled_rounds = 0
        self.kept_throttled = 0         # rounds kept though throttled (MAX_THROTTLED in a row)

    @property
    def starts(self) -> int:
        return len(self.started)

    def __enter__(self) -> "Lockstep":
        self.monitor.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._stop(self.done + [p for ps in self.waiting.values() for p in ps])
        finally:
            self.done, self.waiting = [], {}
            self.monitor.__exit__(*exc)

    @staticmethod
    def _stop(players: Sequence[Player]) -> None:
        """End these processes, all at once (each flushes and exits in parallel)."""
        for p in players:
            p.stop()
        for p in players:
            p.reap()

    def _batch(self, keys: Sequence[str], rounds_left: int) -> None:
        """Start the next processes of `keys`: as many rounds as max_processes holds (at most
        rounds_left), together, and wait until each waits for its first turn. A batch of several
        rounds that fails to start is tried again as one round (several at once may not fit the
        GPU's memory); LockstepUnavailable when one round cannot start."""
        self._stop(self.done + [p for k in list(self.waiting) if k not in keys for p in self.waiting.pop(k)])
        self.done = []
        n = max(1, min(rounds_left, self.max_processes // max(1, len(keys))))
        while True:
            fresh = [Player(self.programs[k], self.starts + i * len(keys) + j)
                     for i in range(n) for j, k in enumerate(keys)]
            self.started += fresh
            try:
                self.start_s.append(self._wait_ready(fresh))
                break
            except LockstepUnavailable:
                self._stop(fresh)
                if n == 1:
                    raise
                n = 1
        self.batches += 1
        for p in fresh:
            self.waiting.setdefault(p.program.key, []).append(p)

    def _wait_ready(self, fresh: Sequence[Player]) -> float:
        """Seconds until every one of these processes waited for its first turn."""
        t0 = time.monotonic()
        deadline = t0 + self.timeout_s
        for p in fresh:
            if not p.waiting(deadline):
                raise LockstepUnavailable(f"{p.program.key}: {p.name} ended (exit {p.exit_code()}) before it opened "
                                          f"an NVTX {p.program.iteration_range!r} range to wait in, so it cannot take "
                                          f"turns (see {p.log})")
        return time.monotonic() - t0

    def round(self, keys: Sequence[str], rounds_left: int = 1) -> dict[str, list[Turn]]:
        """One round: a fresh process of each of `keys`, `turns` turns each, the keys' turns in this
        order, pass after pass; each key's turns. rounds_left: rounds the caller will take before it
        may stop (this one included), which caps the next batch. A throttled round is dropped and
        taken again after a pause."""
        throttled = 0
        while True:
            if any(not self.waiting.get(k) for k in keys):
                self._batch(keys, rounds_left)
            players = {k: self.waiting[k].pop(0) for k in keys}
            turns = self._turns(players)
            if not self._throttled(turns):
                return turns
            if throttled >= MAX_THROTTLED:
                self.kept_throttled += 1
                return turns
            throttled += 1
            self.throttled_rounds += 1
            self.sleep(self.pause_s)

    def _turns(self, players: Mapping[str, Player]) -> dict[str, list[Turn]]:
        out: dict[str, list[Turn]] = {k: [] for k in players}
        for _ in range(self.turns_each):
            for k, p in players.items():
                if p.ended:          # a program of fewer iterations than turns: what it ran
                    continue
                deadline = time.monotonic() + self.timeout_s
                out[k].append(p.turn(deadline))
                self.turns += 1
                p.waiting(deadline)
        self.done += players.values()
        return out

    def sample(self, turns: Sequence[Turn]) -> list[Measurement]:
        """One process's turns as Measurements of as many iterations (asks it to flush first)."""
        deadline = time.monotonic() + self.timeout_s
        launches = []
        for j, t in enumerate(turns):
            p = self.started[t.start]
            p.read_kernels(deadline)
            launches += [dataclasses.replace(x, iteration=j) for x in turn_launches(p.kernels.get(t.index, []))]
        return aggregate(launches, len(turns))

    def _throttled(self, turns: Mapping[str, Sequence[Turn]]) -> bool:
        windows = sorted(t.window for ts in turns.values() for t in ts if t.window is not None)
        if self.default_mhz is None or self.monitor.reader is None or not windows:
            return False
        sm = self.monitor.series().iteration_clocks(windows)
        return any(clocks.throttled(x, self.default_mhz) for x in sm)
