"""Workloads: the runs every configuration of a space is measured on (`workloads:` in a space file).

A launch size's best value depends on the shape it runs at (at 4096 rows a LayerNorm
row wants one warp, at 256 rows a block of 256 threads), and a program is rarely run at
one shape only: an inference server prefills long and short prompts and decodes token
by token. A space may therefore list named runs, each with how often it happens:

    workloads:
      - {name: prefill, weight: 1, batch: 4, seq_len: 1024}
      - {name: decode, weight: 20, program: generate, batch: 1, seq_len: 64}

Each configuration is built once and measured on every workload (sweep.node.measure); the
picks are made per workload and overall, by the weighted objective (sweep.decide.objective).

A workload's `program` must be one of the target's programs: a custom target's, declared
in the same file, are checked when the file loads; a plugin target's (the engine's come
from gpt2_engine) when a sweep is about to run (sweep.pipeline.preflight), before anything is
rendered: a plugin may gain or rename programs independently of the file, and the
snapshot of a sweep that ran must still load (collect, report) whatever the plugin
offers now.

Fields a workload leaves out come from `run:` (batch, seq_len, iterations, warmup). Its
`args` ({args} in the command) default to run.args when it runs the target's default
program, and to none when it names another one (`program:`, one of target.programs):
run.args are the default program's arguments. `weight` (a number > 0, default 1) is how
often the run happens relative to the others; it is not part of what a job measures, so
changing the weights re-selects from the measurements without running anything again.

A space without `workloads:` measures the one run `run:` describes, named DEFAULT (""):
its jobs, rows and picks are exactly those of a sweep from before workloads existed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from sweep.core.errors import SweepError
from sweep.space.model import Run, Target, Workload  # noqa: F401  (Workload: importable from here too)
from sweep.space.sections import NAME_RE, RUN_BOUNDS, Section, custom_target, plain, show

if TYPE_CHECKING:
    from sweep.space.model import Space

DEFAULT = ""            # the one run of a space without workloads (and the workload of rows from before them)
MAX_WORKLOADS = 32      # every configuration runs every workload
MAX_NAME = 64
MAX_WEIGHT = 1e12
KEYS = ("name", "weight", "program", "batch", "seq_len", "iterations", "warmup", "args")


def of_run(run: Run) -> Workload:
    """The one run of a space without workloads."""
    return Workload(DEFAULT, 1.0, run.batch, run.seq_len, run.iterations, run.warmup, tuple(run.args))


def measured(space: "Space") -> tuple[Workload, ...]:
    """The runs each configuration is measured on: the space's workloads, or run:'s one run."""
    return space.workloads or (of_run(space.run),)


def weights(space: "Space") -> dict[str, float]:
    """Workload name -> weight ({"": 1.0} without workloads)."""
    return {w.name: w.weight for w in measured(space)}


def parse(top: Section, path: Path, target: Target, run: Run) -> tuple[Workload, ...]:
    """The file's `workloads:` (() when it has none), each checked: one SweepError naming the
    file, the workload and the key. A custom target's program names are checked here; a
    plugin target's by check_programs before a run (see the module docstring)."""
    raw = top.data.get("workloads")
    if raw is None:
        return ()
    where = top.at("workloads")
    if not isinstance(raw, list):
        raise SweepError(f"{where}: expected a list of runs, each a mapping with {', '.join(KEYS)}; got {show(raw)}")
    if not raw:
        raise SweepError(f"{where}: the list is empty; list at least one run, or remove workloads: to measure run: alone")
    if len(raw) > MAX_WORKLOADS:
        raise SweepError(f"{where}: {len(raw)} runs, over the {MAX_WORKLOADS} a space may have (every configuration "
                         "runs every workload); keep the runs that matter most")
    out: list[Workload] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        w = _workload(item, f"{where}[{i}]", run)
        if w.name in seen:
            raise SweepError(f"{where}[{i}] ({w.name}).name: {w.name!r} is also the name of workloads[{seen[w.name]}]; name each "
                             "run once (names label its rows and picks)")
        seen[w.name] = i
        out.append(w)
    if custom_target(top):
        check_programs(path, out, target)
    return tuple(out)


def check_programs(path: Path, workloads: Sequence[Workload], target: Target) -> None:
    """One SweepError, naming the file, the workload and the target's programs, for the first
    workload whose program the target does not have."""
    plugin = target.plugin is not None or target.model is not None
    for i, w in enumerate(workloads):
        if w.program is None or w.program in target.programs:
            continue
        known = ", ".join(map(plain, sorted(target.programs))) or "none besides its default program"
        fix = f"the {target.name} plugin declares its programs" if plugin else "declare it under target.programs"
        raise SweepError(f"{path}: workloads[{i}] ({w.name}).program: {show(w.program)} is not a program of the "
                         f"target {target.name} (its programs: {known}); name one of them ({fix}), or leave program "
                         "out for the default program")


def _workload(item: Any, where: str, run: Run) -> Workload:
    """One entry of `workloads:` (its program name checked by check_programs)."""
    name = item.get("name") if isinstance(item, dict) else None
    if isinstance(name, str) and name.isprintable() and len(name) <= MAX_NAME:
        where = f"{where} ({name})"
    s = Section(item, where, KEYS)
    if "name" not in s.data:
        raise SweepError(f"{where}: missing 'name'; name each run (e.g. name: decode): it labels its rows and picks")
    if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > MAX_NAME:
        raise SweepError(f"{s.at('name')}: {show(name)} is not a workload name; use up to {MAX_NAME} letters, digits, "
                         "'.', '_' or '-', starting with a letter or digit")
    weight = s.data.get("weight", 1)
    if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not math.isfinite(weight) \
            or not 0 < weight <= MAX_WEIGHT:
        raise SweepError(f"{s.at('weight')}: {show(weight)} must be a number > 0 (how often this run happens relative "
                         "to the others; default 1)")
    program = s.str("program", None)
    size = {k: s.int(k, getattr(run, k), *RUN_BOUNDS[k]) for k in RUN_BOUNDS}
    args = s.strings("args", tuple(run.args) if program is None else ())
    return Workload(name, float(weight), size["batch"], size["seq_len"], size["iterations"], size["warmup"], args,
                    program)
