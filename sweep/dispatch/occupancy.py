"""How busy each GPU was while a sweep measured: the share of the measuring phase's wall time
a job held the GPU's lock (its verify and profile, or a race), from the jobs' own intervals.
In overlap mode (sweep.node.overlap) several jobs measure on one GPU at once: the share is the
time at least one of them was measuring (the union of their intervals), never their sum.

The measuring phase runs from the first job handed to a GPU to the last one's end. A share
counts the jobs that have ended (a job still measuring counts once it ends), so the live
figure trails the truth by at most one job a GPU.
"""

from __future__ import annotations

import time
from typing import Any

from sweep.core.spans import covered

HELD = ("gpu", "race")      # the intervals (node.job, node.race) during which a job held its GPU's lock


class Occupancy:
    def __init__(self, gpus: list[str]):
        self.gpus = list(gpus)
        self.spans: dict[str, list[tuple[float, float]]] = {g: [] for g in self.gpus}
        self.jobs = {g: 0 for g in self.gpus}
        self.start: float | None = None       # epoch seconds: the first job handed to a GPU
        self.end: float | None = None         # the last job's end
        # hand-over to a worker taking the job up: a fresh worker's first job (its start-up), later ones
        self.startup_s: dict[str, list[float]] = {"first": [], "next": []}

    def started(self) -> None:
        if self.start is None:
            self.start = time.time()

    def ended(self, gpu: str, intervals: dict[str, Any] | None, at: float | None = None,
              started: float | None = None, first: bool = False) -> None:
        """A job that ran on `gpu` ended (at `at`, epoch seconds): its held interval counts. `started`:
        seconds from its hand-over until a worker took it up (`first`: the worker's first job)."""
        self.end = max(self.end or 0.0, at or time.time())
        if started is not None:
            self.startup_s["first" if first else "next"].append(max(0.0, started))
        if gpu not in self.spans:
            return
        self.jobs[gpu] += 1
        for key in HELD:
            span = (intervals or {}).get(key)
            if isinstance(span, (list, tuple)) and len(span) == 2 and self.start is not None:
                a, b = max(float(span[0]), self.start), float(span[1])
                if b > a:
                    self.spans[gpu].append((a, b))
                break

    @property
    def busy_s(self) -> dict[str, float]:
        """Seconds each GPU had at least one job measuring (the union of the held intervals)."""
        return {g: covered(spans) for g, spans in self.spans.items()}

    def wall_s(self, now: float | None = None) -> float:
        if self.start is None:
            return 0.0
        return max(0.0, (now if now is not None else (self.end or time.time())) - self.start)

    def shares(self, now: float | None = None, busy: dict[str, float] | None = None) -> dict[str, float]:
        wall, busy = self.wall_s(now), busy if busy is not None else self.busy_s
        return {g: (min(1.0, busy[g] / wall) if wall > 0 else 0.0) for g in self.gpus}

    def line(self) -> str:
        """'GPU 0 93%, 1 91%' (live: up to now), or '' before anything was handed to a GPU."""
        if self.start is None:
            return ""
        return "GPU " + ", ".join(f"{g} {s:.0%}" for g, s in self.shares(time.time()).items())

    def summary(self) -> dict[str, Any]:
        """What the run's record keeps (sweep.json's runs[]): per GPU its share and busy seconds."""
        busy = self.busy_s
        return {"measuring_s": round(self.wall_s(), 3),
                "startup_s": {k: {"median": round(sorted(v)[len(v) // 2], 3), "max": round(max(v), 3), "jobs": len(v)}
                              for k, v in self.startup_s.items() if v},
                "gpus": {g: {"share": round(share, 4), "busy_s": round(busy[g], 3), "jobs": self.jobs[g]}
                         for g, share in self.shares(busy=busy).items()}}
