"""Measuring workers: long-lived job processes of the local executor, each running measurement
after measurement on whichever GPU frees first.

A job process started per measurement (submitit: a controller and a job process, each importing
the framework) cost about 1.5 s on a CPU here and about 3 s on an H200 node before the job reached
its GPU's lock: longer than the ~1 s programs a sweep often measures. A worker pays that once.

    Worker        the driver's side: starts `python -m sweep.dispatch.workers OFFER`, hands it one
                  job at a time (a JSON line on its stdin) and reads the reply (a JSON line)
    main          the worker's side: for each job, waits for a free admission slot of ANY GPU
                  it is offered (sweep.node.gpus.slot_path: node-wide, like the GPU locks),
                  sets CUDA_VISIBLE_DEVICES to that GPU before anything touches CUDA, and runs
                  the job with that GPU's node-wide lock (the job holds it around verify and
                  profile, and parses outside it)

Each GPU has measuring_slots() + STAGED admission slots: the jobs measuring, and one more
started and waiting at the lock so the GPU goes on at once when a job lets go of it (its
parse and result writing overlap the next measurement). Slots are tried in order slot 0 of
every GPU, then slot 1 of every GPU: two jobs handed over together go to two GPUs.

A worker whose stdin closes (the driver ended, or was killed) finishes its job, whose
result.json is written as always, and exits: nothing measured is lost. Between a driver's
dispatches (the sweep, the race, the confirmations) its idle workers wait in `kept`, and a
later dispatch offering the same GPUs in the same environment takes them (`reuse`): no
start-up between the stages either. They end with the driver.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, IO

from sweep.node import gpus

STAGED = 1              # admission slots a GPU has beyond its measuring ones: a job waiting at its lock
WAIT_S = (0.005, 0.05)  # the admission wait's first and longest sleep between tries


def slots_of(locks: list[str], per_gpu: int) -> list[tuple[int, Path]]:
    """(GPU position, slot file) in the order a worker tries them: slot 0 of each GPU first."""
    return [(i, gpus.slot_path(Path(lock), s)) for s in range(per_gpu) for i, lock in enumerate(locks)]


def admit(order: list[tuple[int, Path]]) -> tuple[int, int]:
    """Waits for a free admission slot among `order`: (GPU position, held descriptor)."""
    pause = WAIT_S[0]
    while True:
        for i, path in order:
            fd = gpus.try_lock(path)
            if fd is not None:
                return i, fd
        time.sleep(pause)
        pause = min(pause * 2, WAIT_S[1])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    offer = json.loads(argv[0])
    # The replies go on a private copy of stdout; anything a job prints goes to stderr (the worker's log).
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.default_int_handler)   # Ctrl-C: the job stops and leaves no result
    import sweep.node  # noqa: F401  (every job role registers itself)
    from sweep.node.job import run_job

    order = slots_of(offer["locks"], offer["slots"])
    try:
        for line in sys.stdin:
            ask = json.loads(line)
            received = time.time()
            i, fd = admit(order)
            gpu = offer["gpus"][i]
            reply: dict[str, Any] = {"dir": ask["dir"], "gpu": gpu, "received": received, "admitted": time.time()}
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu        # the job's programs, and NVML's reading, see it alone
            try:
                reply["result"] = run_job(ask["dir"], ask["stages"], gpu_lock_path=offer["locks"][i])
            except Exception as e:  # the job could not even record a failure: the driver records it
                reply["error"] = f"{type(e).__name__}: {e}"[:300]
            finally:
                os.close(fd)                                # the slot: the next job may take this GPU
            reply["ended"] = time.time()
            replies.write(json.dumps(reply) + "\n")
    except (KeyboardInterrupt, BrokenPipeError):
        return 130
    return 0


class Worker:
    """One worker process, seen from the driver: at most one job at a time."""

    def __init__(self, offer: dict[str, Any], log: Path, env: dict[str, str]):
        self.log = log
        environment = {**os.environ, **env}
        self.key = json.dumps([offer, sorted(environment.items())])   # what it was started with
        with open(log, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "sweep.dispatch.workers", json.dumps(offer)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         env=environment, text=True, bufsize=1)
        self.started_at = time.time()   # epoch seconds it was started (sweep.dispatch.local's hand-over log)
        self.job: Any = None            # the PendingJob it runs, or None: idle
        self.sent = 0.0                 # when it was handed over (time.monotonic)
        self.sent_at = 0.0              # the same, epoch seconds (the worker's replies are stamped so)
        self.done = 0                   # jobs it has ended
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                self._replies.put(json.loads(line))
            except ValueError:
                continue
        self._replies.put(None)         # it ended

    def send(self, job: Any, stages: str) -> None:
        self.job, self.sent, self.sent_at = job, time.monotonic(), time.time()
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"dir": str(job.dir), "stages": stages}) + "\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any] | None | bool:
        """Its job's reply once there is one; None when it ended without one; False: not yet."""
        try:
            got = self._replies.get_nowait()
        except queue.Empty:
            return False
        if got is None:
            self._replies.put(None)     # every later look says so too
        return got

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def interrupt(self) -> None:
        if self.alive:
            try:
                self.proc.send_signal(signal.SIGINT)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        """No more jobs: it exits once its current one (if any) has ended."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass


kept: list[Worker] = []      # this driver's idle workers between dispatches


def reuse(offer: dict[str, Any], env: dict[str, str]) -> Worker | None:
    """An idle worker started with this offer in this very environment, if one is kept."""
    key = json.dumps([offer, sorted({**os.environ, **env}.items())])
    kept[:] = [w for w in kept if w.alive]
    found = next((w for w in kept if w.key == key), None)
    if found is not None:
        kept.remove(found)
    return found


def keep(w: Worker) -> None:
    """An idle worker a later dispatch may take; ended with the driver (atexit) if none does. Only the
    latest dispatch's kind are kept (another GPU set or environment: the older ones end now)."""
    for old in [x for x in kept if x.key != w.key]:
        kept.remove(old)
        old.close()
    if w.alive and w.job is None:
        kept.append(w)
    else:
        w.close()


@atexit.register
def close_kept() -> None:
    """Ends every kept worker (the driver is done; or a bench starts its next sweep as a new process would)."""
    while kept:
        kept.pop().close()


if __name__ == "__main__":
    sys.exit(main())
