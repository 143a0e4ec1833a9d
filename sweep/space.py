"""Search spaces: what a sweep varies, what is legal, how it builds and runs.

A space file (YAML, see spaces/*.yaml and the README) declares parameters, each
a C macro that conf.cuh will define, with the values to try, a short tag letter
for job names, and the kernels it governs (glob patterns over kernel names as a
profiler reports them). Constraints say which combinations are legal; build,
run, profile and slurm settings say how each configuration is compiled,
measured and submitted.

Everything is validated before anything is rendered: a bad file stops with one
SweepError naming the file, the key, the bad value, what is allowed and the
fix. A *combination* that breaks a constraint is not an error: strategies skip
it and record why (see `check`).
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import json
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from sweep.errors import SweepError

# \Z, not $: "$" also matches before a final newline, which would let "FOO\n" through
MACRO_RE = re.compile(r"^[A-Z_][A-Z0-9_]*\Z")
TAG_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*\Z")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
MAX_VALUE = 2**31 - 1
BACKENDS = ("nsys", "ncu", "events")
STRATEGIES = ("tuples", "grid", "factorized", "random", "optuna")


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Parameter:
    """One macro of conf.cuh and the values a sweep tries for it."""

    macro: str
    tag: str
    values: tuple[int, ...]
    kernels: tuple[str, ...] = ()        # glob patterns over kernel names
    default: int | None = None           # the target's own default (used to pad factorized builds)
    equals: str | None = None            # derived: always the value of this other macro
    doc: str = ""

    @property
    def derived(self) -> bool:
        return self.equals is not None

    def governs(self, kernel: str) -> bool:
        return any(fnmatch.fnmatchcase(kernel, p) for p in self.kernels)


@dataclass(frozen=True, slots=True)
class Constraint:
    """A boolean expression over macro names; combinations where it is false are skipped."""

    expr: str
    why: str = ""

    def holds(self, values: Mapping[str, int]) -> bool:
        return bool(_evaluate(self.expr, values))


@dataclass(frozen=True, slots=True)
class Build:
    arch: tuple[str, ...] = ("auto",)      # sm_XY targets, or "auto": the GPU's own, detected on the node
    nvcc_flags: tuple[str, ...] = ("-O3", "-lineinfo")
    make_targets: tuple[str, ...] = ("all",)
    jobs: int = 0                          # make -j; 0: the job's CPUs


@dataclass(frozen=True, slots=True)
class Run:
    batch: int = 4
    seq_len: int = 64
    warmup: int = 5
    iterations: int = 20
    args: tuple[str, ...] = ()             # extra arguments to the profiled program
    verify: bool = True


@dataclass(frozen=True, slots=True)
class Profile:
    backend: str = "nsys"
    ncu_iterations: int = 3                # ncu replays every launch: fewer iterations keep it quick


@dataclass(frozen=True, slots=True)
class Slurm:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    gpus_per_job: int = 1
    cpus_per_job: int = 4
    mem: str | None = None                 # e.g. "16G"
    time_min: int = 20
    array_parallelism: int = 16
    extra_sbatch: tuple[str, ...] = ()     # more "#SBATCH ..." options, e.g. "--exclusive"
    setup: tuple[str, ...] = ()            # shell lines before the job, e.g. "module load cuda/13.0"
    log_dir: str | None = None             # default jobs/<sweep>/_slurm

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class Target:
    """What is built and measured: the embedded engine, or any folder whose Makefile
    takes CONF_DIR, BUILD_DIR, NVCC, ARCH and NVCCFLAGS, plus the commands that
    verify and time it (placeholders: {build} {job} {weights} {reference} {batch}
    {seq_len} {iterations} {warmup} {events_json}; {args} expands to run.args)."""

    name: str
    source_dir: Path
    verify: tuple[tuple[str, ...], ...]
    profile: tuple[str, ...]
    events: tuple[str, ...] = ()           # extra profile arguments that make it print engine-timing/1 JSON
    model: Mapping[str, Any] | None = None  # a plugin target's options (the engine: preset, seed, model_dir)
    plugin: Any = None                     # a plugin's prepare step (sweep.target.Prepare), run before measuring


@dataclass(frozen=True, slots=True)
class Strategy:
    name: str = "grid"
    rows: tuple[tuple[int, ...], ...] = ()   # tuples: explicit rows over `columns`
    columns: tuple[str, ...] = ()
    samples: int = 20                        # random, optuna
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Space:
    name: str
    path: Path
    parameters: tuple[Parameter, ...]
    target: Target
    constraints: tuple[Constraint, ...] = ()
    strategy: Strategy = field(default_factory=Strategy)
    build: Build = field(default_factory=Build)
    run: Run = field(default_factory=Run)
    profile: Profile = field(default_factory=Profile)
    slurm: Slurm = field(default_factory=Slurm)
    description: str = ""

    def parameter(self, macro: str) -> Parameter:
        for p in self.parameters:
            if p.macro == macro:
                return p
        raise KeyError(macro)

    @property
    def swept(self) -> tuple[Parameter, ...]:
        """The parameters a strategy chooses values for (derived ones follow)."""
        return tuple(p for p in self.parameters if not p.derived)

    def size(self) -> tuple[int, str]:
        """The full grid's size and its product, e.g. (960, "4*4*4*3*5")."""
        n, parts = 1, []
        for p in self.swept:
            n *= len(p.values)
            parts.append(str(len(p.values)))
        return n, "*".join(parts) or "1"


@dataclass(frozen=True, slots=True)
class Config:
    """One point of a space: a value for every macro (derived ones included), in declaration order."""

    values: tuple[tuple[str, int], ...]

    def as_dict(self) -> dict[str, int]:
        return dict(self.values)

    def __getitem__(self, macro: str) -> int:
        return self.as_dict()[macro]


# ---------------------------------------------------------------------------
# Configs: completion, legality, tags, hashes
# ---------------------------------------------------------------------------


def make_config(space: Space, chosen: Mapping[str, int]) -> Config:
    """A Config from values for the swept parameters; derived ones are filled in."""
    values = dict(chosen)
    for p in space.parameters:
        if p.derived:
            values[p.macro] = values[p.equals]
    missing = [p.macro for p in space.parameters if p.macro not in values]
    if missing:
        raise ValueError(f"no value for {', '.join(missing)}")
    return Config(tuple((p.macro, int(values[p.macro])) for p in space.parameters))


def check(space: Space, config: Config) -> str | None:
    """None when `config` is legal, else why it is skipped (the first rule it breaks)."""
    values = config.as_dict()
    for c in space.constraints:
        try:
            ok = c.holds(values)
        except (ArithmeticError, ValueError, TypeError):  # e.g. x // 0, a negative shift, a complex power
            ok = False
        if not ok:
            return f"{c.expr} is false" + (f" ({c.why})" if c.why else "")
    return None


def tag(space: Space, config: Config) -> str:
    """Readable, stable job name, e.g. R128_G128_E5x5x5_L256_P256_F16.

    Parameters sharing a tag letter are joined with 'x' (a 3-D block); derived
    parameters take part like the others.
    """
    groups: dict[str, list[str]] = {}
    for p in space.parameters:
        groups.setdefault(p.tag, []).append(str(config[p.macro]))
    return "_".join(t + "x".join(vs) for t, vs in groups.items())


def tags_for(space: Space, configs: list[Config]) -> dict[Config, str]:
    """Tags for many configs; where two would collide, both get a short hash suffix."""
    plain = {c: tag(space, c) for c in configs}
    counts: dict[str, int] = {}
    for t in plain.values():
        counts[t] = counts.get(t, 0) + 1
    return {c: t if counts[t] == 1 else f"{t}_{values_digest(c)[:6]}" for c, t in plain.items()}


def values_digest(config: Config) -> str:
    return hashlib.sha256(json.dumps(config.values).encode()).hexdigest()


def config_hash(space: Space, config: Config, source_digest: str) -> str:
    """Identity of what a job measures: macros, build, run and profile settings, and the
    target's sources. A stored result counts as done only while this still matches."""
    blob = json.dumps({
        "macros": config.values, "target": space.target.name, "source": source_digest,
        "build": [space.build.arch, space.build.nvcc_flags, space.build.make_targets],
        "run": [space.run.batch, space.run.seq_len, space.run.warmup, space.run.iterations, space.run.args,
                space.run.verify],
        "profile": [space.profile.backend, space.profile.ncu_iterations],
        "model": dict(space.target.model or {}),
    }, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def default_config(space: Space) -> Config | None:
    """The target's own defaults, when every swept parameter declares one."""
    if any(p.default is None for p in space.swept):
        return None
    return make_config(space, {p.macro: p.default for p in space.swept})


# ---------------------------------------------------------------------------
# Expressions: a small, safe subset of Python over macro names
# ---------------------------------------------------------------------------

# Launch sizes are small integers; an exponent or shift past this is a typo, and
# Python would otherwise build a number with millions of digits (and hang there).
_MAX_EXPONENT_BITS = 256


def _bounded_pow(base: Any, exponent: Any) -> Any:
    if abs(exponent) > _MAX_EXPONENT_BITS or (isinstance(exponent, int) and exponent > 1
                                                and abs(base) > 1 and exponent * int(abs(base)).bit_length() > 4096):
        raise OverflowError(f"{base} ** {exponent} is too large for a launch-size rule")
    return operator.pow(base, exponent)


def _bounded_lshift(value: Any, shift: Any) -> Any:
    if shift > _MAX_EXPONENT_BITS:
        raise OverflowError(f"{value} << {shift} is too large for a launch-size rule")
    return operator.lshift(value, shift)


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: _bounded_pow,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.LShift: _bounded_lshift, ast.RShift: operator.rshift,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}
_FUNCS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}


def _evaluate(expr: str, names: Mapping[str, int]) -> Any:
    return _eval_node(ast.parse(expr, mode="eval").body, names)


def _eval_node(node: ast.AST, names: Mapping[str, int]) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval_node(node.left, names), _eval_node(node.right, names))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        v = _eval_node(node.operand, names)
        return -v if isinstance(node.op, ast.USub) else not v
    if isinstance(node, ast.BoolOp):
        vals = (_eval_node(v, names) for v in node.values)
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare):
        left = _eval_node(node.left, names)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval_node(comp, names)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        return _FUNCS[node.func.id](*(_eval_node(a, names) for a in node.args))
    if isinstance(node, ast.IfExp):
        return _eval_node(node.body if _eval_node(node.test, names) else node.orelse, names)
    raise ValueError(f"{ast.dump(node)[:40]}")


def _validate_expression(expr: str, known: set[str], where: str) -> None:
    """Checks that `expr` parses, uses only allowed syntax and known macros."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise SweepError(f"{where}: {expr!r} is not an expression ({e.msg}); write e.g. "
                         "'ENCODER_BLOCK_X * ENCODER_BLOCK_Y * ENCODER_BLOCK_Z <= 1024'") from None
    # Checked on the tree, not by evaluating a probe: and/or, chained comparisons and
    # if/else short-circuit, so a probe never visits every branch.
    bad = _disallowed(tree)
    if bad is not None:
        raise SweepError(f"{where}: {expr!r} uses {bad}, which constraints do not allow; use integers, parameter "
                         "names, + - * / // % ** & | << >>, comparisons, and/or/not, min/max/abs")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in known and node.id not in _FUNCS:
            raise SweepError(f"{where}: {expr!r} names {node.id!r}, which is not a parameter of this space; "
                             f"parameters: {', '.join(sorted(known))}")


_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Call, ast.IfExp,
                  ast.Constant, ast.Name, ast.Load, ast.And, ast.Or, ast.USub, ast.Not, *_BINOPS, *_CMPOPS)


def _disallowed(tree: ast.AST) -> str | None:
    """The first construct of `tree` that _eval_node does not evaluate, described; None if all are allowed."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            if isinstance(node, ast.expr):
                return f"{type(node).__name__.lower()} {ast.unparse(node)!r}"
            return f"the operator {type(node).__name__}"
        if isinstance(node, ast.Call):
            f = node.func
            if not (isinstance(f, ast.Name) and f.id in _FUNCS):
                return f"a call to {ast.unparse(f)}"
            if node.keywords or not (len(node.args) == 1 if f.id == "abs" else len(node.args) >= 2):
                return f"{ast.unparse(node)!r} (abs takes one argument, min and max two or more)"
        if isinstance(node, ast.Constant) and (isinstance(node.value, bool) or not isinstance(node.value, (int, float))):
            return f"the constant {node.value!r}"
        if isinstance(node, ast.Name) and node.id in _FUNCS and id(node) not in called:
            return f"{node.id} without calling it"
    return None


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


class _Section:
    """A mapping from the YAML file that knows where it is, for error messages."""

    def __init__(self, data: Any, where: str, allowed: tuple[str, ...]):
        if data is None:
            data = {}
        label = where[:-1] if where.endswith(":") else where   # the top level's where is "<file>:"
        if not isinstance(data, dict):
            raise SweepError(f"{label}: expected a mapping with keys {', '.join(allowed)}, "
                             f"got {type(data).__name__} {repr(data)[:80]}")
        unknown = [k for k in data if k not in allowed]
        if unknown:
            raise SweepError(f"{label}: unknown key(s) {', '.join(map(str, unknown))}; valid keys are: {', '.join(allowed)}")
        self.data, self.where = data, where

    def at(self, key: str) -> str:
        return f"{self.where}.{key}" if not self.where.endswith(":") else f"{self.where} {key}"

    def int(self, key: str, default: int, lo: int = 0, hi: int = MAX_VALUE) -> int:
        v = self.data.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise SweepError(f"{self.at(key)}: {v!r} must be an integer from {lo} to {hi}")
        return v

    def str(self, key: str, default: str | None) -> str | None:
        v = self.data.get(key, default)
        if v is not None and not isinstance(v, str):
            raise SweepError(f"{self.at(key)}: {v!r} must be a string")
        return v

    def bool(self, key: str, default: bool) -> bool:
        v = self.data.get(key, default)
        if not isinstance(v, bool):
            raise SweepError(f"{self.at(key)}: {v!r} must be true or false")
        return v

    def strings(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        v = self.data.get(key, list(default))
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, (str, int, float)) for x in v):
            raise SweepError(f"{self.at(key)}: {v!r} must be a list of strings")
        return tuple(str(x) for x in v)


def _values(spec: Any, where: str) -> tuple[int, ...]:
    """[1, 2, 4] | 16 | {range: [lo, hi(, step)]} | {pow2: [lo, hi]}; inclusive bounds."""
    def as_int(v: Any) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_VALUE:
            raise SweepError(f"{where}: {v!r} is not an integer from 0 to {MAX_VALUE}; launch sizes are whole numbers")
        return v

    if isinstance(spec, int) and not isinstance(spec, bool):
        out = [as_int(spec)]
    elif isinstance(spec, list):
        if not spec:
            raise SweepError(f"{where}: the value list is empty; give at least one value")
        out = [as_int(v) for v in spec]
    elif isinstance(spec, dict) and len(spec) == 1 and next(iter(spec)) in ("range", "pow2"):
        kind, bounds = next(iter(spec.items()))
        if not isinstance(bounds, list) or len(bounds) not in ((2, 3) if kind == "range" else (2,)):
            shape = "[lo, hi] or [lo, hi, step]" if kind == "range" else "[lo, hi]"
            raise SweepError(f"{where}: {kind} takes {shape}, got {bounds!r}")
        lo, hi = as_int(bounds[0]), as_int(bounds[1])
        if lo > hi:
            raise SweepError(f"{where}: {kind} [{lo}, {hi}] is empty; the first bound must not exceed the second")
        if kind == "range":
            step = as_int(bounds[2]) if len(bounds) == 3 else 1
            if step < 1:
                raise SweepError(f"{where}: range step {step} must be >= 1; write {{range: [lo, hi, step]}} with step >= 1")
            out = list(range(lo, hi + 1, step))
        else:
            out = [1 << k for k in range(0, 32) if lo <= (1 << k) <= hi]
            if not out:
                raise SweepError(f"{where}: no power of two lies in [{lo}, {hi}]; widen the bounds or list the values")
    else:
        raise SweepError(f"{where}: {spec!r} is not a value list; write [4, 8, 16], {{range: [3, 10]}} or {{pow2: [32, 1024]}}")
    if len(set(out)) != len(out):
        dup = sorted({v for v in out if out.count(v) > 1})
        raise SweepError(f"{where}: value(s) {dup} appear more than once; list each value once")
    return tuple(out)


_PARAM_KEYS = ("tag", "values", "kernels", "default", "equals", "min", "max", "multiple_of", "power_of_two", "doc")


def _parameter(macro: str, spec: Any, where: str) -> tuple[Parameter, list[Constraint]]:
    if not MACRO_RE.match(str(macro)):
        raise SweepError(f"{where}: {macro!r} is not a macro name; use UPPER_CASE letters, digits and _ (e.g. RESIDUAL_BLOCK_SIZE)")
    s = _Section(spec, where, _PARAM_KEYS)
    words = [w for w in macro.split("_") if w]
    tag_ = s.str("tag", "".join(w[0] for w in words))
    if not isinstance(tag_, str) or not TAG_RE.match(tag_):
        raise SweepError(f"{s.at('tag')}: {tag_!r} must be letters and digits starting with a letter (it names job folders)")
    equals = s.str("equals", None)
    if equals is not None:
        if "values" in s.data:
            raise SweepError(f"{where}: a parameter with 'equals' takes its values from {equals}; remove 'values'")
        values: tuple[int, ...] = ()
    else:
        if "values" not in s.data:
            raise SweepError(f"{where}: missing 'values'; write values: [128, 256] (or equals: OTHER_MACRO)")
        values = _values(s.data["values"], s.at("values"))
    default = s.data.get("default")
    if default is not None:
        default = _values(default, s.at("default"))[0]
    constraints = []
    bounds = [("min", "{m} >= {v}"), ("max", "{m} <= {v}"), ("multiple_of", "{m} % {v} == 0")]
    for key, fmt in bounds:
        if key in s.data:
            v = s.int(key, 0, 1 if key == "multiple_of" else 0)
            constraints.append(Constraint(fmt.format(m=macro, v=v), f"{where}.{key}"))
    if s.bool("power_of_two", False):
        constraints.append(Constraint(f"{macro} & ({macro} - 1) == 0", f"{where}.power_of_two"))
    kernels = s.strings("kernels", ())
    return Parameter(macro, tag_, values, kernels, default, equals, s.str("doc", "") or ""), constraints


_TOP_KEYS = ("name", "description", "target", "model", "strategy", "tuples", "samples", "seed", "parameters",
             "constraints", "build", "run", "profile", "slurm")


def load_space(path: Path | str, *, engine_target: Callable[[Mapping[str, Any] | None], Target] | None = None) -> Space:
    """Read and validate a space file. `engine_target` builds the embedded engine's
    Target (passed in so this module does not depend on later stages)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise SweepError(f"cannot read space file {path}: {e.strerror}; give the path to a .yaml file (see spaces/)") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SweepError(f"{path}:{at}: not valid YAML ({getattr(e, 'problem', e)}); fix the syntax there") from None
    return parse_space(data, path, engine_target=engine_target)


def parse_space(data: Any, path: Path, *, engine_target: Callable[[Mapping[str, Any] | None], Target] | None = None) -> Space:
    top = _Section(data, f"{path}:", _TOP_KEYS)
    name = top.str("name", path.stem)
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise SweepError(f"{top.at('name')}: {name!r} must be letters, digits, '.', '_' or '-' (it names jobs/<name>/)")

    raw_params = top.data.get("parameters")
    if not isinstance(raw_params, dict) or not raw_params:
        raise SweepError(f"{top.at('parameters')}: missing or empty; declare at least one macro, e.g.\n"
                         "  parameters:\n    RESIDUAL_BLOCK_SIZE: {tag: R, values: [128, 256], kernels: [residual_kernel]}")
    params, constraints = [], []
    for macro, spec in raw_params.items():
        p, cs = _parameter(macro, spec, f"{path}: parameters.{macro}")
        params.append(p)
        constraints.extend(cs)
    macros = {p.macro for p in params}
    for p in params:
        if p.equals is not None:
            src = next((q for q in params if q.macro == p.equals), None)
            if src is None or src.derived:
                swept = ", ".join(q.macro for q in params if not q.derived)
                raise SweepError(f"{path}: parameters.{p.macro}.equals: {p.equals!r} must name a swept parameter of this "
                                 f"space; swept parameters: {swept}")
            if not p.kernels:
                params[params.index(p)] = Parameter(p.macro, p.tag, p.values, src.kernels, p.default, p.equals, p.doc)
    if not any(not p.derived for p in params):
        raise SweepError(f"{path}: parameters: every parameter is derived ('equals'); at least one must have values")

    raw_constraints = top.data.get("constraints", []) or []
    if not isinstance(raw_constraints, list):
        raise SweepError(f"{top.at('constraints')}: expected a list of expressions or {{expr, why}} mappings")
    for i, c in enumerate(raw_constraints):
        where = f"{path}: constraints[{i}]"
        if isinstance(c, str):
            c = {"expr": c}
        cs = _Section(c, where, ("expr", "why"))
        expr = cs.str("expr", None)
        if not expr:
            raise SweepError(f"{where}: missing 'expr'")
        _validate_expression(expr, macros, where)
        constraints.append(Constraint(expr, cs.str("why", "") or ""))

    build = _build(top, path)
    run = _run(top, path)
    profile = _profile(top, path)
    slurm = _slurm(top, path)
    target = _target(top, path, engine_target)
    strategy = _strategy(top, path, params)
    return Space(name, path, tuple(params), target, tuple(constraints), strategy, build, run, profile, slurm,
                 top.str("description", "") or "")


def _build(top: _Section, path: Path) -> Build:
    s = _Section(top.data.get("build"), f"{path}: build", ("arch", "nvcc_flags", "make_targets", "jobs"))
    arch = s.strings("arch", ("auto",))
    for a in arch:
        if a != "auto" and not re.match(r"^sm_\d+[a-z]?$", a):
            raise SweepError(f"{s.at('arch')}: {a!r} is not a GPU architecture; write sm_90, [sm_80, sm_90] or auto")
    if "auto" in arch and len(arch) > 1:
        raise SweepError(f"{s.at('arch')}: 'auto' detects the GPU on each node; do not list it with other architectures")
    d = Build()
    return Build(arch, s.strings("nvcc_flags", d.nvcc_flags), s.strings("make_targets", d.make_targets), s.int("jobs", 0, 0, 256))


def _run(top: _Section, path: Path) -> Run:
    s = _Section(top.data.get("run"), f"{path}: run", ("batch", "seq_len", "warmup", "iterations", "args", "verify"))
    d = Run()
    return Run(s.int("batch", d.batch, 1, 1 << 16), s.int("seq_len", d.seq_len, 1, 1 << 20), s.int("warmup", d.warmup, 0, 10000),
               s.int("iterations", d.iterations, 1, 100000), s.strings("args", ()), s.bool("verify", True))


def _profile(top: _Section, path: Path) -> Profile:
    s = _Section(top.data.get("profile"), f"{path}: profile", ("backend", "ncu_iterations"))
    backend = s.str("backend", "nsys")
    if backend not in BACKENDS:
        raise SweepError(f"{s.at('backend')}: {backend!r} is not a profile backend; choose one of {', '.join(BACKENDS)}")
    return Profile(backend, s.int("ncu_iterations", 3, 1, 1000))


def _slurm(top: _Section, path: Path) -> Slurm:
    keys = tuple(Slurm.__slots__)
    s = _Section(top.data.get("slurm"), f"{path}: slurm", keys)
    return Slurm(
        partition=s.str("partition", None), account=s.str("account", None), qos=s.str("qos", None),
        constraint=s.str("constraint", None), gpus_per_job=s.int("gpus_per_job", 1, 0, 64),
        cpus_per_job=s.int("cpus_per_job", 4, 1, 1024), mem=s.str("mem", None), time_min=s.int("time_min", 20, 1, 60 * 24 * 14),
        array_parallelism=s.int("array_parallelism", 16, 1, 100000), extra_sbatch=s.strings("extra_sbatch", ()),
        setup=s.strings("setup", ()), log_dir=s.str("log_dir", None),
    )


def _target(top: _Section, path: Path, engine_target: Callable[[Mapping[str, Any] | None], Target] | None) -> Target:
    raw = top.data.get("target", "engine")
    model = top.data.get("model")
    if raw == "engine":
        if engine_target is None:
            raise SweepError(f"{top.at('target')}: the engine target needs sweep.target (load spaces through sweep.target.load)")
        if model is not None:
            _Section(model, f"{path}: model", ("preset", "seed", "model_dir"))
        return engine_target(model)
    if model is not None:
        raise SweepError(f"{top.at('model')}: 'model' belongs to the engine target; a custom target exports nothing, "
                         "remove 'model'")
    s = _Section(raw, f"{path}: target", ("name", "dir", "verify", "profile", "events"))
    name = s.str("name", None)
    src = s.str("dir", None)
    if not name or not src:
        raise SweepError(f"{path}: target: a custom target needs 'name' and 'dir' (a folder whose Makefile takes "
                         "CONF_DIR, BUILD_DIR, NVCC, ARCH, NVCCFLAGS); or write target: engine")
    source_dir = (path.parent / src).resolve()
    if not (source_dir / "Makefile").is_file():
        raise SweepError(f"{s.at('dir')}: {source_dir} has no Makefile; point dir at the folder holding your Makefile")
    verify = s.data.get("verify", [])
    if isinstance(verify, list) and verify and all(isinstance(v, str) for v in verify):
        verify = [verify]  # one command
    if not isinstance(verify, list) or not all(isinstance(v, list) for v in verify):
        raise SweepError(f"{s.at('verify')}: expected a command as a list of strings, or a list of such commands")
    profile = s.strings("profile", ())
    if not profile:
        raise SweepError(f"{s.at('profile')}: missing; give the timing command, e.g. ['{{build}}/my_bench', '--iters', '{{iterations}}']")
    return Target(name, source_dir, tuple(tuple(str(x) for x in v) for v in verify), profile, s.strings("events", ()))


def _strategy(top: _Section, path: Path, params: list[Parameter]) -> Strategy:
    name = top.str("strategy", "grid")
    if name not in STRATEGIES:
        raise SweepError(f"{top.at('strategy')}: {name!r} is not a strategy; choose one of {', '.join(STRATEGIES)}")
    samples = top.int("samples", 20, 1, 1_000_000)
    seed = top.int("seed", 0)
    if name != "tuples":
        if "tuples" in top.data:
            raise SweepError(f"{top.at('tuples')}: only the tuples strategy reads 'tuples'; set strategy: tuples or remove it")
        return Strategy(name, samples=samples, seed=seed)
    swept = [p.macro for p in params if not p.derived]
    t = _Section(top.data.get("tuples"), f"{path}: tuples", ("columns", "rows"))
    if not t.data:  # zip the value lists (seed 004's tuples), shorter lists padded with their default
        return Strategy("tuples", samples=samples, seed=seed)
    columns = t.strings("columns", tuple(swept))
    for c in columns:
        if c not in swept:
            raise SweepError(f"{t.at('columns')}: {c!r} is not a swept parameter; swept parameters: {', '.join(swept)}")
    dup = sorted({c for c in columns if columns.count(c) > 1})
    if dup:
        raise SweepError(f"{t.at('columns')}: {', '.join(dup)} listed more than once; name each column once")
    rows = t.data.get("rows")
    if not isinstance(rows, list) or not rows:
        raise SweepError(f"{t.at('rows')}: expected a list of rows, each a list of {len(columns)} integers")
    out = []
    for i, row in enumerate(rows):
        where = f"{t.at('rows')}[{i}]"
        if not isinstance(row, list) or len(row) != len(columns):
            raise SweepError(f"{where}: {row!r} must list {len(columns)} values, one per column ({', '.join(columns)})")
        out.append(tuple(_values(v, where)[0] for v in row))
    missing = [m for m in swept if m not in columns and next(p for p in params if p.macro == m).default is None]
    if missing:
        raise SweepError(f"{t.at('columns')}: {', '.join(missing)} has no column and no default; add a column or a default")
    return Strategy("tuples", tuple(out), tuple(columns), samples, seed)
