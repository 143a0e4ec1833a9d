"""Loading a space file: YAML in, a validated Space out.

A space file (see spaces/*.yaml and the README) declares parameters, each a C
macro that conf.cuh will define, with the values to try, a short tag for job
names, and the kernels it governs (glob patterns over kernel names as a
profiler reports them). Constraints say which combinations are legal; the
strategy and its options say which combinations to build; build, run, profile
and slurm settings say how each is compiled, measured and submitted.

Everything is validated before anything is rendered: a bad file stops with one
SweepError, on one line, naming the file, the key, the bad value, what is
allowed and the fix. A *combination* that breaks a constraint is not an error:
strategies skip it and record why (see configs.check).

Input is bounded (see reader for the file itself): at most MAX_PARAMETERS
parameters, MAX_VALUES values each (a range is sized before it is expanded),
MAX_CONSTRAINTS constraints of at most expr.MAX_CHARS characters. Launch sizes
are integers from 1 to MAX_VALUE; a parameter that declares `min` may go down
to 0 (its min then decides, as a constraint). A parameter that is not a launch
size says so with `type`: `flag` (a 0/1 switch; `values: bool` is short for it,
and `values: [0, 1]` is read as one) or `choice` (a small enumeration, integers
from 0); neither needs `min: 0`.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from sweep.core.errors import SweepError
from sweep.space import expr, reader, sections, workloads
from sweep.space.model import MAX_VALUE, Constraint, Parameter, Space
from sweep.space.sections import NAME_RE, Section
from sweep.space.target_section import PluginTarget, target as target_section

# \Z, not $: "$" also matches before a final newline, which would let "FOO\n" through
MACRO_RE = re.compile(r"^[A-Z_][A-Z0-9_]*\Z")
TAG_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*\Z")
MAX_VALUES = 4096          # values of one parameter: a sweep builds every one
MAX_PARAMETERS = 256
MAX_CONSTRAINTS = 1024

_TOP_KEYS = ("name", "description", "target", "model", "strategy", "tuples", "samples", "seed", "parameters",
             "constraints", "build", "run", "profile", "slurm", "certify", "workloads", "replay")
_PARAM_KEYS = ("tag", "values", "kernels", "default", "equals", "min", "max", "multiple_of", "power_of_two", "doc",
               "type")
KINDS = ("size", "flag", "choice")   # a launch size (from 1), a 0/1 switch, an enumeration (from 0)


def load_space(path: Path | str, *, plugin_target: PluginTarget | None = None) -> Space:
    """Read and validate a space file. `plugin_target(name, options)` builds a plugin
    target such as the engine (passed in so this module does not depend on later stages)."""
    path = Path(path)
    return parse_space(reader.read(path), path, plugin_target=plugin_target)


def parse_space(data: Any, path: Path, *, plugin_target: PluginTarget | None = None) -> Space:
    top = Section(data, f"{path}:", _TOP_KEYS)
    name = top.str("name", path.stem)
    problem = sections.sweep_name_problem(name)
    if problem:
        raise SweepError(f"{top.at('name')}: {sections.show(name)} {problem}")
    raw = _macros(top, path)
    rules = _constraints(top, path, set(raw))      # checked as soon as the names are known: nothing runs from them
    params, constraints = _parameters(raw, path)
    constraints.extend(rules)                      # after each parameter's own bounds, which check names first
    target, run = target_section(top, path, plugin_target), sections.run(top, path)
    return Space(name, path, tuple(params), target, tuple(constraints), sections.strategy(top, path, params),
                 sections.build(top, path), run, sections.profile(top, path), sections.slurm(top, path),
                 top.str("description", "") or "", sections.certify(top, path),
                 workloads.parse(top, path, target, run), sections.replay(top, path, set(raw)))


def launch_size(v: Any, where: str, floor: int = 1) -> int:
    """`v` as a launch size: an integer from `floor` (1, or 0 where the parameter declares min) to MAX_VALUE."""
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_VALUE:
        raise SweepError(f"{where}: {sections.show(v)} is not an integer from 0 to {MAX_VALUE}; "
                         "launch sizes are whole numbers")
    if v < floor:
        raise SweepError(f"{where}: {v} is not a launch size (a block of 0 threads launches nothing); use values "
                         "from 1, or declare min: 0 on the parameter if 0 means something to its kernel (type: flag "
                         "for a 0/1 switch, type: choice for an enumeration)")
    return v


def _values(spec: Any, where: str, floor: int) -> tuple[int, ...]:
    """[1, 2, 4] | 16 | {range: [lo, hi(, step)]} | {pow2: [lo, hi]}; inclusive bounds, sized before expanded."""
    if isinstance(spec, list):
        if not spec:
            raise SweepError(f"{where}: the value list is empty; give at least one value")
        if len(spec) > MAX_VALUES:
            raise SweepError(f"{where}: {len(spec):,} values, over the {MAX_VALUES} a parameter may have (a sweep "
                             "builds each); list fewer, or write {range: [lo, hi, step]} with a wider step")
        out = [launch_size(v, where, floor) for v in spec]
    elif isinstance(spec, dict) and len(spec) == 1 and next(iter(spec)) in ("range", "pow2"):
        out = _expand(*next(iter(spec.items())), where, floor)
    elif isinstance(spec, int) and not isinstance(spec, bool):
        out = [launch_size(spec, where, floor)]
    else:
        raise SweepError(f"{where}: {sections.show(spec)} is not a value list; write [4, 8, 16], {{range: [3, 10]}} "
                         "or {pow2: [32, 1024]}")
    seen: set[int] = set()
    dup: set[int] = set()
    for v in out:           # linear, whatever the list's length
        (dup if v in seen else seen).add(v)
    if dup:
        raise SweepError(f"{where}: value(s) {sorted(dup)[:10]} appear more than once; list each value once")
    return tuple(out)


def _expand(kind: str, bounds: Any, where: str, floor: int) -> list[int]:
    if not isinstance(bounds, list) or len(bounds) not in ((2, 3) if kind == "range" else (2,)):
        shape = "[lo, hi] or [lo, hi, step]" if kind == "range" else "[lo, hi]"
        raise SweepError(f"{where}: {kind} takes {shape}, got {sections.show(bounds)}")
    lo, hi = launch_size(bounds[0], where, 0), launch_size(bounds[1], where, 0)
    if lo > hi:
        raise SweepError(f"{where}: {kind} [{lo}, {hi}] is empty; the first bound must not exceed the second")
    if kind == "pow2":
        out = [1 << k for k in range(0, 32) if lo <= (1 << k) <= hi]
        if not out:
            raise SweepError(f"{where}: no power of two lies in [{lo}, {hi}]; widen the bounds or list the values")
        return out
    step = launch_size(bounds[2], where, 0) if len(bounds) == 3 else 1
    if step < 1:
        raise SweepError(f"{where}: range step {step} must be >= 1; write {{range: [lo, hi, step]}} with step >= 1")
    count = (hi - lo) // step + 1
    if count > MAX_VALUES:
        raise SweepError(f"{where}: range [{lo}, {hi}, {step}] holds {count:,} values, over the {MAX_VALUES} a "
                         "parameter may have (a sweep builds each); narrow the bounds or widen the step")
    if lo < floor:
        launch_size(lo, where, floor)    # says why 0 is refused
    return list(range(lo, hi + 1, step))


def _macros(top: Section, path: Path) -> dict[str, Any]:
    """The parameters mapping, its keys checked as macro names."""
    raw = top.data.get("parameters")
    if not isinstance(raw, dict) or not raw:
        raise SweepError(f"{top.at('parameters')}: missing or empty; declare at least one macro, e.g. parameters: "
                         "{RESIDUAL_BLOCK_SIZE: {tag: R, values: [128, 256], kernels: [residual_kernel]}}")
    if len(raw) > MAX_PARAMETERS:
        raise SweepError(f"{top.at('parameters')}: {len(raw):,} parameters, over the {MAX_PARAMETERS} a space may "
                         "have; split the sweep into several spaces")
    for macro in raw:
        if not isinstance(macro, str) or not MACRO_RE.match(macro):
            raise SweepError(f"{path}: parameters.{sections.plain(macro)}: {sections.show(macro)} is not a macro name; "
                             "use UPPER_CASE letters, digits and _ (e.g. RESIDUAL_BLOCK_SIZE)")
    return raw


def _parameters(raw: dict[str, Any], path: Path) -> tuple[list[Parameter], list[Constraint]]:
    params, constraints = [], []
    for macro, spec in raw.items():
        p, cs = _parameter(macro, spec, f"{path}: parameters.{macro}")
        params.append(p)
        constraints.extend(cs)
    by_macro = {p.macro: p for p in params}
    swept = ", ".join(q.macro for q in params if not q.derived)
    for i, p in enumerate(params):
        if p.equals is None:
            continue
        src = by_macro.get(p.equals)
        if src is None or src.derived:
            raise SweepError(f"{path}: parameters.{p.macro}.equals: {sections.show(p.equals)} must name a swept "
                             f"parameter of this space; swept parameters: {swept}")
        if not p.kernels:
            params[i] = dataclasses.replace(p, kernels=src.kernels)
    if not swept:
        raise SweepError(f"{path}: parameters: every parameter is derived ('equals'); at least one must have values")
    return params, constraints


def _parameter(macro: str, spec: Any, where: str) -> tuple[Parameter, list[Constraint]]:
    s = Section(spec, where, _PARAM_KEYS)
    tag_ = s.str("tag", "".join(w[0] for w in macro.split("_") if w))
    if not isinstance(tag_, str) or not TAG_RE.match(tag_):
        raise SweepError(f"{s.at('tag')}: {sections.show(tag_)} must be letters and digits starting with a letter "
                         "(it names job folders)")
    kind, spec = _kind(s, where)
    floor = 0 if "min" in s.data or kind != "size" else 1
    equals = s.str("equals", None)
    if equals is not None:
        if "values" in s.data:
            raise SweepError(f"{where}: a parameter with 'equals' takes its values from {sections.plain(equals)}; "
                             "remove 'values'")
        values: tuple[int, ...] = ()
    else:
        if spec is None:
            raise SweepError(f"{where}: missing 'values'; write values: [128, 256] (or equals: OTHER_MACRO)")
        values = _values(spec, s.at("values"), floor)
    default = s.data.get("default")
    if kind == "flag" and isinstance(default, bool):
        default = int(default)           # default: true reads as 1
    if default is not None:
        default = launch_size(default, s.at("default"), floor)
    if kind == "flag":
        for v in values + ((default,) if default is not None else ()):
            if v not in (0, 1):
                raise SweepError(f"{where}: {v} is not 0 or 1, and the parameter is a flag (type: flag); use "
                                 "type: choice for an enumeration")
    constraints = []
    for key, fmt in (("min", "{m} >= {v}"), ("max", "{m} <= {v}"), ("multiple_of", "{m} % {v} == 0")):
        if key in s.data:
            v = s.int(key, 0, 1 if key == "multiple_of" else 0)
            constraints.append(Constraint(fmt.format(m=macro, v=v), f"{where}.{key}"))
    if s.bool("power_of_two", False):
        constraints.append(Constraint(f"{macro} & ({macro} - 1) == 0", f"{where}.power_of_two"))
    kernels = s.strings("kernels", ())
    return Parameter(macro, tag_, values, kernels, default, equals, s.str("doc", "") or "", floor, kind), constraints


def _kind(s: Section, where: str) -> tuple[str, Any]:
    """(type, the values' spec): `type:` as given, else a flag where the values are `bool` or
    exactly 0 and 1 (no launch size is 0), else a launch size. A flag's values default to [0, 1]."""
    kind = s.data.get("type")
    spec = s.data.get("values")
    if kind is not None and kind not in KINDS:
        raise SweepError(f"{s.at('type')}: {sections.show(kind)} is not a parameter type; write size (a launch size, "
                         "the default), flag (0 or 1) or choice (an enumeration of integers from 0)")
    if spec == "bool":
        if kind not in (None, "flag"):
            raise SweepError(f"{s.at('values')}: 'bool' makes the parameter a flag, but its type is {kind}; remove one")
        return "flag", [0, 1]
    if kind is None and isinstance(spec, list) and len(spec) == 2 and \
            all(type(v) is int for v in spec) and sorted(spec) == [0, 1]:
        return "flag", spec
    if kind == "flag" and "values" not in s.data and "equals" not in s.data:
        return "flag", [0, 1]
    return kind or "size", spec


def _constraints(top: Section, path: Path, macros: set[str]) -> list[Constraint]:
    raw = top.data.get("constraints", []) or []
    if not isinstance(raw, list):
        raise SweepError(f"{top.at('constraints')}: expected a list of expressions or {{expr, why}} mappings")
    if len(raw) > MAX_CONSTRAINTS:
        raise SweepError(f"{top.at('constraints')}: {len(raw):,} constraints, over the {MAX_CONSTRAINTS} a space may "
                         "have; join related rules with 'and'")
    out = []
    for i, c in enumerate(raw):
        where = f"{path}: constraints[{i}]"
        cs = Section({"expr": c} if isinstance(c, str) else c, where, ("expr", "why"))
        text = cs.str("expr", None)
        if not text:
            raise SweepError(f"{where}: missing 'expr'")
        expr.validate(text, macros, where)
        out.append(Constraint(text, cs.str("why", "") or ""))
    return out
