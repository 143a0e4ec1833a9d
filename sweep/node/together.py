"""Runs of one GPU's programs taken at once in overlap mode (sweep.node.overlap): a job's repeated
runs (sweep.node.sampling) and a race round's (sweep.node.race_runs).

Each program holds the GPU's lock only around its GPU work (sweep/profile/cupti_token.h), so
runs at once overlap their host work and never their GPU work; what each measures is what it
would measure alone. What sharing can change is whether a program fits: every program waiting
for the token keeps its context and allocations on the GPU, so one may run out of GPU memory
beside the others. Such a run is run again alone once the others have ended (`at_once`), so a
run never fails for sharing the GPU, and the caller records that it did.

    at_once(tasks, workers, again_alone)   the tasks at once; (results in order, which ran again alone)
    settled(futures, again_alone)          the same for tasks already submitted and ended
    Together                               how a Sampler takes its repeated runs at once
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Generic, TypeVar

from sweep.node import overlap

T = TypeVar("T")
C = TypeVar("C")


def at_once(tasks: Sequence[Callable[[], T]], workers: int,
            again_alone: Callable[[int], T] | None = None) -> tuple[list[T], list[int]]:
    """Runs `tasks` at once, at most `workers` at a time: (their results in the tasks' order, the
    indices of those run again alone). A task that failed out of GPU memory (overlap.out_of_memory)
    is run again by `again_alone(index)` once every task has ended, one after another; any other
    failure (or an out-of-memory one without `again_alone`) is raised, the first in the tasks'
    order, once every task has ended (a run is a process: it ends by itself, never abandoned)."""
    if not tasks:
        return [], []
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(tasks)))) as pool:
        futures = [pool.submit(task) for task in tasks]
    return settled(futures, again_alone)


def settled(futures: Sequence[Future[T]], again_alone: Callable[[int], T] | None = None) -> tuple[list[T], list[int]]:
    """Ended tasks' results in order, and the indices of those run again alone: a task that failed
    out of GPU memory runs again by `again_alone(index)`, one after another (the caller makes sure
    nothing else runs on the GPU by then); any other failure, the first in order, is raised."""
    errors = [f.exception() for f in futures]
    for error in errors:
        if error is not None and (again_alone is None or not overlap.out_of_memory(error)):
            raise error
    alone = [i for i, error in enumerate(errors) if error is not None]
    out = [f.result() if errors[i] is None else None for i, f in enumerate(futures)]
    for i in alone:
        out[i] = again_alone(i)
    return out, alone


@dataclass(frozen=True, slots=True)
class Together(Generic[C]):
    """How a Sampler takes the runs it knows it needs at once (overlap mode).

    slots: how many may run at once now (overlap.repeat_slots: read when a batch starts, as
    other jobs come and go); capture(n): run n (1-based) in files of its own, so that runs at
    once share none; alone(): a context in which the Sampler's own capture holds the GPU by
    itself (the lock held, the program without the token), for a run that ran out of memory
    beside the others; first: the first run may go with the others (it carries no check and
    has no fallback window to switch to: nothing about it needs seeing before the others)."""

    slots: Callable[[], int]
    capture: Callable[[int], C]
    alone: Callable[[], AbstractContextManager[object]]
    first: bool = False
