"""A whole sweep, stage after stage: the function the CLI's `run` calls.

    run      space -> strategy -> render -> executor (build, verify, profile)
             -> collect -> select -> certify (race each group's top candidates
             on one GPU, sweep.decide.certify) -> confirm (combined best and defaults,
             end to end) -> results/<sweep>/ (tables, best.json, best/conf.cuh, report)

Each stage is a module of plain functions; this one only strings them together,
checks up front what a run needs (tools, GPUs; sweep.pipeline.preflight) and says what is
missing. The strategy is asked through the executor's `stream`: the executor asks for as
many configurations as it can start, and each result is told to the strategy as it ends.
The commands that read a sweep's files afterwards (status, collect, clean) are in
sweep.pipeline.manage.
"""

from __future__ import annotations

import dataclasses
import resource
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweep import dispatch as executors, plan as strategies
from sweep.core import atomic, paths
from sweep.decide import by_gpu, select as select_mod
from sweep.node import render, sampling
from sweep.pipeline import finish as finish_mod, folders
from sweep.space import target
from sweep.node.lock import DriverLock
from sweep.pipeline import recorded
from sweep.pipeline.overrides import apply_overrides
from sweep.pipeline.preflight import preflight
from sweep.plan.validate import declared_not_own
from sweep.dispatch import replay
from sweep.dispatch.progress import Progress
from sweep.records import Confirmation, JobResult, JobSettings, Manifest, Skip, Status, gpu_time, now, read_result
from sweep.space import Config, Space, config_hash, tag as tag_of, tags_for
from sweep.space.configs import no_legal_line

OBJECT_CACHE = "_cache/objects"
BACKEND_CACHE = "_cache/cupti"          # the cupti backend's injection library, built once per CUDA version


@dataclass(frozen=True, slots=True)
class Options:
    executor: str = "local"
    jobs_root: Path = paths.JOBS
    results_root: Path = paths.RESULTS
    dry_run: bool = False
    arch: str | None = None               # overrides build.arch (a dry run on a machine without a GPU)
    retry_failed: bool = False
    confirm: bool = True                  # run the combined best and the defaults end to end
    certify: bool | None = None           # race each group's top candidates on one GPU (None: as confirm)
    report: bool = True
    poll_s: float = 0.1
    slurm: dict[str, Any] = field(default_factory=dict)   # overrides of the space's slurm settings
    nsys: str = ""                        # profiler paths for the jobs (config.json); "": the node's
    ncu: str = ""
    replay_from: Path | None = None       # the replay executor's recording (--from FILE)


@dataclass(frozen=True, slots=True)
class RunSummary:
    sweep: str
    sweep_dir: Path
    results_dir: Path
    counts: dict[str, int]
    best: select_mod.Best | None
    confirmation: Confirmation
    seconds: float
    note: str
    no_legal: str = ""      # the plan had no legal point: one line saying so and which rule rejects most

    @property
    def measured(self) -> int:
        return self.counts.get("ok", 0)


class TargetPrepare:
    """The target's prepare step (the engine: its model export), run alongside the builds
    (they do not need it); measuring waits for it."""

    def __init__(self, space: Space, jobs_root: Path, skip: bool):
        plugin = space.target.plugin
        self.values: dict[str, str] = plugin.values(jobs_root) if plugin is not None else {}
        self.interval: list[float] = []  # [start, end] wall-clock times of the step, once it ran
        self._future: Future | None = None
        if plugin is not None and not skip:
            print(plugin.describe(jobs_root), file=sys.stderr)
            self._future = ThreadPoolExecutor(max_workers=1).submit(self._run, plugin, jobs_root)

    def _run(self, plugin: target.Prepare, jobs_root: Path) -> dict[str, str]:
        t0 = time.time()
        try:
            return plugin.prepare(jobs_root)
        finally:
            self.interval = [t0, time.time()]

    @property
    def seconds(self) -> float:
        return self.interval[1] - self.interval[0] if self.interval else 0.0

    def ready(self) -> bool:
        """True once the step is done; raises its error if it failed."""
        if self._future is None:
            return True
        if not self._future.done():
            return False
        self._future.result()
        return True

    def wait(self) -> None:
        if self._future is not None:
            self._future.result()


@dataclass
class Sweep:
    """One sweep being run: what rendering and dispatching need."""

    space: Space
    opts: Options
    sweep_dir: Path
    digest: str
    commit: str
    values: dict[str, str]
    manifest: Manifest
    prepared: TargetPrepare | None = None
    occupancy: dict[str, Any] = field(default_factory=dict)   # each GPU's share of the measuring phase

    def settings(self) -> JobSettings:
        return JobSettings(arch=self.opts.arch or "", timeout_s=self.space.slurm.time_min * 60.0, nsys=self.opts.nsys,
                           ncu=self.opts.ncu, pythonpath=str(paths.IMPORT_ROOT),
                           cache_dir=str(Path(self.opts.jobs_root) / BACKEND_CACHE))

    def render(self, config: Config | None, tag: str, role: str = "sweep", partition: str = "") -> executors.PendingJob:
        h = config_hash(self.space, config if config else Config(()), self.digest)
        space = self.space
        if self.opts.arch:
            space = dataclasses.replace(space, build=dataclasses.replace(space.build, arch=(self.opts.arch,)))
        jc = render.job_config(space, config, tag, h, self.commit, self.values, role, self.settings())
        rendered = render.render_job(space, jc, self.opts.jobs_root, self.opts.jobs_root / OBJECT_CACHE)
        render.write_job(rendered)
        return executors.PendingJob(tag, rendered.dir, h, partition)

    def save_manifest(self) -> None:
        self.manifest.save(self.sweep_dir)

    @property
    def stages(self) -> str:
        return "build" if self.opts.dry_run else "all"

    def executor(self) -> executors.Executor:
        gate = self.prepared.ready if self.prepared is not None else (lambda: True)
        ctx = executors.Context(self.space, self.sweep_dir, poll_s=self.opts.poll_s, ready_to_measure=gate,
                                dry_run=self.opts.dry_run, replay_from=self.opts.replay_from)
        return executors.executor(self.opts.executor)(ctx)

    def _prepared(self) -> None:
        if self.opts.executor != "local" and self.prepared is not None:
            self.prepared.wait()  # the local executor builds meanwhile; the others need it at once

    def dispatch(self, jobs: list[executors.PendingJob], progress, on_result) -> None:
        if not jobs:
            return
        self._prepared()
        self.executor().run(jobs, self.stages, on_result, progress)

    def gpus_at_once(self) -> int:
        """GPUs the finishing stage's independent jobs (each group's race) can run on side by side."""
        if self.opts.executor == "local":
            return len(executors.visible_gpus())
        return self.space.slurm.array_parallelism if self.opts.executor == "slurm" else 1

    def one_node(self) -> bool:
        """Whether the finishing stage's side-by-side jobs run on this one node (the local executor)."""
        return self.opts.executor == "local"

    def run_pending(self, jobs: list[executors.PendingJob], label: str, say: str) -> None:
        """Run those of `jobs` with no result of their configuration yet (after the sweep: the
        baseline, the combined best, a race's entrants), saying `say` and their tags first."""
        jobs = [j for j in jobs if executors.should_run(j.dir, j.config_hash, self.opts.retry_failed)[0]]
        if jobs:
            print(f"{say}: {', '.join(j.tag for j in jobs)}", file=sys.stderr)
            progress = Progress(label)
            progress.add(len(jobs))
            self.dispatch(jobs, progress, progress.finished)
            progress.close()

    def stream(self, ask: executors.Ask, progress, on_result) -> None:
        """Run what `ask` hands over as the executor takes it (see Executor.stream)."""
        def ready(n: int) -> list[executors.PendingJob]:
            jobs = ask(n)
            if jobs:
                self._prepared()
            return jobs

        ex = self.executor()
        ex.stream(ready, self.stages, on_result, progress)
        if getattr(ex, "occupancy", None) is not None and ex.occupancy.start is not None:
            self.occupancy = ex.occupancy.summary()


def snapshot_space(space_path: Path, sweep_dir: Path) -> str:
    """The space file as run, kept in the sweep folder: collect and report read it, so
    editing or moving the original later changes nothing already measured."""
    atomic.write_bytes(sweep_dir / target.SNAPSHOT, Path(space_path).read_bytes())
    return target.SNAPSHOT


def run(space_path: Path | str, opts: Options = Options(), **overrides: Any) -> RunSummary:
    t0, started = time.monotonic(), time.time()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    # Absolute from here on: Makefiles run with make -C inside each job folder.
    opts = dataclasses.replace(opts, jobs_root=Path(opts.jobs_root).resolve(), results_root=Path(opts.results_root).resolve())
    space = apply_overrides(target.load(space_path), **overrides)
    folders.check_roots(opts.jobs_root, opts.results_root)   # nothing written yet: a bad folder costs nothing
    preflight(space, opts)
    sweep_dir, _ = folders.claim(space.name, opts.jobs_root, opts.results_root)
    with DriverLock(sweep_dir, space.name):
        return _run_locked(space, Path(space_path), opts, sweep_dir, t0, started, ru0)


def _run_locked(space: Space, space_path: Path, opts: Options, sweep_dir: Path, t0: float, started: float,
                ru0: Any) -> RunSummary:
    digest, commit = target.source_digest(space.target), target.commit(space.target.source_dir)
    replaying = opts.executor == "replay"
    if replaying:   # a replayed result is the recording's: never taken for a GPU's measurement, nor another's
        digest = replay.identity(digest, opts.replay_from)
    prepared = TargetPrepare(space, opts.jobs_root, skip=opts.dry_run or replaying)
    search = strategies.start(space, warm=recorded.start_points(space))
    n, product = space.size()
    note = getattr(search, "note", "") or getattr(getattr(search, "plan", None), "note", "") \
        or f"{space.strategy.name}: up to {space.strategy.samples} trials"
    manifest = Manifest(sweep=space.name, space=str(space_path.resolve()), strategy=space.strategy.name,
                        backend=space.profile.backend, executor=opts.executor, grid_size=n, grid_product=product,
                        commit=commit, source_digest=digest, created=now(), note=note,
                        space_snapshot=snapshot_space(space_path, sweep_dir))
    if (sweep_dir / "sweep.json").is_file():
        prev = Manifest.load(sweep_dir)
        manifest = dataclasses.replace(manifest, created=prev.created, runs=prev.runs)
    sw = Sweep(space, opts, sweep_dir, digest, commit, prepared.values, manifest, prepared)
    sw.save_manifest()   # first: a sweep stopped while rendering can still be shown, resumed and cleaned

    counts: dict[str, int] = {}
    results: dict[str, JobResult] = {}
    all_tags: dict[Config, str] = {}
    by_tag: dict[str, Config] = {}

    spent = gpu_time.Spent()     # a job's cost: its share of its GPU's measuring time (overlap mode shares it)

    def tell(c: Config, r: JobResult | None) -> None:
        ok = r is not None and r.status == Status.OK
        parts = {"parts": select_mod.group_objectives(space, r.measurements) if ok else None} \
            if getattr(search, "wants_parts", False) else {}     # a model per group: each group's own time
        search.tell(c, select_mod.objective_ns(space, r.measurements) if ok else None,
                    failure=None if ok else (str(r.status) if r is not None else "failed"),
                    cost_s=spent.of(r) if r is not None else None, **parts)

    said: set[str] = set()       # the line about a program showing fewer iterations than planned: once a sweep

    def on_result(r: JobResult) -> None:
        if not said and r.sampling is not None and sampling.cost_line(r.sampling):
            said.add(r.tag)
            progress.note(f"{space.name}: {sampling.cost_line(r.sampling)}")
        key = str(Status.BUILT if opts.dry_run and r.status == Status.OK else r.status)   # a dry run measures nothing
        counts[key] = counts.get(key, 0) + 1
        results[r.tag] = r
        progress.finished(r)
        if r.tag in by_tag:
            tell(by_tag[r.tag], r)

    finds_running = executors.executor(opts.executor).finds_running

    def ask(n: int) -> list[executors.PendingJob]:
        """Up to n jobs to run (a static plan: all of it at once): the strategy's next configs,
        rendered; those measured before are told at once and not run again."""
        pending: list[executors.PendingJob] = []
        while len(pending) < n:
            batch = search.ask(n - len(pending))
            if not batch:
                break
            tags = tags_for(space, list(all_tags) + batch)
            done_before, job_tags = 0, set()
            progress.add(len(batch) * len(space.slurm.partitions or ("",)))   # before any is counted done
            for c in batch:
                all_tags[c] = tags[c]
                for part in space.slurm.partitions or ("",):   # one job per GPU partition (slurm.partitions)
                    t = by_gpu.partition_tag(tags[c], part) if part else tags[c]
                    by_tag[t] = c
                    job_tags.add(t)
                    job = sw.render(c, t, partition=part)
                    go = opts.dry_run or executors.should_run(job.dir, job.config_hash, opts.retry_failed)[0]
                    if go and (finds_running or not executors.running_elsewhere(job.dir)):
                        pending.append(job)
                        continue
                    r = read_result(job.dir)
                    r = r if r is not None and r.config_hash == job.config_hash else None
                    if r is not None:
                        results[r.tag] = r
                        progress.counted(r)
                    done_before += 1
                    tell(c, r)
            sw.manifest = dataclasses.replace(
                sw.manifest, tags=tuple(sorted(set(sw.manifest.tags) | job_tags)),
                skipped=tuple(Skip(tag_of(space, s.config), s.reason, s.config.as_dict()) for s in search.skipped))
            sw.save_manifest()
            if done_before:
                progress.note(f"  {done_before} already measured (resumed): skipped")
        return pending

    progress = Progress(space.name)
    print(f"{space.name}: {note}; backend {space.profile.backend}; executor {opts.executor}"
          + (" (dry run: render and compile only)" if opts.dry_run else ""), file=sys.stderr)
    if opts.executor != "replay" and (not_own := declared_not_own(space)):
        print(f"{space.name}: {not_own}", file=sys.stderr)
    sw.stream(ask, progress, on_result)
    progress.close()
    stopped = (f"{space.strategy.name} stopped after {len(results)} evaluations: {search.stopped}"
               if getattr(search, "stopped", "") else "")
    if stopped:
        print(f"{space.name}: {stopped}", file=sys.stderr)

    # the run's record (what bench/sweep_overhead.py --analyze reads) is written before the results, so
    # the report they include says why this run's search stopped; completed once they are written
    sw.manifest = sw.manifest.with_run({"started": started, "executor": opts.executor,
                                        "backend": space.profile.backend, "dry_run": opts.dry_run, "counts": counts,
                                        "stopped": stopped})
    sw.save_manifest()
    results_dir = Path(opts.results_root) / space.name
    prepared.wait()
    best, conf = (None, Confirmation()) if opts.dry_run else \
        finish_mod.finish(space, sw, results_dir, confirm=opts.confirm,
                          certify_picks=False if replaying else opts.certify)   # a race needs new samples
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    sw.manifest = sw.manifest.with_run_ended({
        "finished": time.time(), "model_export_s": prepared.seconds, "model_export_interval": prepared.interval,
        "gpu_occupancy": sw.occupancy, "driver_cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)})
    sw.save_manifest()
    return RunSummary(space.name, sweep_dir, results_dir, counts, best, conf, time.monotonic() - t0, note,
                      no_legal=no_legal_line(space, search.skipped) if not all_tags else "")
