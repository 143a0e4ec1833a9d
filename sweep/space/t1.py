"""T1 space files in: the auto-tuning community's JSON input format, loaded as a Space.

    ConfigurationSpace.TuningParameters[]   Name, Type (int, uint, bool), Values (a string such as
                                            "[16, 32]" or, as the benchmark hub writes them,
                                            "[1, 2] + list(range(32, 1025, 32))" and
                                            "[2**i for i in range(6)]": read by walking the syntax
                                            tree (_ValueList), never run), Default (a value, or a
                                            list of one)
    ConfigurationSpace.Conditions[]         Expression: Python-like, translated into this project's
                                            constraint language (sweep.space.expr) or refused in one
                                            line naming the expression and what it does not support
    KernelSpecification.KernelName          the kernel every parameter governs
    General.BenchmarkName                   the space's name (else the file's)

Each parameter becomes a macro: its name in upper case (block_size_x -> BLOCK_SIZE_X), and
`Space.replay` maps the macro back to the T1 name, so a recording made with the T1 names
(a Kernel Tuner cache, T4 results) is matched on them. Values may include 0 (flags).

A T1 file names a kernel source, not a Makefile: its target is replay-only (no timing
command, `Target.replay_only`), and a run of it on a GPU executor is refused in preflight.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from sweep.core.errors import SweepError
from sweep.space import expr, reader
from sweep.space.loader import MACRO_RE, MAX_CONSTRAINTS, MAX_PARAMETERS, MAX_VALUES, TAG_RE, launch_size
from sweep.space.model import Constraint, Parameter, Replay, Space, Target
from sweep.space.sections import NAME_RE, show

TYPES = ("int", "uint", "bool")     # what a launch-size macro can hold; float and string cannot


def is_t1(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("ConfigurationSpace"), dict)


def read(path: Path) -> Any:
    """A .json space file's data (bounded as a YAML one is: sweep.space.reader), else the YAML reader's."""
    path = Path(path)
    if path.suffix.lower() != ".json":
        return reader.read(path)
    text = reader.decode(reader.read_bytes(path), path)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise SweepError(f"{path}: not valid JSON ({e}); fix the syntax there") from None


def parse(data: dict, path: Path) -> Space:
    """A T1 document as a Space (replay-only target)."""
    where = f"{path}: ConfigurationSpace"
    cs = data["ConfigurationSpace"]
    raw = cs.get("TuningParameters")
    if not isinstance(raw, list) or not raw:
        raise SweepError(f"{where}.TuningParameters: missing or empty; a T1 space lists at least one parameter")
    if len(raw) > MAX_PARAMETERS:
        raise SweepError(f"{where}.TuningParameters: {len(raw):,} parameters, over the {MAX_PARAMETERS} a space may have")
    kernel_spec = data.get("KernelSpecification") if isinstance(data.get("KernelSpecification"), dict) else {}
    general = data.get("General") if isinstance(data.get("General"), dict) else {}
    name = general.get("BenchmarkName")
    if not isinstance(name, str) or not NAME_RE.match(name):
        name = path.name.split(".")[0]
    if not NAME_RE.match(name):
        raise SweepError(f"{path}: General.BenchmarkName {show(name)} must be letters, digits, '.', '_' or '-' "
                         "(it names jobs/<name>/); rename it or run with --name NAME")
    kernel = kernel_spec.get("KernelName") if isinstance(kernel_spec.get("KernelName"), str) else name
    params = [_parameter(p, f"{where}.TuningParameters[{i}]", kernel) for i, p in enumerate(raw)]
    by_name = {p.doc: p.macro for p in params}
    if len({p.macro for p in params}) != len(params):
        raise SweepError(f"{where}.TuningParameters: two parameter names differ only in case "
                         f"({', '.join(by_name)}); macros are their names in upper case")
    params = _unique_tags(params)
    conditions = cs.get("Conditions") or []
    if not isinstance(conditions, list) or len(conditions) > MAX_CONSTRAINTS:
        raise SweepError(f"{where}.Conditions: expected a list of at most {MAX_CONSTRAINTS} {{Expression, Parameters}}")
    constraints = tuple(_condition(c, f"{where}.Conditions[{i}]", by_name) for i, c in enumerate(conditions))
    target = Target(name=kernel, source_dir=Path(path).resolve(), verify=(), profile=())
    return Space(name, Path(path), tuple(params), target, constraints,
                 description=f"T1 space {Path(path).name} (replay only)",
                 replay=Replay(params={p.macro: p.doc for p in params}, kernel=kernel))


def _parameter(spec: Any, where: str, kernel: str) -> Parameter:
    if not isinstance(spec, dict) or not isinstance(spec.get("Name"), str):
        raise SweepError(f"{where}: expected a mapping with Name, Type and Values, got {show(spec)}")
    name, kind = spec["Name"], spec.get("Type", "int")
    macro = name.upper()
    if not MACRO_RE.match(macro):
        raise SweepError(f"{where}.Name: {show(name)} does not make a macro name (letters, digits and _, not "
                         "starting with a digit); rename the parameter")
    if kind not in TYPES:
        raise SweepError(f"{where}.Type: {show(kind)} is not supported: this project's parameters are integer "
                         f"macros ({', '.join(TYPES)}); replay this space with integer values only")
    values = _values(spec.get("Values"), f"{where}.Values")
    default = spec.get("Default")
    if isinstance(default, list) and len(default) == 1:    # the hub's gemm space writes "Default": [0]
        default = default[0]
    if default is not None:
        default = launch_size(int(default) if isinstance(default, bool) else default, f"{where}.Default", 0)
    return Parameter(macro, _tag(macro), values, (kernel,), default, None, name, floor=0)


def _values(text: Any, where: str) -> tuple[int, ...]:
    """T1's Values: a list, or a string holding a Python expression of one (_ValueList: no code runs)."""
    if isinstance(text, str):
        if len(text) > reader.MAX_BYTES:
            raise SweepError(f"{where}: over {reader.MAX_BYTES:,} characters")
        try:
            values = _ValueList().value(ast.parse(text.strip(), mode="eval").body)
        except (SyntaxError, MemoryError, RecursionError, ValueError) as e:
            why = f" ({e})" if isinstance(e, _Unsupported) else ""
            raise SweepError(f"{where}: {show(text)} is not a list of values{why}; write e.g. \"[16, 32, 64]\", or "
                             "build one from lists, +, range() and [... for i in range(...)]") from None
    else:
        values = text
    if not isinstance(values, (list, tuple)) or not values:
        raise SweepError(f"{where}: {show(values)} is not a non-empty list of values; write e.g. \"[16, 32, 64]\"")
    if len(values) > MAX_VALUES:
        raise SweepError(f"{where}: {len(values):,} values, over the {MAX_VALUES} a parameter may have")
    out = tuple(launch_size(int(v) if isinstance(v, bool) else v, where, 0) for v in values)
    if len(set(out)) != len(out):
        raise SweepError(f"{where}: {show(text)} lists a value more than once; list each value once")
    return out


class _Unsupported(ValueError):
    """What a T1 value list uses that _ValueList does not read."""


class _ValueList:
    """Reads the Python a T1 file writes for a parameter's values by walking its syntax tree: lists
    and tuples, + of lists, range(), list(), and a list comprehension over one of those with `if`
    filters; every element, range() bound and filter is an integer expression of this project's
    constraint language (sweep.space.expr: + - * / // % ** and the rest, comparisons, and/or/not)
    with the comprehension's variable bound. No code of the file runs. Sizes are bounded as they are
    built (a range or list longer than a parameter may be is refused)."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}

    def value(self, node: ast.AST) -> list:
        if isinstance(node, (ast.List, ast.Tuple)):
            return self._list([self.integer(e) for e in node.elts])
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _listy(node.left) and _listy(node.right):
            return self._list(self.value(node.left) + self.value(node.right))
        if isinstance(node, ast.BinOp) and (_listy(node.left) or _listy(node.right)):
            raise _Unsupported(f"{ast.unparse(node)!r} mixes lists and integers")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("range", "list"):
            return self._call(node.func.id, node.args, node.keywords)
        if isinstance(node, ast.ListComp) and len(node.generators) == 1:
            return self._comprehension(node.elt, node.generators[0])
        raise _Unsupported(f"{ast.unparse(node)!r} is not a list: write lists, + of lists, range(), list() and "
                           "list comprehensions")

    def integer(self, node: ast.AST) -> int:
        v = self._evaluate(node)
        if not isinstance(v, int) or isinstance(v, bool):
            raise _Unsupported(f"{ast.unparse(node)!r} is {v!r}, not an integer")
        return v

    def _evaluate(self, node: ast.AST) -> object:
        """An expression of sweep.space.expr's language, the comprehension's variable bound."""
        text = ast.unparse(node)
        if _listy(node):
            raise _Unsupported(f"{text!r} is a list where an integer belongs")
        try:
            return expr.evaluate(text, self.names)
        except KeyError as e:
            name = e.args[0]
            raise _Unsupported(f"{name!r} is a name no comprehension here binds"
                               + (f" (in {text!r})" if text != name else "")) from None
        except ValueError as e:                 # what the constraint language does not take, named
            raise _Unsupported(str(e)) from None
        except (ArithmeticError, TypeError) as e:
            raise _Unsupported(f"{text!r}: {e}") from None

    def _list(self, items: list) -> list:
        if len(items) > MAX_VALUES:
            raise _Unsupported(f"{len(items):,} values, over the {MAX_VALUES} a parameter may have")
        return items

    def _call(self, name: str, args: list[ast.expr], keywords: list) -> list:
        if name == "range" and 1 <= len(args) <= 3 and not keywords:
            r = range(*(self.integer(a) for a in args))
            if len(r) > MAX_VALUES:
                raise _Unsupported(f"range of {len(r):,} values, over the {MAX_VALUES} a parameter may have")
            return list(r)
        if name == "list" and len(args) == 1 and not keywords:
            return self.value(args[0])
        raise _Unsupported(f"{name}() with those arguments: range() takes one to three integers, list() one list")

    def _comprehension(self, elt: ast.expr, gen: ast.comprehension) -> list:
        if not isinstance(gen.target, ast.Name) or gen.is_async:
            raise _Unsupported(f"{ast.unparse(gen.target)!r}: a comprehension here binds one name")
        over = self.value(gen.iter)
        out = []
        for v in over:
            self.names[gen.target.id] = v
            if all(self._evaluate(c) for c in gen.ifs):
                out.append(self.integer(elt))
        del self.names[gen.target.id]
        return self._list(out)


def _listy(node: ast.AST) -> bool:
    """Whether `node` is written as a list (what _ValueList.value reads), not as an integer."""
    if isinstance(node, ast.BinOp):
        return _listy(node.left) or _listy(node.right)
    return isinstance(node, (ast.List, ast.Tuple, ast.ListComp)) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("range", "list"))


def _tag(macro: str) -> str:
    tag = "".join(w[0] for w in macro.split("_") if w)
    return tag if TAG_RE.match(tag) else "P"


def _unique_tags(params: list[Parameter]) -> list[Parameter]:
    """Each parameter its own tag (a shared tag would group them as the sides of one block), readable
    before its value: the initials where no other parameter has them (block_size_x: BSX), else the
    name without its underscores (tile_size_x and tile_stride_x: TILESIZEX, TILESTRIDEX), as a
    numbered initial would run into the value (TSX2 before 0 reads TSX20). A clash left after that
    (a name such as AB beside A_B) is numbered."""
    from collections import Counter
    from dataclasses import replace

    shared = Counter(p.tag for p in params)
    named = [p if shared[p.tag] == 1 or not TAG_RE.match(p.macro.replace("_", ""))
             else replace(p, tag=p.macro.replace("_", "")) for p in params]
    seen: dict[str, int] = {}
    out = []
    for p in named:
        n = seen.get(p.tag, 0)
        seen[p.tag] = n + 1
        out.append(replace(p, tag=f"{p.tag}N{n + 1}") if n else p)
    return out


class _Rename(ast.NodeTransformer):
    def __init__(self, macros: dict[str, str]):
        self.macros = macros

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Name(self.macros.get(node.id, node.id), node.ctx), node)


def _condition(spec: Any, where: str, macros: dict[str, str]) -> Constraint:
    """A T1 condition in this project's constraint language: checked as written against the T1 names
    (sweep.space.expr: and/or/not, arithmetic incl. % and //, comparisons, ints, min/max/abs), then its
    names renamed to the macros."""
    text = spec.get("Expression") if isinstance(spec, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise SweepError(f"{where}.Expression: missing; a T1 condition is {{Expression: \"...\", Parameters: [...]}}")
    try:
        expr.validate(text.strip(), set(macros), f"{where}.Expression")
    except SweepError as e:
        raise SweepError(f"{e} (T1 conditions are translated into this project's constraints; this one cannot be: "
                         "rewrite it in those terms, or drop it and check the recording covers only legal points)") \
            from None
    tree = _Rename(macros).visit(ast.parse(text.strip(), mode="eval"))
    return Constraint(ast.unparse(tree), f"T1 {where.rsplit(' ', 1)[-1]}: {text.strip()}")
