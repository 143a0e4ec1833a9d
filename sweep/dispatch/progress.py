"""A sweep's progress: a live bar on a terminal, sparse lines in a log.

On a terminal, a tqdm bar counts ended jobs and says how many are ok, failed,
skipped, running and queued. Elsewhere (a log file, a Slurm job's output) one
line is written when the state changed, at most every `interval_s` seconds, and
once more at close; failures are written as they happen, one line each, with
the log to read.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from sweep.core.text import terminal_safe
from sweep.records import FAILED, JobResult, Status

LOG_INTERVAL_S = 10.0


class Progress:
    def __init__(self, sweep: str, total: int = 0, stream: TextIO | None = None, interval_s: float = LOG_INTERVAL_S):
        self.sweep, self.total = sweep, total
        self.stream = stream if stream is not None else sys.stderr
        self.interval_s = interval_s
        self.t0 = time.monotonic()
        self.counts: dict[str, int] = {}
        self.running = 0
        self.busy = ""          # each GPU's occupancy while measuring ("GPU 0 93%, 1 91%"; sweep.dispatch.occupancy)
        self._last_line, self._last_at = "", float("-inf")
        self._bar: Any = None
        if hasattr(self.stream, "isatty") and self.stream.isatty():
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=sweep, unit="job", file=self.stream, dynamic_ncols=True, leave=True)
            except ImportError:
                self._bar = None

    # -- what executors and the driver report ---------------------------------
    def add(self, n: int) -> None:
        """n more jobs planned."""
        self.total += n
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.refresh()

    def counted(self, result: JobResult) -> None:
        """A job that ended in an earlier run (resumed): counted, not announced."""
        self._count(result.status)
        self.show()

    def finished(self, result: JobResult) -> None:
        """A job ended now: counted, and a failure gets a line of its own."""
        self._count(result.status)
        if result.status not in (Status.OK, Status.SKIPPED):
            where = f" -> {result.log}" if result.log else ""
            self.note(f"  {result.tag}: {result.status} ({result.stage}: {result.reason}){where}")
        self.show()

    def note(self, text: str) -> None:
        """A line of its own (above the bar on a terminal); a program's words in it spelled out, never
        escapes for the terminal."""
        text = terminal_safe(text)
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def show(self, running: int | None = None, busy: str | None = None) -> None:
        if running is not None:
            self.running = running
        if busy is not None:
            self.busy = busy
        if self._bar is not None:
            self._bar.set_postfix_str(self._state(), refresh=False)
            self._bar.refresh()
            return
        line = self.line()
        now = time.monotonic()
        if line != self._last_line and now - self._last_at >= self.interval_s:
            self._write(line, now)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(self._state(), refresh=True)
            self._bar.close()
            return
        line = self.line()
        if line != self._last_line:
            self._write(line, time.monotonic())

    # -- text ---------------------------------------------------------------------
    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def _count(self, status: Status) -> None:
        self.counts[str(status)] = self.counts.get(str(status), 0) + 1
        if self._bar is not None:
            self._bar.update(1)

    def _state(self) -> str:
        failed = sum(v for k, v in self.counts.items() if k in FAILED)
        return (f"ok {self.counts.get('ok', 0)}, failed {failed}, skipped {self.counts.get('skipped', 0)} | "
                f"{self.running} running | {max(0, self.total - self.done - self.running)} queued"
                + (f" | {self.busy}" if self.busy else ""))

    def line(self) -> str:
        el = int(time.monotonic() - self.t0)
        state = self._state().replace(" | ", ") | ", 1)
        return f"[{self.sweep}] {self.done}/{self.total} done ({state} | {el // 60}:{el % 60:02d}"

    def _write(self, line: str, at: float) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()
        self._last_line, self._last_at = line, at
