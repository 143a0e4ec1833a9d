"""Render a configuration into its job folder: jobs/<sweep>/<tag>/.

    conf.cuh     the launch sizes, one #define per macro (templates/conf.cuh.j2)
    Makefile     builds the target with this conf.cuh into ./build (templates/Makefile.j2)
    job.sbatch   reruns this one configuration by hand on Slurm (templates/job.sbatch.j2)
    config.json  everything the job needs on the GPU node (see JobConfig)

Rendering is pure (text in, text out); `write_job` is the only writer, and it
writes each file atomically and only when its content changed, so re-rendering
an unchanged sweep leaves make nothing to do. Templates use StrictUndefined, and
only validated integers and names reach them; tags and paths are checked to stay
inside the sweep's folder.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sweep import atomic
from sweep.errors import SweepError
from sweep.space import MACRO_RE, NAME_RE, Config, Space

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "templates"
OBJCACHE = Path(__file__).resolve().parent / "objcache.py"
CONFIG_SCHEMA = "sweep-job/1"
BASELINE_TAG = "default"     # the target's own launch sizes: a conf.cuh with no macros


@dataclass(frozen=True, slots=True)
class JobConfig:
    """What a job reads from its config.json on the GPU node."""

    schema: str
    sweep: str
    tag: str
    macros: dict[str, int]
    config_hash: str
    space_path: str
    commit: str
    target: dict[str, Any]              # name, source_dir, verify, profile, events
    build: dict[str, Any]               # arch, nvcc_flags, make_targets, jobs
    run: dict[str, Any]                 # batch, seq_len, warmup, iterations, args, verify
    profile: dict[str, Any]             # backend, ncu_iterations
    model: dict[str, str] = field(default_factory=dict)   # weights, reference paths (engine)
    role: str = "sweep"                 # sweep | baseline | best: why this job exists

    @classmethod
    def load(cls, job_dir: Path) -> "JobConfig":
        path = Path(job_dir) / "config.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise SweepError(f"cannot read {path}: {e}; render the job again with `python config_sweep.py run`") from None
        if data.get("schema") != CONFIG_SCHEMA:
            raise SweepError(f"{path} has schema {data.get('schema')!r}, this code reads {CONFIG_SCHEMA!r}; "
                             "render the job again with `python config_sweep.py run`")
        return cls(**data)


@dataclass(frozen=True, slots=True)
class RenderedJob:
    tag: str
    dir: Path
    files: dict[str, str]               # file name -> text
    config: JobConfig


def _env():
    import jinja2  # here, not at import: jobs on GPU nodes read JobConfig without rendering

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, autoescape=False)


def job_dir(jobs_root: Path, sweep: str, tag: str) -> Path:
    """jobs_root/sweep/tag, refusing names that could leave it."""
    if not NAME_RE.match(sweep):
        raise SweepError(f"sweep name {sweep!r} must be letters, digits, '.', '_' or '-'")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_]*", tag):
        raise SweepError(f"tag {tag!r} must be letters, digits and '_' (it names a folder)")
    root = Path(jobs_root).resolve()
    d = (root / sweep / tag).resolve()
    if d.parent != root / sweep:
        raise SweepError(f"job folder {d} would leave {root / sweep}")
    return d


def render_conf(job: JobConfig) -> str:
    for macro, value in job.macros.items():  # last line of defence: only macro names and ints reach C
        if not MACRO_RE.match(macro) or not isinstance(value, int) or isinstance(value, bool):
            raise SweepError(f"refusing to render {macro}={value!r}: macros are UPPER_CASE names with integer values")
    return _env().get_template("conf.cuh.j2").render(
        tag=job.tag, sweep=job.sweep, space_path=job.space_path, commit=job.commit, config_hash=job.config_hash,
        values=list(job.macros.items()),
    )


def render_makefile(job: JobConfig, cache_dir: Path) -> str:
    arch = job.build["arch"]
    return _env().get_template("Makefile.j2").render(
        tag=job.tag, sweep=job.sweep, space_path=job.space_path, commit=job.commit,
        target_name=job.target["name"], target_dir=job.target["source_dir"], python=sys.executable,
        objcache=str(OBJCACHE), cache_dir=str(cache_dir),
        arch="auto" if arch == ["auto"] else " ".join(arch),
        nvcc_flags=" ".join(shlex.quote(f) for f in job.build["nvcc_flags"]),
        make_targets=" ".join(job.build["make_targets"]),
    )


def render_sbatch(job: JobConfig, directory: Path, slurm: dict[str, Any]) -> str:
    return _env().get_template("job.sbatch.j2").render(
        tag=job.tag, sweep=job.sweep, space_path=job.space_path, commit=job.commit, job_dir=str(directory),
        slurm=slurm, root=str(ROOT), python=sys.executable,
    )


def job_config(space: Space, config: Config | None, tag: str, config_hash: str, commit: str,
               model: dict[str, str] | None = None, role: str = "sweep") -> JobConfig:
    """The JobConfig of `config` (None: the baseline with the target's own defaults)."""
    t = space.target
    return JobConfig(
        schema=CONFIG_SCHEMA, sweep=space.name, tag=tag, macros=config.as_dict() if config else {},
        config_hash=config_hash, space_path=str(space.path), commit=commit,
        target={"name": t.name, "source_dir": str(t.source_dir), "verify": [list(v) for v in t.verify],
                "profile": list(t.profile), "events": list(t.events)},
        build={"arch": list(space.build.arch), "nvcc_flags": list(space.build.nvcc_flags),
               "make_targets": list(space.build.make_targets), "jobs": space.build.jobs},
        run=asdict(space.run) | {"args": list(space.run.args)},
        profile=asdict(space.profile), model=dict(model or {}), role=role,
    )


def render_job(space: Space, job: JobConfig, jobs_root: Path, cache_dir: Path) -> RenderedJob:
    d = job_dir(jobs_root, space.name, job.tag)
    files = {
        "conf.cuh": render_conf(job),
        "Makefile": render_makefile(job, cache_dir),
        "job.sbatch": render_sbatch(job, d, space.slurm.to_dict()),
        "config.json": json.dumps(asdict(job), indent=2) + "\n",
    }
    return RenderedJob(job.tag, d, files, job)


def write_job(rendered: RenderedJob) -> Path:
    """Write the job's files (atomically; unchanged files are left alone)."""
    rendered.dir.mkdir(parents=True, exist_ok=True)
    for name, text in rendered.files.items():
        path = rendered.dir / name
        if path.is_file() and path.read_text() == text:
            continue
        atomic.write_text(path, text)
    return rendered.dir
