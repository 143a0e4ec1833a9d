"""The settings sections of a space file: strategy, build, run, profile, slurm, certify, replay
(the target's section: sweep.space.target_section).

Each reader takes the file's top-level Section and returns the model's
dataclass, or raises one SweepError naming the file, the key, the bad value,
what is allowed and the fix. Values are shown with `show`, which keeps any
value, however large or odd, to one short line.

Strategy options are declared by the strategies themselves (sweep.plan:
each module's SPEC, with names, types, defaults and docs); `strategy` checks
the file against that declaration. Both shapes are read:

    strategy: {name: random, samples: 50, seed: 3}
    strategy: random            # with top-level samples: / seed: / tuples: {columns, rows}
"""

from __future__ import annotations

import re
import reprlib
from pathlib import Path
from typing import Any, Mapping

from sweep.core import safe
from sweep.core.errors import SweepError
from sweep.space import declared as declarations
from sweep.space.model import (BACKENDS, MAX_VALUE, STOPPING_WHEN, Build, Certify, Parameter, Profile, Replay, Run, Slurm,
                               Stopping, Strategy)

# \Z, not $: "$" also matches before a final newline, which would let "name\n" through
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")   # space, workload and program names: they name folders
# A sweep's name names jobs/<name>/, results/<name>/ and files joining two names
# (compare-A-vs-B.html); a folder name may have 255 bytes.
MAX_SWEEP_NAME = 100


def sweep_name_problem(name: Any) -> str | None:
    """Why `name` cannot name a sweep (None: it can), as the end of a one-line message."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        return "must be letters, digits, '.', '_' or '-' (it names jobs/<name>/)"
    if len(name) > MAX_SWEEP_NAME:
        return (f"is {len(name)} characters, over the {MAX_SWEEP_NAME} a sweep name may have (it names folders); "
                "choose a shorter name")
    return None
# Beyond letters and digits, what an nvcc flag may hold: each reaches make and two shells
# (the job's Makefile, the target's recipe), quoted for the shell; '#', '$', quotes,
# backslashes and newlines cannot be quoted for all three at once.
NVCC_FLAG_EXTRA = "_-=+,./:@%^~ "
# What a run's sizes may be (run: and each workload): (lowest, highest).
RUN_BOUNDS = {"batch": (1, 1 << 16), "seq_len": (1, 1 << 20), "warmup": (0, 10000), "iterations": (1, 100000)}

_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 80, 80, 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = 8
_REPR.maxdict, _REPR.maxlevel = 6, 3

# Keys of the older, flat shape: each carries these options of the strategy.
_FLAT_OPTIONS = {"samples": ("samples",), "seed": ("seed",), "tuples": ("columns", "rows")}


def show(value: Any) -> str:
    """repr, cut to one short line."""
    return _REPR.repr(value)


def plain(key: Any) -> str:
    return key if isinstance(key, str) and key.isprintable() and len(key) <= 40 else show(key)


class Section:
    """A mapping from the YAML file that knows where it is, for error messages."""

    def __init__(self, data: Any, where: str, allowed: tuple[str, ...]):
        if data is None:
            data = {}
        label = where[:-1] if where.endswith(":") else where   # the top level's where is "<file>:"
        if not isinstance(data, dict):
            raise SweepError(f"{label}: expected a mapping with keys {', '.join(allowed)}, "
                             f"got {type(data).__name__} {show(data)}")
        unknown = [k for k in data if k not in allowed]
        if unknown:
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise SweepError(f"{label}: unknown key(s) {', '.join(map(plain, unknown[:5]))}{more}; "
                             f"valid keys are: {', '.join(allowed)}")
        self.data, self.where = data, where

    def at(self, key: str) -> str:
        return f"{self.where}.{key}" if not self.where.endswith(":") else f"{self.where} {key}"

    def int(self, key: str, default: int, lo: int = 0, hi: int = MAX_VALUE) -> int:
        return integer(self.data.get(key, default), self.at(key), lo, hi)

    def str(self, key: str, default: str | None) -> str | None:
        v = self.data.get(key, default)
        if v is not None and not isinstance(v, str):
            raise SweepError(f"{self.at(key)}: {show(v)} must be a string")
        return v

    def number(self, key: str, default: float, lo: float, hi: float) -> float:
        v = self.data.get(key, default)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi:
            raise SweepError(f"{self.at(key)}: {show(v)} must be a number from {lo:g} to {hi:g}")
        return float(v)

    def bool(self, key: str, default: bool) -> bool:
        v = self.data.get(key, default)
        if not isinstance(v, bool):
            raise SweepError(f"{self.at(key)}: {show(v)} must be true or false")
        return v

    def strings(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        v = self.data.get(key, list(default))
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, (str, int, float)) for x in v):
            raise SweepError(f"{self.at(key)}: {show(v)} must be a list of strings")
        return tuple(str(x) for x in v)


def integer(v: Any, where: str, lo: int = 0, hi: int = MAX_VALUE) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise SweepError(f"{where}: {show(v)} must be an integer from {lo} to {hi}")
    return v


def strategy(top: Section, path: Path, params: list[Parameter]) -> Strategy:
    """The strategy and its options, checked against what the strategy declares."""
    REGISTRY = declarations.STRATEGIES   # the strategies' declarations (registered by sweep.plan)
    raw = top.data.get("strategy", "grid")
    given: dict[Any, tuple[Any, str]] = {}                 # option -> (value, where)
    written: list[tuple[Any, str, tuple]] = []             # (key as written, where, the options it carries)
    if isinstance(raw, dict):
        prefix = f"{path}: strategy"
        s = Section(raw, prefix, tuple(raw))
        if "name" not in raw:
            raise SweepError(f"{prefix}: missing 'name'; write e.g. strategy: {{name: random, samples: 20}}")
        name = s.str("name", None)
        flat = [k for k in _FLAT_OPTIONS if k in top.data]
        if flat:
            raise SweepError(f"{top.at(flat[0])}: with strategy: {{name: ...}} the options go inside it; move "
                             f"{flat[0]} into strategy:")
        given = {k: (v, s.at(k)) for k, v in raw.items() if k != "name"}
        written = [(k, where, (k,)) for k, (_, where) in given.items()]
    else:
        prefix = f"{path}: tuples"
        name = top.str("strategy", "grid")
        for key in (k for k in _FLAT_OPTIONS if k in top.data):
            written.append((key, top.at(key), _FLAT_OPTIONS[key]))
            if key == "tuples":
                t = Section(top.data[key], prefix, _FLAT_OPTIONS[key])
                given.update({k: (v, t.at(k)) for k, v in t.data.items()})
            else:
                given[key] = (top.data[key], top.at(key))
    if name not in REGISTRY:
        raise SweepError(f"{top.at('strategy')}: {show(name)} is not a strategy; choose one of {', '.join(REGISTRY)}")
    spec = REGISTRY[name]
    declared = {o.name: o for o in spec.options}
    for key, where, carried in written:
        if not any(o in declared for o in carried):
            raise SweepError(_not_taken(spec, key, where, carried, REGISTRY))
    options = {k: declared[k].check(v, where) for k, (v, where) in given.items()}
    if spec.check is not None:
        options = spec.check(options, params, lambda o: given[o][1] if o in given else f"{prefix}.{o}")
    return Strategy(name, options)


def _not_taken(spec: Any, key: Any, where: str, carried: tuple, registry: Mapping[str, Any]) -> str:
    readers = [n for n, s in registry.items() if any(o.name in carried for o in s.options)]
    takes = ", ".join(o.name if o.type is list else f"{o.name} (default {o.default!r})" for o in spec.options)
    takes = takes or "no options"
    if not readers:
        fix = f"no strategy reads {show(key)}: remove it"
    elif len(readers) == 1:
        fix = f"only the {readers[0]} strategy reads {show(key)}; set strategy: {readers[0]} or remove it"
    else:
        fix = (f"only the {', '.join(readers[:-1])} and {readers[-1]} strategies read {show(key)}; set strategy to "
               f"one of {', '.join(readers)}, or remove it")
    return f"{where}: {spec.name} does not take {show(key)} ({spec.name} takes {takes}); {fix}"


def build(top: Section, path: Path) -> Build:
    s = Section(top.data.get("build"), f"{path}: build", ("arch", "nvcc_flags", "make_targets", "jobs", "macros"))
    arch = s.strings("arch", ("auto",))
    for a in arch:
        if a != "auto" and not re.match(r"^sm_\d+[a-z]?\Z", a):
            raise SweepError(f"{s.at('arch')}: {show(a)} is not a GPU architecture; write sm_90, [sm_80, sm_90] or auto")
    if "auto" in arch and len(arch) > 1:
        raise SweepError(f"{s.at('arch')}: 'auto' detects the GPU on each node; do not list it with other architectures")
    d = Build()
    flags, targets = s.strings("nvcc_flags", d.nvcc_flags), s.strings("make_targets", d.make_targets)
    for flag in flags:
        c = safe.unsafe_char(flag, NVCC_FLAG_EXTRA)
        if c is not None:
            raise SweepError(f"{s.at('nvcc_flags')}: {show(flag)} holds {c!r}, which would be expanded by make or the "
                             "shell rather than passed to nvcc; flags may hold letters, digits, spaces and _ - = + , . / : @ % ^ ~")
    for t in targets:
        c = safe.unsafe_char(t, "_.-/")
        if c is not None or not t or t.startswith("-"):
            what = f"holds {c!r}" if c is not None else ("is empty" if not t else "starts with '-' (make reads an option)")
            raise SweepError(f"{s.at('make_targets')}: {show(t)} {what}; a make target name is letters, digits and "
                             "_ . - / (e.g. [all] or [bench, check])")
    macros = s.data.get("macros", d.macros)
    if macros not in MACRO_MODES:
        raise SweepError(f"{s.at('macros')}: {show(macros)} is not how macros reach the program; write header (conf.cuh, "
                         "first on the include path) or define (also -DNAME=value on nvcc's command line, for "
                         "sources with #ifndef defaults that include no conf.cuh)")
    return Build(arch, flags, targets, s.int("jobs", 0, 0, 256), macros)


MACRO_MODES = ("header", "define")


def run(top: Section, path: Path) -> Run:
    s = Section(top.data.get("run"), f"{path}: run",
                ("batch", "seq_len", "warmup", "iterations", "args", "verify", "repeats", "stopping"))
    d = Run()
    repeats = s.data.get("repeats", "auto")
    repeats = 0 if repeats == "auto" else integer(repeats, s.at("repeats") + " (or auto)", 1, 1000)
    size = {k: s.int(k, getattr(d, k), *RUN_BOUNDS[k]) for k in RUN_BOUNDS}
    return Run(size["batch"], size["seq_len"], size["warmup"], size["iterations"], s.strings("args", ()),
               s.bool("verify", True), repeats, stopping(s))


def stopping(run_section: Section) -> Stopping:
    """run.stopping: auto | always | never | true | false, or a mapping {when, max_noise, budget_s, min_samples, max_samples}."""
    raw = run_section.data.get("stopping", "auto")
    if isinstance(raw, bool):
        raw = "always" if raw else "never"
    if isinstance(raw, str):
        raw = {"when": raw}
    s = Section(raw, run_section.at("stopping"), ("when", "max_noise", "budget_s", "min_samples", "max_samples"))
    d = Stopping()
    when = s.str("when", d.when)
    if when not in STOPPING_WHEN:
        raise SweepError(f"{s.at('when')}: {show(when)} is not one of {', '.join(STOPPING_WHEN)} (auto: only for a "
                         "program whose one run has fewer than 3 timed iterations)")
    min_samples = s.int("min_samples", d.min_samples, 3, 100000)
    return Stopping(when, s.number("max_noise", d.max_noise, 1e-6, 1.0), s.number("budget_s", d.budget_s, 0.001, 86400),
                    min_samples, s.int("max_samples", d.max_samples, min_samples, 10**7))


def certify(top: Section, path: Path) -> Certify:
    s = Section(top.data.get("certify"), f"{path}: certify",
                ("enabled", "top", "budget_s", "budget_share", "cap_s", "max_rounds", "combine", "lockstep", "turns",
                 "processes"))
    d = Certify()
    return Certify(s.bool("enabled", d.enabled), s.int("top", d.top, 1, 64), s.number("budget_s", d.budget_s, 0, 86400),
                   s.number("budget_share", d.budget_share, 0.001, 100), s.number("cap_s", d.cap_s, 0.001, 86400),
                   s.int("max_rounds", d.max_rounds, 5, 100000),
                   s.bool("combine", d.combine), s.bool("lockstep", d.lockstep), s.int("turns", d.turns, 1, 1000),
                   s.int("processes", d.processes, 1, 256))


DEFAULT_BACKEND = "nsys"            # the engine's (and any plugin target's)
CUSTOM_TARGET_BACKEND = "cupti"     # a custom target's: no profiler to install, no capture range to call


def custom_target(top: Section) -> bool:
    """The file names its own target (a mapping), not a plugin (`target: engine`)."""
    return isinstance(top.data.get("target", "engine"), dict)


def profile(top: Section, path: Path) -> Profile:
    """The profile section; without a backend, cupti for a custom target and nsys for the engine."""
    s = Section(top.data.get("profile"), f"{path}: profile", ("backend", "ncu_iterations", "overlap"))
    backend = s.str("backend", CUSTOM_TARGET_BACKEND if custom_target(top) else DEFAULT_BACKEND)
    if backend not in BACKENDS:
        raise SweepError(f"{s.at('backend')}: {show(backend)} is not a profile backend; choose one of {', '.join(BACKENDS)}")
    return Profile(backend, s.int("ncu_iterations", 3, 1, 1000), s.bool("overlap", True))


def slurm(top: Section, path: Path) -> Slurm:
    s = Section(top.data.get("slurm"), f"{path}: slurm", tuple(Slurm.__slots__))
    return Slurm(
        partition=s.str("partition", None), account=s.str("account", None), qos=s.str("qos", None),
        constraint=s.str("constraint", None), gpus_per_job=s.int("gpus_per_job", 1, 0, 64),
        cpus_per_job=s.int("cpus_per_job", 4, 1, 1024), mem=s.str("mem", None),
        time_min=s.int("time_min", 20, 1, 60 * 24 * 14), array_parallelism=s.int("array_parallelism", 16, 1, 100000),
        extra_sbatch=s.strings("extra_sbatch", ()), setup=s.strings("setup", ()), log_dir=s.str("log_dir", None),
        max_submit=s.int("max_submit", 0, 0, 10_000_000), build_partition=s.str("build_partition", None),
        build_cpus=s.int("build_cpus", 4, 1, 1024), build_time_min=s.int("build_time_min", 15, 1, 60 * 24 * 14),
        partitions=s.strings("partitions", ()),
    )


def replay(top: Section, path: Path, macros: set[str]) -> Replay:
    """`replay: {params: {MACRO: recorded_name}, fixed: {recorded_name: value}, kernel: NAME}`: how a replay
    matches this space's configurations to a recording's (sweep.space.model.Replay)."""
    s = Section(top.data.get("replay"), top.at("replay"), ("params", "fixed", "kernel"))
    params, fixed = s.data.get("params") or {}, s.data.get("fixed") or {}
    for key, value, what in (("params", params, "{MACRO: recorded_name}"), ("fixed", fixed, "{recorded_name: value}")):
        if not isinstance(value, dict):
            raise SweepError(f"{s.at(key)}: expected a mapping {what}, got {show(value)}")
    for macro, name in params.items():
        if macro not in macros:
            raise SweepError(f"{s.at('params')}: {show(macro)} is not a parameter of this space; parameters: "
                             f"{', '.join(sorted(macros))}")
        if not isinstance(name, str) or not name:
            raise SweepError(f"{s.at('params')}.{plain(macro)}: {show(name)} must be the recording's parameter name")
    for name, value in fixed.items():
        if not isinstance(name, str) or isinstance(value, (dict, list)):
            raise SweepError(f"{s.at('fixed')}: {show(name)}: {show(value)} must be a recorded parameter name "
                             "and one value")
    return Replay(dict(params), dict(fixed), s.str("kernel", "") or "")
