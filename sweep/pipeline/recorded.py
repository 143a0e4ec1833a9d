"""A recording matched to a space, as the pipeline reads it outside the replay executor: each
configuration's answer (`config-sweep choose`), the legal configurations it holds, and the warm
start a learning sweep takes from it (`start_from`).

The recording is anything `--executor replay` reads (a Kernel Tuner cache, T4 results, or an
earlier sweep's results folder), matched to the space as that executor matches it
(sweep.dispatch.replay.index); an objective is the one a sweep picks by
(sweep.decide.select.objective_ns)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sweep import plan as strategies
from sweep.core.errors import SweepError
from sweep.decide.select import group_objectives, objective_ns
from sweep.dispatch import replay
from sweep.dispatch.recording import RecordingError
from sweep.records import Status
from sweep.space import Config, Space, check, make_config

UNRECORDED_KIND = str(Status.SKIPPED)  # the failure kind replay tells a strategy of a configuration not recorded
START_POINTS = 50                    # the fastest recorded configurations handed to a warm-started search


@dataclass(frozen=True, slots=True)
class Answer:
    """One configuration as the recording answers it."""

    objective_ns: float | None      # None: it failed, or the recording lacks it
    failure: str | None
    cost_s: float                   # what it cost the GPU it was recorded on
    recorded: bool = True
    parts: dict | None = None       # each parameter group's objective (select.group_objectives), where measured


def answerer(space: Space, idx: replay.Index) -> Callable[[Config], Answer]:
    """A configuration's answer from the recording, as the replay executor gives it to a sweep."""
    def answer(c: Config) -> Answer:
        e = idx.lookup(c.as_dict())
        if e is None:
            return Answer(None, UNRECORDED_KIND, 0.0, recorded=False)
        if e.status != Status.OK:
            return Answer(None, str(e.status), e.cost_s)
        measured = list(idx.measurements(e))
        value = objective_ns(space, measured)
        if not (math.isfinite(value) and value > 0):
            return Answer(None, "failed", e.cost_s)
        return Answer(value, None, e.cost_s, parts=group_objectives(space, measured))
    return answer


def legal_recorded(space: Space, idx: replay.Index, answer: Callable[[Config], Answer]) -> list[tuple[Config, Answer]]:
    """Every configuration of the recording that is a legal point of the space, with its answer."""
    values = {p.macro: set(p.values) for p in space.swept}
    out = []
    for k in idx.entries:
        if any(m in values and v not in values[m] for m, v in zip(idx.macros, k)):
            continue                            # a value this space does not sweep
        c = make_config(space, {m: v for m, v in zip(idx.macros, k) if m in values})
        if c.values != tuple(zip(idx.macros, k)) or check(space, c) is not None:
            continue
        out.append((c, answer(c)))
    return out


def recording_path(space: Space, given: str) -> Path:
    """A start_from path: as given where absolute (the command line makes it so), else from the space
    file's folder, as the file's other paths are."""
    path = Path(given).expanduser()
    return path if path.is_absolute() else Path(space.path).resolve().parent / path


def start_points(space: Space, limit: int = START_POINTS) -> list[dict[str, int]]:
    """The warm start of a strategy with `start_from`: the recording's fastest legal configurations of
    the space (its swept parameters), fastest first, at most `limit`; [] where the strategy has none.
    A recording that cannot be matched, or holds no timed legal configuration, is refused in one line."""
    given = dict(space.strategy.options).get("start_from") or ""
    if not given or not strategies.spec(space).takes("start_from"):
        return []
    path = recording_path(space, given)
    try:
        idx = replay.index(space, path)
    except RecordingError as e:   # replay names the file as --from gave it; here start_from did
        raise e.named("start_from") from None
    timed = sorted(((a.objective_ns, c) for c, a in legal_recorded(space, idx, answerer(space, idx))
                    if a.objective_ns is not None), key=lambda t: t[0])
    if not timed:
        raise SweepError(f"start_from {path}: it holds no timed legal configuration of {space.path}; give a recording "
                         "of this space (another GPU's sweep or brute force), or drop start_from")
    swept = [p.macro for p in space.swept]
    return [{m: c[m] for m in swept} for _, c in timed[:limit]]
