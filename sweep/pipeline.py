"""A whole sweep, stage after stage: the functions the CLI calls.

    run      space -> strategy -> render -> dispatch (build, verify, profile)
             -> collect -> select -> confirm (combined best and defaults, end to
             end) -> results/<sweep>/ (tables, best.json, best/conf.cuh, report)
    status   a sweep's state from its files alone (any shell, any time)
    collect  re-collect and re-select from the result files
    clean    remove build products (results kept), or everything with all=True

Each stage is a module of plain functions; this one only strings them together,
checks up front what a run needs (tools, GPUs) and says what is missing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from sweep import atomic, collect as collect_mod, dispatch, render, select as select_mod, strategies, target
from sweep.errors import SweepError
from sweep.job import FAILED, JobResult, read_result
from sweep.space import Config, Space, config_hash, make_config, tag as tag_of, tags_for

ROOT = target.ROOT
OBJECT_CACHE = "_cache/objects"


@dataclass(frozen=True, slots=True)
class Options:
    executor: str = "local"
    jobs_root: Path = ROOT / "jobs"
    results_root: Path = ROOT / "results"
    dry_run: bool = False
    arch: str | None = None               # overrides build.arch (a dry run on a machine without a GPU)
    retry_failed: bool = False
    confirm: bool = True                  # run the combined best and the defaults end to end
    report: bool = True
    poll_s: float = 0.1
    slurm: dict[str, Any] = field(default_factory=dict)   # overrides of the space's slurm settings


@dataclass(frozen=True, slots=True)
class RunSummary:
    sweep: str
    sweep_dir: Path
    results_dir: Path
    counts: dict[str, int]
    best: select_mod.Best | None
    confirmation: dict[str, Any]
    seconds: float
    note: str


def apply_overrides(space: Space, *, name: str | None = None, strategy: str | None = None, backend: str | None = None,
                    samples: int | None = None, slurm: dict[str, Any] | None = None) -> Space:
    """The space with command-line overrides (the CLI wins over the file)."""
    if name:
        from sweep.space import NAME_RE

        if not NAME_RE.match(name):
            raise SweepError(f"--name {name!r} must be letters, digits, '.', '_' or '-'")
        space = dataclasses.replace(space, name=name)
    if strategy:
        if strategy not in strategies.STRATEGIES:
            raise SweepError(f"--strategy {strategy!r}: choose one of {', '.join(strategies.STRATEGIES)}")
        space = dataclasses.replace(space, strategy=dataclasses.replace(space.strategy, name=strategy))
    if samples:
        space = dataclasses.replace(space, strategy=dataclasses.replace(space.strategy, samples=samples))
    if backend:
        from sweep.space import BACKENDS

        if backend not in BACKENDS:
            raise SweepError(f"--backend {backend!r}: choose one of {', '.join(BACKENDS)}")
        space = dataclasses.replace(space, profile=dataclasses.replace(space.profile, backend=backend))
    if slurm:
        valid = set(space.slurm.__slots__)
        bad = [k for k in slurm if k not in valid]
        if bad:
            raise SweepError(f"unknown Slurm option(s) {', '.join(bad)}; valid: {', '.join(sorted(valid))}")
        space = dataclasses.replace(space, slurm=dataclasses.replace(space.slurm, **slurm))
    return space


def preflight(space: Space, opts: Options) -> list[str]:
    """What a run needs here, checked before anything is rendered; raises with what is missing."""
    notes = []
    for what, path in (("--jobs-dir", opts.jobs_root), ("the target's source folder", space.target.source_dir)):
        if any(ch.isspace() for ch in str(path)):
            raise SweepError(f"{what} {str(path)!r} contains whitespace, which make (and the job scripts) split "
                             "into several paths; use a folder whose path has no spaces")
    needs_local_build = opts.executor in ("local", "debug") or opts.dry_run
    if needs_local_build:
        for tool, hint in (("make", "install make (Debian: apt install make)"),
                           ("nvcc", "load CUDA (e.g. module load cuda) or add its bin/ to PATH")):
            if not shutil.which(tool):
                raise SweepError(f"{tool} not found on PATH: {hint}")
        if opts.dry_run and list(space.build.arch) == ["auto"] and not opts.arch and not shutil.which("nvidia-smi"):
            raise SweepError("a dry run here needs an architecture to compile for (no GPU to detect): pass --arch sm_90")
    if opts.dry_run:
        return notes
    if opts.executor in ("local", "debug"):
        if not dispatch.visible_gpus():
            raise SweepError("no GPU visible here (nvidia-smi finds none, or CUDA_VISIBLE_DEVICES is empty): run on a "
                             "GPU node, use --executor slurm from a login node, or --dry-run to only render and compile")
        backend = space.profile.backend
        if backend in ("nsys", "ncu") and not (os.environ.get(backend.upper()) or shutil.which(backend)):
            raise SweepError(f"{backend} not found: put it on PATH or set {backend.upper()}=/path/to/{backend}, "
                             f"or use --backend events (the engine's own CUDA-event timing)")
    if opts.executor == "slurm":
        from sweep import slurm

        slurm.executor_parameters(space.slurm, space.name)  # refuses what an #SBATCH line cannot carry, before rendering
        if not shutil.which("sbatch"):
            raise SweepError("sbatch not found: --executor slurm runs on a Slurm login node; use --executor local on a GPU machine")
    return notes


def model_dir_for(space: Space, jobs_root: Path) -> Path | None:
    """Where the engine's export for this space lives (shared by every sweep of the same model)."""
    model = space.target.model
    if model is None:
        return None
    key = model.get("model_dir") and "local-" + Path(model["model_dir"]).name or f"{model['preset']}-seed{model['seed']}"
    return Path(jobs_root) / "_models" / key


def model_paths(space: Space, jobs_root: Path) -> dict[str, str]:
    out = model_dir_for(space, jobs_root)
    return {} if out is None else {"weights": str(out / "gpt2.bin"), "reference": str(out / "reference.bin")}


def prepare_model(space: Space, jobs_root: Path) -> dict[str, str]:
    """Export the engine's weights and references once per model (reused when it matches)."""
    out = model_dir_for(space, jobs_root)
    if out is None:
        return {}
    from sweep import engine_export

    model = space.target.model
    model_dir = Path(model["model_dir"]).expanduser() if model.get("model_dir") else None
    e = engine_export.ensure_export(out, preset=model.get("preset", "124M"), seed=int(model.get("seed", 0)), model_dir=model_dir)
    return {"weights": str(e.weights), "reference": str(e.reference)}


class ModelExport:
    """The model export, run alongside the builds (they do not need it); measuring waits for it."""

    def __init__(self, space: Space, jobs_root: Path, skip: bool):
        from concurrent.futures import ThreadPoolExecutor

        self.paths = model_paths(space, jobs_root)
        self.interval: list[float] = []  # [start, end] wall-clock times of the export, once it ran
        self._pool = None
        self._future = None
        if self.paths and not skip:
            print(f"model: exporting or reusing {model_dir_for(space, jobs_root)} while the builds run", file=sys.stderr)
            self._pool = ThreadPoolExecutor(max_workers=1)
            self._future = self._pool.submit(self._run, space, jobs_root)

    def _run(self, space: Space, jobs_root: Path) -> dict[str, str]:
        t0 = time.time()
        try:
            return prepare_model(space, jobs_root)
        finally:
            self.interval = [t0, time.time()]

    @property
    def seconds(self) -> float:
        return self.interval[1] - self.interval[0] if self.interval else 0.0

    def ready(self) -> bool:
        """True once the export is done; raises its error if it failed."""
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
class _Sweep:
    space: Space
    opts: Options
    sweep_dir: Path
    digest: str
    commit: str
    model: dict[str, str]
    manifest: dict[str, Any]
    export: "ModelExport | None" = None

    def render(self, config: Config | None, tag: str, role: str = "sweep") -> dispatch.PendingJob:
        h = config_hash(self.space, config, self.digest) if config else config_hash(
            self.space, Config(()), self.digest)
        space = self.space
        if self.opts.arch:
            space = dataclasses.replace(space, build=dataclasses.replace(space.build, arch=(self.opts.arch,)))
        jc = render.job_config(space, config, tag, h, self.commit, self.model, role)
        rendered = render.render_job(space, jc, self.opts.jobs_root, self.opts.jobs_root / OBJECT_CACHE)
        render.write_job(rendered)
        return dispatch.PendingJob(tag, rendered.dir, h)

    def save_manifest(self) -> None:
        atomic.write_json(self.sweep_dir / collect_mod.MANIFEST, self.manifest)


def _dispatch(sw: _Sweep, jobs: list[dispatch.PendingJob], progress: dispatch.Progress,
              on_result: Callable[[JobResult], None]) -> None:
    stages = "build" if sw.opts.dry_run else "all"
    folder = sw.sweep_dir / "_dispatch"
    gate = sw.export.ready if sw.export is not None else (lambda: True)
    if sw.opts.executor != "local" and sw.export is not None:
        sw.export.wait()  # the local executor builds meanwhile; the others need the model at once
    if sw.opts.executor == "debug":
        dispatch.run_debug(jobs, stages, progress, on_result, folder)
    elif sw.opts.executor == "local":
        dispatch.run_local(jobs, stages, progress, on_result, folder, poll_s=sw.opts.poll_s,
                           timeout_min=sw.space.slurm.time_min, ready_to_measure=gate)
    elif sw.opts.executor == "slurm":
        from sweep import slurm

        slurm.run_array(jobs, stages, progress, on_result, sw.sweep_dir, sw.space.slurm, poll_s=max(sw.opts.poll_s, 5.0))
    else:
        raise SweepError(f"--executor {sw.opts.executor!r}: choose one of {', '.join(dispatch.EXECUTORS)}")


def run(space_path: Path | str, opts: Options = Options(), **overrides: Any) -> RunSummary:
    import resource

    t0, started = time.monotonic(), time.time()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    # Absolute from here on: Makefiles run with make -C inside each job folder.
    opts = dataclasses.replace(opts, jobs_root=Path(opts.jobs_root).resolve(), results_root=Path(opts.results_root).resolve())
    space = apply_overrides(target.load(space_path), **overrides)
    preflight(space, opts)
    sweep_dir = Path(opts.jobs_root) / space.name
    sweep_dir.mkdir(parents=True, exist_ok=True)
    digest, commit = target.source_digest(space.target), target.commit(space.target.source_dir)
    export = ModelExport(space, opts.jobs_root, skip=opts.dry_run)
    model = export.paths
    search = strategies.start(space)
    n, product = space.size()
    manifest = {"schema": "sweep-manifest/1", "sweep": space.name, "space": str(Path(space_path).resolve()),
                "strategy": space.strategy.name, "backend": space.profile.backend, "executor": opts.executor,
                "grid_size": n, "grid_product": product, "commit": commit, "source_digest": digest,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "tags": [], "skipped": [], "note": ""}
    old = sweep_dir / collect_mod.MANIFEST
    if old.is_file():
        try:
            prev = json.loads(old.read_text())
            manifest["created"] = prev.get("created", manifest["created"])
            manifest["runs"] = prev.get("runs", [])
        except ValueError:
            pass
    sw = _Sweep(space, opts, sweep_dir, digest, commit, model, manifest, export)

    counts: dict[str, int] = {}
    results: dict[str, JobResult] = {}

    def on_result(r: JobResult) -> None:
        counts[r.status] = counts.get(r.status, 0) + 1
        results[r.tag] = r
        progress.finished(r)

    parallel = {"local": max(1, len(dispatch.visible_gpus())), "debug": 1}.get(opts.executor, space.slurm.array_parallelism)
    progress = dispatch.Progress(space.name, 0)
    all_tags: dict[Config, str] = {}
    note = getattr(getattr(search, "plan", None), "note", "") or f"{space.strategy.name}: up to {space.strategy.samples} trials"
    manifest["note"] = note
    print(f"{space.name}: {note}; backend {space.profile.backend}; executor {opts.executor}"
          + (" (dry run: render and compile only)" if opts.dry_run else ""), file=sys.stderr)
    while True:
        batch = search.ask(parallel)
        if not batch:
            break
        tags = tags_for(space, list(all_tags) + batch)
        pending, done_before = [], []
        for c in batch:
            t = tags[c]
            all_tags[c] = t
            job = sw.render(c, t)
            go, why = dispatch.should_run(job.dir, job.config_hash, opts.retry_failed)
            if opts.dry_run:
                go = True
            if go and dispatch.running_elsewhere(job.dir):
                go, why = False, "running in another driver"
            (pending if go else done_before).append((job, why))
        manifest["tags"] = sorted(set(manifest["tags"]) | {t for t in tags.values()})
        manifest["skipped"] = [{"tag": tag_of(space, s.config), "reason": s.reason, "macros": s.config.as_dict()}
                               for s in search.skipped]
        sw.save_manifest()
        progress.total += len(batch)
        for job, why in done_before:
            r = read_result(job.dir)
            if r is not None and r.config_hash == job.config_hash:
                results[r.tag] = r
                progress.counts[r.status] = progress.counts.get(r.status, 0) + 1
        if done_before:
            print(f"  {len(done_before)} already measured (resumed): skipped", file=sys.stderr)
        _dispatch(sw, [j for j, _ in pending], progress, on_result)
        for c in batch:
            r = results.get(all_tags[c])
            search.tell(c, dispatch.objective_ns(space, r.measurements) if r and r.status == "ok" else None)
    progress.close()

    results_dir = Path(opts.results_root) / space.name
    export.wait()
    best, conf = (None, {}) if opts.dry_run else finish(space, sw, results_dir, confirm=opts.confirm)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    manifest.setdefault("runs", []).append({  # what bench/sweep_overhead.py --analyze reads
        "started": started, "finished": time.time(), "executor": opts.executor, "backend": space.profile.backend,
        "dry_run": opts.dry_run, "counts": counts, "model_export_s": export.seconds, "model_export_interval": export.interval,
        "driver_cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)})
    sw.save_manifest()
    return RunSummary(space.name, sweep_dir, results_dir, counts, best, conf, time.monotonic() - t0, note)


def finish(space: Space, sw: _Sweep, results_dir: Path, confirm: bool) -> tuple[select_mod.Best | None, dict]:
    """Collect, select, confirm the combined best against the defaults, write results."""
    c = collect_mod.collect(sw.sweep_dir)
    if c.measurements.empty:
        collect_mod.write_tables(c, results_dir)
        print("no configuration was measured: nothing to select (see the failures above)", file=sys.stderr)
        return None, {}
    best = select_mod.select(space, c.measurements)
    if confirm and best.choices:
        best_cfg = make_config(space, {p.macro: best.config[p.macro] for p in space.swept})
        jobs = [sw.render(None, render.BASELINE_TAG, role="baseline"), sw.render(best_cfg, "best", role="best")]
        jobs = [j for j in jobs if dispatch.should_run(j.dir, j.config_hash, sw.opts.retry_failed)[0]]
        if jobs:
            print(f"confirming end to end: {', '.join(j.tag for j in jobs)}", file=sys.stderr)
            progress = dispatch.Progress(space.name + ":confirm", len(jobs))
            _dispatch(sw, jobs, progress, lambda r: progress.finished(r))
            progress.close()
        c = collect_mod.collect(sw.sweep_dir)
        best = select_mod.select(space, c.measurements)
    conf = select_mod.confirmation(space, c.measurements, c.configs, best)
    collect_mod.write_tables(c, results_dir)
    atomic.write_json(results_dir / "manifest.json", c.manifest)
    jc = render.job_config(space, make_config(space, {p.macro: best.config[p.macro] for p in space.swept}), "best",
                           "-", sw.commit)
    select_mod.write_best(best, results_dir, render.render_conf(jc))
    atomic.write_json(results_dir / "confirmation.json", conf)
    if sw.opts.report:
        try:
            from sweep import report

            report.write_report(results_dir, space=space)
        except Exception as e:  # the report is a view: the results above are already written
            print(f"warning: report.html not written ({type(e).__name__}: {e}); the tables and best/conf.cuh are; "
                  f"retry with `python config_sweep.py report {space.name}`", file=sys.stderr)
    return best, conf


def status(sweep: str, jobs_root: Path = ROOT / "jobs") -> dict[str, Any]:
    """Counts and running jobs of a sweep, from its files alone."""
    sweep_dir = Path(jobs_root) / sweep
    c = collect_mod.collect(sweep_dir)
    counts = c.configs["status"].value_counts().to_dict() if not c.configs.empty else {}
    running = []
    for d in collect_mod.job_dirs(sweep_dir):
        st = d / "state.json"
        if st.is_file():
            try:
                s = json.loads(st.read_text())
                running.append({"tag": d.name, **s})
            except ValueError:
                pass
    failures = c.configs[c.configs["status"].isin(FAILED)][["tag", "status", "stage", "reason", "log"]].to_dict("records") \
        if not c.configs.empty else []
    return {"sweep": sweep, "manifest": c.manifest, "counts": counts, "running": running, "failures": failures}


def recollect(sweep: str, jobs_root: Path = ROOT / "jobs", results_root: Path = ROOT / "results") -> tuple[select_mod.Best | None, dict]:
    sweep_dir = Path(jobs_root) / sweep
    manifest = collect_mod.read_manifest(sweep_dir)
    space = target.load(manifest["space"])
    space = dataclasses.replace(space, name=sweep)
    sw = _Sweep(space, Options(jobs_root=jobs_root, results_root=results_root), sweep_dir, manifest.get("source_digest", ""),
                manifest.get("commit", ""), {}, manifest)
    return finish(space, sw, Path(results_root) / sweep, confirm=False)


def clean(sweep: str, jobs_root: Path = ROOT / "jobs", results_root: Path = ROOT / "results", everything: bool = False) -> list[Path]:
    """Remove build products and raw profiles (result.json files stay), or the whole sweep with everything=True."""
    sweep_dir = Path(jobs_root) / sweep
    if not sweep_dir.is_dir():
        raise SweepError(f"no sweep {sweep!r} under {jobs_root}; `python config_sweep.py status` lists none by that name")
    removed = []
    if everything:
        for d in (sweep_dir, Path(results_root) / sweep):
            if d.exists():
                shutil.rmtree(d)
                removed.append(d)
        return removed
    for d in collect_mod.job_dirs(sweep_dir):
        for p in [d / "build", *d.glob("*.nsys-rep"), *d.glob("*.sqlite"), *d.glob("*.ncu-rep")]:
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
            else:
                continue
            removed.append(p)
    return removed
