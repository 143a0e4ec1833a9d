"""The replay executor: each configuration answered from a recording, not a GPU.

    config-sweep run SPACE --executor replay --from FILE

FILE is a Kernel Tuner cache, T4 results, or a previous sweep's results/<name>/ or
jobs/<name>/ folder (sweep.dispatch.recording). A job's configuration is looked up by
its recorded parameter values: each macro's value under the recording's name for it
(the macro's own name, or `replay: {params: {MACRO: name}}` in the space; a T1 space
maps its macros back to the T1 names by itself), with recorded parameters the space
does not sweep held at `replay: {fixed: {name: value}}` (or taking one value only).

A replayed job writes a result.json as a measured one does: the recording's status
(a failure keeps its kind), its Measurements (Kernel Tuner and T4: the recorded time
per iteration of the file's kernel, its samples the recorded runs), and as `timings`
what the configuration cost the GPU it was recorded on (build = compile, profile = the
timed runs, verify, framework; total = their sum), so a budget in GPU seconds, counted
over results' timings.total, means here what it means on the GPU. A configuration the
recording lacks is `skipped` with the reason "not in the recording": nothing is
invented. The baseline job (the target's own sizes) is the space's defaults.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.core.errors import SweepError
from sweep.dispatch import Ask, Executor, OnResult, PendingJob, recording
from sweep.dispatch.progress import Progress
from sweep.records import JobConfig, JobResult, Status, read_result, write_result
from sweep.space import Space, default_config

STAGE = "replay"
NOT_RECORDED = recording.NOT_RECORDED
# A recording's costs by kind, in the order they are told, each with the job timing it is replayed as.
TIMING_OF_COST = {"compile": "build", "runs": "profile", "verify": "verify", "framework": "framework"}
COST_KINDS = tuple(TIMING_OF_COST)


@dataclass(frozen=True, slots=True)
class Index:
    """A recording's entries by this space's macros' values (in space.parameters order)."""

    recording: recording.Recording
    macros: tuple[str, ...]
    entries: dict[tuple[Any, ...], recording.Recorded]
    kernel: str                 # what a Kernel Tuner or T4 time is of

    def lookup(self, macros: dict[str, int]) -> recording.Recorded | None:
        return self.entries.get(tuple(macros.get(m) for m in self.macros))

    def measurements(self, e: recording.Recorded) -> tuple:
        """An entry's Measurements as a replayed job reports them: a Kernel Tuner or T4 time is of
        this index's kernel (an earlier sweep's measurements name their own)."""
        if self.recording.kind == "sweep":
            return e.measurements
        return tuple(dataclasses.replace(m, kernel=self.kernel) for m in e.measurements)


@functools.lru_cache(maxsize=4)
def _load(path: Path, mtime_ns: int, size: int) -> recording.Recording:
    return recording.load(path)


def load(path: Path) -> recording.Recording:
    """The recording at `path`, read once per process while the file is unchanged."""
    path = Path(path).resolve()
    try:
        st = path.stat()
    except OSError as e:
        raise recording.RecordingError(path, f"{e.strerror}; give a Kernel Tuner cache or T4 results file, or a "
                                             "sweep's results folder") from None
    return _load(path, st.st_mtime_ns, st.st_size)


def identity(source_digest: str, path: Path | None) -> str:
    """The digest a replayed sweep's config hashes use: the target's sources' and the recording's
    (its path, size and time), so a replayed result never passes for a GPU's, nor another recording's."""
    p = Path(path or "").resolve()
    try:
        st = p.stat()
        stamp = f"{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        stamp = ""
    return hashlib.sha256(f"{source_digest}\0replay\0{p}\0{stamp}".encode()).hexdigest()[:16]


def index(space: Space, path: Path) -> Index:
    """The recording at `path` matched to `space`; SweepError in one line where they cannot be matched."""
    rec = load(path)
    known = set(rec.params)
    # a mapped name where the recording has it; else the macro itself (an earlier sweep of this project records macros)
    names = {p.macro: space.replay.name_of(p.macro) if space.replay.name_of(p.macro) in known else p.macro
             for p in space.parameters}
    fix = f"map it with replay: {{params: {{MACRO: recorded_name}}}} in {space.path}"
    missing = [f"{m} (or {space.replay.name_of(m)!r})" if space.replay.name_of(m) != m else m
               for m, n in names.items() if n not in known]
    if missing:
        raise recording.RecordingError(path, f"the recording has no parameter for {', '.join(missing[:5])}; it "
                                             f"records {', '.join(rec.params[:12]) or 'none'}; {fix}")
    bad_fixed = [n for n in space.replay.fixed if n not in known]
    if bad_fixed:
        raise SweepError(f"{space.path}: replay.fixed names {', '.join(bad_fixed)}, which the recording {path} does not "
                         f"record; it records {', '.join(rec.params[:12])}")
    fixed = {n: recording.key(v) for n, v in space.replay.fixed.items()}
    macros = tuple(names)
    entries: dict[tuple[Any, ...], recording.Recorded] = {}
    for e in rec.entries:
        if any(recording.key(e.params.get(n)) != v for n, v in fixed.items()):
            continue
        k = tuple(recording.key(e.params.get(names[m])) for m in macros)
        if k in entries:
            rest = [n for n in rec.params if n not in names.values() and n not in fixed and len(rec.values_of(n)) > 1]
            raise recording.RecordingError(
                path, f"several recorded configurations match one of this space's ({dict(zip(macros, k))}): they "
                      f"differ in {', '.join(rest) or 'nothing recorded'}; sweep those too, or hold them with replay: "
                      f"{{fixed: {{name: value}}}} in {space.path}")
        entries[k] = e
    return Index(rec, macros, entries, replayed_kernel(rec, space))


def replayed_kernel(rec: recording.Recording, space: Space) -> str:
    """The kernel the recorded times are of: `replay.kernel` where the space says; else the file's
    kernel name where the space's parameters govern it (or name no kernel); else the one kernel
    they govern (a cache written by bench/kt_cache.py before 2026-11-29 named the program, not its
    kernel, and its times would have been of no swept kernel: nothing to learn from)."""
    if space.replay.kernel:
        return space.replay.kernel
    named = [p for p in space.parameters if p.kernels]
    if rec.kernel and (not named or any(p.governs(rec.kernel) for p in named)):
        return rec.kernel
    governed = _governed(space)
    return rec.kernel if governed == recording.T4_KERNEL and rec.kernel else governed


def _governed(space: Space) -> str:
    """The one kernel the space's parameters govern, when they name exactly one (no glob); else 'kernel'."""
    kernels = {k for p in space.parameters for k in p.kernels}
    return kernels.pop() if len(kernels) == 1 and not any(ch in next(iter(kernels)) for ch in "*?[") else \
        recording.T4_KERNEL


def replay_job(job_dir: Path, space: Space, idx: Index) -> JobResult:
    """Answer one job from the recording and write its result.json."""
    cfg = JobConfig.load(job_dir)
    previous = read_result(job_dir)
    rec = idx.recording
    env = {"gpu": rec.device, "backend": STAGE, "host": STAGE, "replayed_from": str(rec.path), "recording": rec.kind}
    macros = dict(cfg.macros)
    if not macros:     # the baseline: the target's own sizes, which a recording knows as the space's defaults
        dc = default_config(space)
        if dc is None:
            r = JobResult.ended(cfg, Status.SKIPPED, STAGE, "the baseline: the space declares no default for every "
                                "parameter, so the recording cannot say what the target's own sizes measure",
                                previous=previous, env=env)
            write_result(job_dir, r)
            return r
        macros = dc.as_dict()
    e = idx.lookup(macros)
    if e is None:
        r = JobResult.ended(cfg, Status.SKIPPED, STAGE, f"{NOT_RECORDED} ({rec.path.name})", previous=previous,
                            env=env, timings={"total": 0.0})
    else:
        ms = idx.measurements(e)
        timings = {timing: e.costs.get(kind, 0.0) for kind, timing in TIMING_OF_COST.items()} | {"total": e.cost_s}
        r = JobResult.ended(cfg, e.status, STAGE if e.status != Status.OK else "", e.reason, previous=previous,
                            measurements=ms, env=env, timings=timings)
    write_result(job_dir, r)
    return r


class ReplayExecutor(Executor):
    name = "replay"
    doc = "answers each configuration from a recording (--from FILE): no GPU, no build"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.queued: list[PendingJob] = []
        self.replayed = 0
        self.missing = 0
        self.costs: dict[str, float] = {}
        self.noted = False          # the recording's objective was noted (once a sweep)

    @classmethod
    def preflight(cls, space: Space, dry_run: bool) -> None:
        if dry_run:
            raise SweepError("--dry-run renders and compiles; a replay compiles nothing: drop --dry-run")

    def submit(self, jobs: list[PendingJob], stages: str) -> None:
        self.queued.extend(jobs)

    def watch(self, on_result: OnResult, progress: Progress) -> None:
        if self.ctx.replay_from is None:
            raise SweepError("--executor replay needs --from FILE (a Kernel Tuner cache, T4 results, or a sweep's "
                             "results folder)")
        idx = index(self.ctx.space, self.ctx.replay_from)
        note = objective_note(idx.recording)
        if note and not self.noted:
            print(note, file=sys.stderr)
        self.noted = True
        while self.queued:
            j = self.queued.pop(0)
            r = replay_job(j.dir, self.ctx.space, idx)
            self.replayed += 1
            self.missing += r.reason.startswith(NOT_RECORDED)
            for kind, timing in TIMING_OF_COST.items():
                self.costs[kind] = self.costs.get(kind, 0.0) + r.timings.get(timing, 0.0)
            on_result(r)

    def stream(self, ask: Ask, stages: str, on_result: OnResult, progress: Progress) -> None:
        super().stream(ask, stages, on_result, progress)
        if self.replayed:
            print(cost_line(self.replayed, self.missing, self.costs), file=sys.stderr)


def objective_note(rec: recording.Recording) -> str:
    """A line saying that the recording tuner optimized something other than time, or ''. A sweep
    minimizes kernel time, so where the file ranked by a rate that counts work the time does not
    show (the benchmark hub's hotspot caches: GFLOP/s with temporal tiling), its best and the
    replay's fastest differ, and nothing else would say so."""
    if rec.objective.lower() == "time":
        return ""
    return (f"note: {rec.path.name} declares its objective as {rec.objective!r}; a replay answers each configuration's "
            f"recorded time, which a sweep minimizes, so the sweep's pick is the fastest configuration, which may not "
            f"be the one the file ranks best by {rec.objective}")


def cost_parts(costs: dict[str, float], fmt: str = ".1f", skip_zero: bool = False) -> str:
    """A recording's costs by kind (keys of COST_KINDS), as 'compile 2,106.0 s, runs 135.2 s, ...'."""
    return ", ".join(f"{k} {costs.get(k, 0.0):{fmt}} s" for k in COST_KINDS if costs.get(k) or not skip_zero)


def cost_line(replayed: int, missing: int, costs: dict[str, float]) -> str:
    """What the replayed configurations would have cost the GPU, in one line."""
    return (f"replayed {replayed} configuration(s) ({missing} {NOT_RECORDED}): {sum(costs.values()):.1f} GPU seconds "
            f"as recorded ({cost_parts(costs)})")


EXECUTOR = ReplayExecutor
