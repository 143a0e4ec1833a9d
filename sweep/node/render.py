"""Render a configuration into its job folder: jobs/<sweep>/<tag>/.

    conf.cuh     the launch sizes, one #define per macro (templates/conf.cuh.j2)
    Makefile     builds the target with this conf.cuh into ./build (templates/Makefile.j2): make
                 in the target's folder (the Makefile contract), or a CMake target's build
                 (sweep.node.cmake: the sweep's one configured tree, copied)
    job.sbatch   reruns this one configuration by hand on Slurm (templates/job.sbatch.j2)
    config.json  everything the job needs on the GPU node (see JobConfig)

Rendering is pure (text in, text out); `write_job` is the only writer, and it
writes each file atomically and only when its content changed, so re-rendering
an unchanged sweep leaves make nothing to do. Templates use StrictUndefined, and
only validated integers and names reach them; tags and paths are checked to stay
inside the sweep's folder.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

from sweep.core import atomic, paths, safe
from sweep.core.errors import SweepError
from sweep.node import resources
from sweep.records import JobConfig, JobSettings
from sweep.space import MACRO_RE, Config, Space, Target, Workload
from sweep.space.sections import sweep_name_problem
from sweep.space.workloads import check_programs

BASELINE_TAG = "default"     # the target's own launch sizes: a conf.cuh with no macros
MAKE_SYNTAX = re.compile(r"[$`#\"'\\\n\r]")   # make expands $(...), '#' starts a comment, the shell runs `...`


@dataclass(frozen=True, slots=True)
class RenderedJob:
    tag: str
    dir: Path
    files: dict[str, str]               # file name -> text
    config: JobConfig


@functools.lru_cache(maxsize=1)
def _env():
    """One environment a process, so each template is compiled once, not once a job (compiling
    them took most of a 4,000-point sweep's rendering)."""
    import jinja2  # here, not at import: jobs on GPU nodes read JobConfig without rendering

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(paths.TEMPLATES)), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, autoescape=False)


def job_dir(jobs_root: Path, sweep: str, tag: str) -> Path:
    """jobs_root/sweep/tag, refusing names that could leave it."""
    problem = sweep_name_problem(sweep)
    if problem:
        raise SweepError(f"sweep name {sweep!r} {problem}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_]*", tag):
        raise SweepError(f"tag {tag!r} must be letters, digits and '_' (it names a folder)")
    root = Path(jobs_root).resolve()
    d = (root / sweep / tag).resolve()
    if d.parent != root / sweep:
        raise SweepError(f"job folder {d} would leave {root / sweep}")
    return d


def one_line(text: str) -> str:
    """`text` for a comment line of a generated file: a newline in a path the user chose
    would otherwise end the comment and start a line of C, make or shell."""
    return "".join(c if c.isprintable() else "?" for c in text)


def render_conf(job: JobConfig) -> str:
    for macro, value in job.macros.items():  # last line of defence: only macro names and ints reach C
        if not MACRO_RE.match(macro) or not isinstance(value, int) or isinstance(value, bool):
            raise SweepError(f"refusing to render {macro}={value!r}: macros are UPPER_CASE names with integer values")
    return _env().get_template("conf.cuh.j2").render(
        tag=job.tag, sweep=job.sweep, space_path=one_line(job.space_path), commit=job.commit, config_hash=job.config_hash,
        values=list(job.macros.items()),
    )


def _make_words(what: str, words: list[str]) -> list[str]:
    for w in words:
        if MAKE_SYNTAX.search(w):
            raise SweepError(f"refusing build.{what} word {w!r}: {MAKE_SYNTAX.search(w).group()!r} would be expanded by "
                             "make or the shell; give the flag literally")
    return words


def macro_defines(job: JobConfig) -> list[str]:
    """-DNAME=value for each macro with build.macros: define (else none): names and
    integers checked again here, so nothing else reaches nvcc's command line."""
    if job.build.get("macros", "header") != "define":
        return []
    render_conf(job)     # refuses anything but MACRO_RE names with integer values
    return [f"-D{m}={v}" for m, v in job.macros.items()]


def render_makefile(job: JobConfig, cache_dir: Path) -> str:
    arch = job.build["arch"]
    _make_words("nvcc_flags", job.build["nvcc_flags"])
    _make_words("make_targets", job.build["make_targets"])
    for what, path in (("the target's folder", job.target["source_dir"]), ("the object cache", cache_dir)):
        safe.check_make_path(path, what)      # the space loader and the driver refused these already
    flags = [*job.build["nvcc_flags"], *macro_defines(job)]
    if resources.RESOURCE_FLAG not in flags:    # ptxas' registers, spills and shared memory into build.log
        flags.append(resources.RESOURCE_FLAG)
    cmake = job.target.get("build") == "cmake"
    return _env().get_template("Makefile.j2").render(
        tag=job.tag, sweep=job.sweep, space_path=one_line(job.space_path), commit=job.commit,
        target_name=job.target["name"], target_dir=job.target["source_dir"], python=sys.executable,
        objcache=str(paths.OBJCACHE), cache_dir=str(cache_dir),
        arch="auto" if arch == ["auto"] else " ".join(arch),
        nvcc_flags=" ".join(shlex.quote(f) for f in flags),
        make_targets=" ".join(job.build["make_targets"]),
        cmake=cmake, cmake_script=str(paths.CMAKE_BUILD), cmake_target=job.target.get("cmake_target", ""),
        cmake_args=" ".join(f"--cmake-arg={shlex.quote(a)}" for a in _make_words("cmake_args", list(
            job.target.get("cmake_args", ())))),
        cmake_flags=" ".join(f"--flag={shlex.quote(f)}" for f in flags),
    )


def render_sbatch(job: JobConfig, directory: Path, slurm: dict[str, Any]) -> str:
    return _env().get_template("job.sbatch.j2").render(
        tag=job.tag, sweep=job.sweep, space_path=one_line(job.space_path), commit=job.commit, job_dir=str(directory),
        slurm=slurm, pythonpath=job.settings.pythonpath, python=sys.executable,
    )


def job_config(space: Space, config: Config | None, tag: str, config_hash: str, commit: str,
               values: Mapping[str, str] | None = None, role: str = "sweep",
               settings: JobSettings | None = None) -> JobConfig:
    """The JobConfig of `config` (None: the baseline with the target's own defaults).
    `values`: placeholder values the target's prepare() made (the engine's weights)."""
    t = space.target
    check_programs(space.path, space.workloads, t)    # preflight did for a run; rendering never guesses
    return JobConfig(
        sweep=space.name, tag=tag, macros=config.as_dict() if config else {},
        config_hash=config_hash, space_path=str(space.path), commit=commit,
        target={"name": t.name, "source_dir": str(t.source_dir),
                "verify": t.verify if isinstance(t.verify, str) else [list(v) for v in t.verify],
                "profile": list(t.profile), "events": list(t.events), "check_args": list(t.check_args),
                # only where not the Makefile contract's defaults, so config.json of make targets reads as before
                **({"build": t.build, "cmake_target": t.cmake_target, "cmake_args": list(t.cmake_args)}
                   if t.build != "make" else {})},
        build={"arch": list(space.build.arch), "nvcc_flags": list(space.build.nvcc_flags),
               "make_targets": list(space.build.make_targets), "jobs": space.build.jobs,
               **({"macros": space.build.macros} if space.build.macros != "header" else {})},
        run=asdict(space.run) | {"args": list(space.run.args)},
        profile=asdict(space.profile) | {"kernels": governed_kernels(space)}, values=dict(values or {}), role=role,
        settings=settings or JobSettings(pythonpath=str(paths.IMPORT_ROOT)),
        workloads=[workload_entry(t, w) for w in space.workloads],
    )


def workload_entry(t: Target, w: Workload) -> dict[str, Any]:
    """A workload as config.json carries it: its sizes and args, and its program's commands
    (so the job needs nothing from the space file)."""
    program = t.program(w.program)
    return w.to_dict() | {"profile": list(program.profile), "events": list(program.events),
                          "check_args": list(program.check_args)}


def governed_kernels(space: Space) -> list[str]:
    """The kernel patterns the space's parameters govern: the streams a job's stopping rule watches."""
    out: list[str] = []
    for p in space.parameters:
        out.extend(k for k in p.kernels if k not in out)
    return out


def render_job(space: Space, job: JobConfig, jobs_root: Path, cache_dir: Path) -> RenderedJob:
    d = job_dir(jobs_root, space.name, job.tag)
    files = {
        "conf.cuh": render_conf(job),
        "Makefile": render_makefile(job, cache_dir),
        "job.sbatch": render_sbatch(job, d, space.slurm.to_dict()),
        "config.json": json.dumps(job.to_dict(), indent=2) + "\n",
    }
    return RenderedJob(job.tag, d, files, job)


def write_job(rendered: RenderedJob) -> Path:
    """Write the job's files (atomically; unchanged files are left alone)."""
    rendered.dir.mkdir(parents=True, exist_ok=True)
    for name, text in rendered.files.items():
        path = rendered.dir / name
        if path.is_file() and path.read_text() == text:
            continue
        atomic.write_text(path, text, durable=False)    # rendered again, and compared, on every run
    return rendered.dir
