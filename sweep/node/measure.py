"""A job's measuring, one workload at a time: each workload's profiled runs on the GPU, and their parse.

A configuration is built once and measured on every workload of its space
(sweep.space.workloads; config.json's `workloads`, each with its program's
commands). Each workload's program runs under the profile backend as often as
its sampling plan says (sweep.node.sampling), its placeholders ({batch} {seq_len}
{iterations} {warmup}, and {args}) from the workload, its files in a folder of
its own, <job>/workloads/<name>/ (profile.log and the backend's output): the
parse of a one-run plan waits until the GPU is released, so a later workload's
run must not overwrite an earlier one's output. A space without workloads
measures its one run (`run:`) in the job's folder itself, as before workloads.

Verification happens once per configuration and program: the check commands
(target.verify) run once, with the first workload's placeholders; with `verify:
profile`, the first run of the first workload carries its program's check
arguments, and so does the first run of the first workload of each other program
that has some (the engine: gpt2_forward --ref on the prefills, gpt2_generate --ref
on decoding; checking: a different program runs different kernels, so its check
finds what the first one cannot). The runs repeated for the noise of a short
program time the same work unchecked, so only a checked run's failure before its
timed part is verify_failed (other runs and workloads fail as runtime_failed). A
configuration that computes wrong results is wrong at every shape; checking every
workload of one program would cost each a check (the engine: a reference pass
over every path) and find nothing more.

In overlap mode (the job's program takes the GPU's token: sweep.node.overlap) the runs a
workload's sampler knows it needs start at once (sweep.node.together), each in a folder of
its own, <workload folder>/runs/<n>/ (capture and profile.log): runs at once share no file.

The Measurements carry their workload's name (Measurement.workload). The job's
record sums the workloads up (`combined`): its sampling (runs summed, the fewest
samples, the worst noise), its capture window (each distinct one), and per
workload in env["workloads"] (capture, runs, samples, noise, seconds).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from sweep import profile
from sweep.core import safe
from sweep.node import clocks, overlap, sampling
from sweep.node.gpus import gpu_lock
from sweep.node.together import Together
from sweep.core.errors import SweepError
from sweep.records.evidence import Sampled
from sweep.node.process import JobFailed, Ran, check_exit, expand, run_program, tail
from sweep.profile import Measurement
from sweep.records import JobConfig, Status
from sweep.space.workloads import DEFAULT
from sweep.stats.stopping import STOP_REASONS



class Job(Protocol):
    """What a measuring step needs of its job (sweep.node.job.Job, which builds on this module)."""

    cfg: JobConfig
    dir: Path
    backend: profile.Backend
    timeout_s: float | None
    gpu_token: Path | None       # overlap mode: the GPU's lock file its programs take around their GPU work

    def request(self) -> profile.Request: ...

    def refused_launch(self, p: Ran, log: Path, stage: str, program: list[str], inv: profile.Invocation) -> None: ...

WORKLOADS = "workloads"     # <job>/workloads/<name>/: a named workload's files
RUNS = "runs"               # <workload folder>/runs/<n>/: run n's files, of runs taken at once (overlap mode)
# A self-checking program that stops on one of these did not find wrong results: CUDA itself failed.
CUDA_FAILURE = re.compile(r"CUDA error|cudaError\w+|CUDA driver version is insufficient|no CUDA-capable device|"
                          r"out of memory|illegal memory access|unspecified launch failure")


@dataclass(frozen=True, slots=True)
class Spec:
    """One workload as a job reads it from config.json: its sizes and args, and its program's
    commands (profile, events, check_args)."""

    name: str
    batch: int
    seq_len: int
    iterations: int
    warmup: int
    args: tuple[str, ...]
    profile: tuple[str, ...]
    events: tuple[str, ...] = ()
    check_args: tuple[str, ...] = ()
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Captured:
    """One profiled run and the invocation it ran (its output: where the backend reads it)."""

    ran: Ran
    inv: profile.Invocation


def checking(specs: Sequence[Spec]) -> list[bool]:
    """Which workloads' first runs carry their program's check (with `verify: profile`): the
    first workload's, and the first of each other program that has check arguments."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for i, s in enumerate(specs):
        out.append(i == 0 or (bool(s.check_args) and s.profile not in seen))
        seen.add(s.profile)
    return out


def specs(cfg: JobConfig) -> list[Spec]:
    """The workloads a job measures, in the space's order: config.json's, or run:'s one run."""
    if not cfg.workloads:
        r, t = cfg.run, cfg.target
        return [Spec(DEFAULT, r["batch"], r["seq_len"], r["iterations"], r["warmup"], tuple(r["args"]),
                     tuple(t["profile"]), tuple(t.get("events", ())), tuple(t.get("check_args", ())))]
    return [Spec(w["name"], w["batch"], w["seq_len"], w["iterations"], w["warmup"], tuple(w["args"]),
                 tuple(w["profile"]), tuple(w.get("events", ())), tuple(w.get("check_args", ())),
                 float(w.get("weight", 1.0))) for w in cfg.workloads]


def folder(job_dir: Path, spec: Spec) -> Path:
    """Where a workload's files go: the job's folder for a space's one run, else workloads/<name>/."""
    return Path(job_dir) if spec.name == DEFAULT else Path(job_dir) / WORKLOADS / spec.name


class Measuring:
    """One workload's profiled runs in one job (or one race entrant): its command, its backend
    invocation (which switches once to its fallback window when the first run captured nothing),
    its sampler and its files under `out`. `check`: its first run carries the program's check
    arguments (`checking`: the first workload of each program of a self-checking target)."""

    def __init__(self, job: Job, spec: Spec, out: Path, check: bool):
        self.job, self.spec, self.out, self.check = job, spec, Path(out), check
        self.log = self.out / "profile.log"
        self.inv: profile.Invocation | None = None
        self.sampler: sampling.Sampler | None = None
        self.parsed: profile.Parsed | None = None
        self.interval: list[float] = []     # [start, end] of its profiled runs, epoch seconds
        self.runs = 0                       # profiled runs so far
        self.checked = False                # its own capture ran its checking run (capture_once)
        self.untokened = False              # inside `alone`: its programs run without the GPU's token
        self.fell_back = False              # the backend's fallback window replaced its own
        self._runs_lock = threading.Lock()   # runs taken at once (overlap mode) count from several threads
        self._window_lock = threading.Lock()  # once(apart=True): the first run finds the window before the others
        self._apart = 0                       # once(apart=True): the last runs/<n>/ folder taken

    @property
    def seconds(self) -> float:
        return self.interval[1] - self.interval[0] if self.interval else 0.0

    def values(self) -> dict[str, Any]:
        """The placeholders of its commands."""
        s, job = self.spec, self.job
        return {**job.cfg.values, "build": str(job.dir / "build"), "job": str(job.dir), "batch": s.batch,
                "seq_len": s.seq_len, "iterations": s.iterations, "warmup": s.warmup,
                "events_json": str(self.out / "events.json")}

    def program(self, extra: Sequence[str] = (), iterations: int | None = None, warmup: int | None = None,
                check: bool | None = None) -> list[str]:
        """Its timing command (with the check arguments when `check`, default self.check), then `extra`;
        `iterations` and `warmup` in place of the workload's, where the command takes them ({iterations}, {warmup})."""
        values = self.values()
        if iterations is not None:
            values["iterations"] = iterations
        if warmup is not None:
            values["warmup"] = warmup
        checking = self.check if check is None else check
        args = list(self.spec.check_args) if checking else []
        return expand(list(self.spec.profile) + args + list(extra), values, list(self.spec.args))

    def request(self) -> profile.Request:
        req = replace(self.job.request(), job_dir=self.out, program=self.program, events_args=self.spec.events)
        return replace(req, gpu_token=None) if self.untokened else req

    def invocation(self) -> profile.Invocation:
        """The backend's command for its runs (made once; a fallback window may replace it)."""
        self.out.mkdir(parents=True, exist_ok=True)
        try:
            self.inv = self.job.backend.invocation(self.request())
        except SweepError as e:
            raise JobFailed(Status.RUNTIME_FAILED, "profile", str(e), self.log) from None
        return self.inv

    def capture(self, reader: clocks.Reader | None, facts: Mapping[str, Any]) -> sampling.Taken:
        """Its profiled runs, as often as its sampling plan says (needs the GPU)."""
        self.out.mkdir(parents=True, exist_ok=True)
        safe.write_new(self.log, b"")
        start = time.time()
        inv = self.invocation()
        cfg = self.job.cfg
        plan = sampling.Plan.of({**cfg.run, "iterations": self.spec.iterations}, cfg.profile, inv.iterations)
        plan = replace(plan, observe=not inv.post)   # a parse in-process is quick: see the iterations it shows at once
        self.sampler = sampling.Sampler(plan, self.capture_once, self.parse_once, reader=reader, facts=facts,
                                        together=self.together())
        taken = self.sampler.take()
        self.interval = [start, time.time()]
        return taken

    def together(self) -> Together[Captured] | None:
        """Overlap mode's runs at once (None in exclusive mode: one run after another). The first run
        (this Measuring's own capture: checked, in the workload's own files) goes with the others
        when the plan wants several runs up front and it has no fallback window to switch to."""
        token = self.job.gpu_token
        if token is None:
            return None
        return Together(lambda: overlap.repeat_slots(token), self.capture_apart, self.alone,
                        first=self.inv is not None and self.inv.fallback is None)

    def once(self, reader: clocks.Reader | None, facts: Mapping[str, Any],
             apart: bool = False) -> tuple[list[Measurement], Sampled]:
        """One profiled run (repeated while the GPU throttles) and its parse: a race round's sample.
        `apart`: runs of this Measuring may be running at once (a race's rounds in overlap mode), so
        each run captures into files of its own (runs/<n>/: in the shared ones, a run starting
        truncated the capture another was writing, and the race failed on an empty file, as on
        an H200 on 2026-11-28); while its capture window is unknown (a backend with a fallback
        window, before its first run), the first run takes its own files and the others wait for it."""
        inv = self.inv or self.invocation()
        if apart:
            with self._window_lock:
                if self.runs == 0 and inv.fallback is not None:
                    return self._sampled_once(reader, facts, self.capture_once)
            return self._sampled_once(reader, facts, self._capture_next_apart)
        return self._sampled_once(reader, facts, self.capture_once)

    def _sampled_once(self, reader: clocks.Reader | None, facts: Mapping[str, Any],
                      capture: Callable[[], Captured]) -> tuple[list[Measurement], Sampled]:
        inv = self.inv or self.invocation()
        s = sampling.Sampler(sampling.Plan(iterations=inv.iterations or self.spec.iterations), capture,
                             self.parse_once, reader=reader, facts=facts)
        ms, sampled = s.finish(s.take())
        return self.named(ms), sampled

    def _capture_next_apart(self) -> Captured:
        with self._runs_lock:
            self._apart += 1
            n = self._apart
        return self.capture_apart(n)

    def finish(self, taken: sampling.Taken) -> tuple[list[Measurement], Sampled]:
        """The pooled Measurements, named after the workload, and how they were sampled (off the GPU)."""
        assert self.sampler is not None, "capture() first"
        ms, sampled = self.sampler.finish(taken)
        return self.named(ms), sampled

    def named(self, ms: Sequence[Measurement]) -> list[Measurement]:
        return [replace(m, workload=self.spec.name) for m in ms]

    def capture_once(self) -> Captured:
        """One run of the profiled program; the first one that captured nothing in its window
        (a program that never calls cudaProfilerStart) switches to the backend's fallback window."""
        be = self.job.backend
        if self.check and self.checked:   # the first run checked the results: the others time the same work unchecked
            self.check = False
            self.inv = self.fresh()
        inv = self.inv
        p = self._profiled(inv)
        if inv.fallback is not None and not be.timed(inv):
            with safe.open_nofollow(self.log, "a") as f:
                f.write(f"\n# {be.name} captured nothing in the {inv.capture} window (the program never called "
                        f"cudaProfilerStart): running it again, capturing the {inv.fallback.capture}\n")
            self.inv, self.fell_back = inv.fallback, True
            p = self._profiled(self.inv)
        with self._runs_lock:
            self.runs += 1
        self.checked = True
        return Captured(p, self.inv)

    def capture_apart(self, n: int) -> Captured:
        """Run n of several taken at once (overlap mode), in files of its own (runs/<n>/: its capture
        and its log), unchecked (a job's run 1, in the workload's own files, is the checked one; a
        race's runs are all unchecked), in the window the first run found."""
        d = self.out / RUNS / str(n)
        d.mkdir(parents=True, exist_ok=True)
        log = d / "profile.log"
        safe.write_new(log, b"")
        inv = self.fresh(replace(self.request(), job_dir=d, program=partial(self.program, check=False)))
        p = self._profiled(inv, log)
        with self._runs_lock:
            self.runs += 1
        return Captured(p, inv)

    @contextmanager
    def alone(self) -> Iterator[None]:
        """Its runs inside hold the GPU by themselves: the GPU's lock held here and the program
        without the token (it would wait for this very lock). For a run that ran out of GPU memory
        beside other programs (sweep.node.together)."""
        self.untokened = True
        try:
            self.inv = self.fresh()
            with gpu_lock(self.job.gpu_token):
                yield
        finally:
            self.untokened = False
            self.inv = self.fresh()     # with the token again (and unchecked, if the run inside checked)

    def fresh(self, request: profile.Request | None = None) -> profile.Invocation:
        """Its invocation made anew from `request` (default: its request now), in the window its
        first run found."""
        made = self.job.backend.invocation(request or self.request())
        return made.fallback if self.fell_back and made.fallback is not None else made

    def _profiled(self, inv: profile.Invocation, log: Path | None = None) -> Ran:
        """One profiled run; a non-zero exit ends the job as a refused launch (skipped), the
        program's own check (verify_failed, when its run carries the check arguments, before its
        timed part) or a failure."""
        log = log or self.log
        inv.output.unlink(missing_ok=True)
        p = run_program(inv.command, log, "profile", self.job.timeout_s, env=dict(inv.env))
        if p.returncode != 0:
            self.job.refused_launch(p, log, "profile", self.program(), inv)
            if self.check and log == self.log and not self.job.backend.timed(inv) and not CUDA_FAILURE.search(p.stderr + p.stdout):
                raise JobFailed(Status.VERIFY_FAILED, "verify", f"{Path(self.program()[0]).name} exit {p.returncode} "
                                f"before its timed part (its own check, verify: profile): {tail(p)}", log)
            check_exit(p, log)
        return p

    def parse_once(self, captured: Captured) -> profile.Parsed:
        """What the backend read from one run (its post commands first: nsys export); the sampler
        judges its iterations by its windows and keeps its measurements."""
        inv = captured.inv
        for cmd in inv.post:
            check_exit(run_program(list(cmd), self.log, "parse", self.job.timeout_s), self.log, "parse")
        try:
            parsed = self.job.backend.parse(inv, captured.ran.stdout)
        except SweepError as e:
            raise JobFailed(Status.RUNTIME_FAILED, "parse", str(e), self.log) from None
        self.parsed = parsed
        return parsed


def named_failure(f: JobFailed, workload: str) -> JobFailed:
    """A workload's failure, its reason saying which workload ("" : the space's one run, unchanged)."""
    if not workload:
        return f
    return JobFailed(f.status, f.stage, f"workload {workload}: {f.reason}", f.log)


def combined(parts: Sequence[tuple[str, Sampled]]) -> Sampled:
    """One job's sampling over its workloads: runs, throttled runs and seconds summed; the fewest
    samples (and their source) and the worst noise (and its shape, named with its workload); the
    stopping rule's records by the strongest reason. One workload: its own record."""
    if len(parts) == 1:
        return parts[0][1]
    fewest = min(parts, key=lambda p: p[1].samples)[1]
    noises = [(s.noise, f"{name}: {s.noisiest}") for name, s in parts if s.noise is not None]
    known = len(noises) == len(parts)
    noise, noisiest = max(noises) if known and noises else (None, "")
    stops = [s.stopped for _, s in parts if s.stopped]
    stopped = None
    if stops:
        stopped = {"samples": min(x.get("samples", 0) for x in stops),
                   "noise": None if any(x.get("noise") is None for x in stops) else max(x["noise"] for x in stops),
                   "reason": max((x.get("reason", "") for x in stops),
                                 key=lambda r: STOP_REASONS.index(r) if r in STOP_REASONS else -1),
                   "elapsed_s": sum(x.get("elapsed_s", 0.0) for x in stops)}
    return Sampled(runs=sum(s.runs for _, s in parts), samples=fewest.samples, source=fewest.source, noise=noise,
                   noisiest=noisiest, adaptive=any(s.adaptive for _, s in parts), stopped=stopped,
                   throttled_runs=sum(s.throttled_runs for _, s in parts),
                   throttled_samples=sum(s.throttled_samples for _, s in parts), threshold_mhz=fewest.threshold_mhz,
                   clocks=tuple(c for _, s in parts for c in s.clocks), elapsed_s=sum(s.elapsed_s for _, s in parts),
                   note="; ".join(f"{name}: {s.note}" for name, s in parts if s.note),
                   reason="; ".join(f"{name}: {s.reason}" for name, s in parts if s.reason))
