"""What a run needs, checked before anything is rendered: tools, architectures, the
target's placeholders and programs, what the executor needs, and settings that cannot go together.
Each refusal is one SweepError naming the file or option and the fix."""

from __future__ import annotations

import re
import shutil
import string
from pathlib import Path
from typing import Any

from sweep import dispatch as executors, plan as strategies, profile
from sweep.dispatch import replay
from sweep.node import build
from sweep.core import safe
from sweep.core.errors import SweepError
from sweep.node.process import Tools
from sweep.records import JobSettings
from sweep.space import Space, workloads


def preflight(space: Space, opts: Any) -> None:
    """What a run needs here (opts: pipeline.Options), checked before anything is rendered; raises with
    what is missing."""
    for what, path in (("--jobs-dir", opts.jobs_root),) + ((("the target's source folder", space.target.source_dir),)
                                                        if opts.executor != "replay" else ()):
        safe.check_make_path(path, what)    # the job Makefiles and scripts name both unquoted
    cls = executors.executor(opts.executor)
    if space.slurm.partitions and opts.executor != "slurm":
        raise SweepError(f"{space.path}: slurm.partitions measures every configuration on each of "
                         f"{', '.join(space.slurm.partitions)}: run it with --executor slurm, or remove partitions")
    if len(space.slurm.partitions) > 1 and strategies.spec(space).search is not None:
        raise SweepError(f"{space.path}: strategy {space.strategy.name} learns from one objective, but slurm.partitions "
                         f"measures on {len(space.slurm.partitions)} GPU models; run one sweep per partition "
                         "(--partition P --name NAME-P), or use grid, random, factorized or tuples")
    if _replay(space, opts):
        return
    if opts.executor == "slurm" and space.slurm.build_partition and list(space.build.arch) == ["auto"] and not opts.arch:
        raise SweepError(f"{space.path}: slurm.build_partition {space.slurm.build_partition!r} builds on nodes without "
                         "a GPU to detect the architecture from (build.arch: auto); set build.arch (e.g. [sm_90]) "
                         "or pass --arch sm_90")
    if opts.executor in ("local", "debug") or opts.dry_run:
        for tool, hint in (("make", "install make (Debian: apt install make)"),
                           ("nvcc", "load CUDA (e.g. module load cuda) or add its bin/ to PATH")):
            if not shutil.which(tool):
                raise SweepError(f"{tool} not found on PATH: {hint}")
        if opts.dry_run and list(space.build.arch) == ["auto"] and not opts.arch and not shutil.which("nvidia-smi"):
            raise SweepError("a dry run here needs an architecture to compile for (no GPU to detect): pass --arch sm_90")
    if opts.executor in ("local", "debug") or opts.dry_run:
        build.check_archs([opts.arch] if opts.arch else list(space.build.arch))
    if opts.arch and not re.match(r"^sm_\d+[a-z]?\Z", opts.arch):    # it reaches make's command line
        raise SweepError(f"--arch {opts.arch!r} is not a GPU architecture; write e.g. --arch sm_90")
    workloads.check_programs(space.path, space.workloads, space.target)   # a plugin's are checked only here
    check_placeholders(space, opts.jobs_root)
    cls.preflight(space, opts.dry_run)
    if opts.dry_run or opts.executor == "slurm":
        return
    be = profile.backend(space.profile.backend)
    tools = Tools.find(JobSettings(nsys=getattr(opts, "nsys", ""), ncu=getattr(opts, "ncu", "")))
    if be.tool and not tools.path(be.tool):
        raise SweepError(f"{be.tool} not found: put it on PATH, set {be.tool.upper()}=/path/to/{be.tool} or pass "
                         f"--{be.tool} PATH, or use --backend events (the program's own CUDA-event timing)")


def _replay(space: Space, opts: Any) -> bool:
    """True for a replay (its checks done here: the recording matches the space); a T1 space
    (no Makefile) or --from on another executor is refused."""
    source = getattr(opts, "replay_from", None)
    if opts.executor != "replay":
        if source is not None:
            raise SweepError(f"--from {source} is the replay executor's recording: add --executor replay, or drop --from")
        if space.target.replay_only:
            raise SweepError(f"{space.path} is a T1 space: it names a kernel, not a Makefile target, so it can only be "
                             "replayed: run it with --executor replay --from RECORDING (a Kernel Tuner cache or T4 "
                             "results)")
        return False
    if source is None:
        raise SweepError("--executor replay needs --from FILE: a Kernel Tuner cache or T4 results file (.json or "
                         ".json.gz), or a sweep's results/<name>/ folder")
    executors.executor("replay").preflight(space, opts.dry_run)
    replay.index(space, Path(source))
    return True


JOB_PLACEHOLDERS = ("build", "job", "batch", "seq_len", "iterations", "warmup", "events_json")


def check_placeholders(space: Space, jobs_root: Path) -> None:
    """Every {placeholder} in the target's commands is one a job fills in: a typo fails
    here, not in every job."""
    plugin = space.target.plugin
    known = set(JOB_PLACEHOLDERS) | set(plugin.values(jobs_root) if plugin is not None else ())
    t = space.target
    checks = () if isinstance(t.verify, str) else t.verify
    programs = [(f"programs.{name}.{part}", cmd) for name, p in t.programs.items()
                for part, cmd in (("profile", p.profile), ("events", p.events), ("check_args", p.check_args))]
    for where, cmd in [*(("verify", c) for c in checks), ("profile", t.profile), ("events", t.events),
                       ("check_args", t.check_args), *programs]:
        for word in cmd:
            if word == "{args}":
                continue
            try:
                fields = [f for _, f, _, _ in string.Formatter().parse(word) if f is not None]
            except ValueError as e:
                raise SweepError(f"{space.path}: target.{where} word {word!r} is not a valid template ({e}); "
                                 "write a literal brace as {{ or }}") from None
            for f in fields:
                name = f.split(".")[0].split("[")[0]
                if name not in known:
                    raise SweepError(f"{space.path}: target.{where} word {word!r} uses {{{name}}}, which no job "
                                     f"fills in; placeholders: {', '.join(sorted(known))}, and {{args}} as a word")
