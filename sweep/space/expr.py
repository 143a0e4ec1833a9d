"""Constraint expressions: a small, safe subset of Python over macro names.

Allowed: integers, macro names, + - * / // % ** & | << >>, comparisons,
membership in a list of integers (`X in [32, 64]`, `X not in (3, 5)`: what Kernel
Tuner's restrictions and T1 conditions write), and/or/not, `x if c else y`,
min/max/abs. Nothing else parses into something that runs: no attributes,
subscripts, lambdas, other calls or names.

An expression is bounded before it is parsed (MAX_CHARS characters) and after
(MAX_DEPTH levels of syntax tree), so a hostile space file cannot exhaust the
parser's or the evaluator's recursion. Powers and shifts past a launch size's
range are refused (OverflowError) instead of building numbers with millions
of digits.

A checked expression is compiled once (its powers and shifts routed through the
bounded versions) and evaluated with no builtins: a grid of 200,000 points
checks every constraint at each, which a tree walk per point made slow.
`checker(exprs)` goes further for a space's whole list: one function, compiled
once from the checked trees, that tests them in order and stops at the first
false one (a call per point instead of one eval per constraint and point).
"""

from __future__ import annotations

import ast
import functools
import operator
from types import CodeType
from typing import Any, Callable, Mapping

from sweep.core.errors import SweepError

MAX_CHARS = 1000          # characters in one constraint expression
MAX_DEPTH = 50            # levels of its syntax tree
EXAMPLE = "'ENCODER_BLOCK_X * ENCODER_BLOCK_Y * ENCODER_BLOCK_Z <= 1024'"

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


_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div, ast.Mod, ast.Pow, ast.BitAnd, ast.BitOr, ast.LShift,
           ast.RShift)
_CMPOPS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
_MEMBERSHIP = (ast.In, ast.NotIn)          # only against a literal list of integers (_members)
_COLLECTIONS = (ast.List, ast.Tuple, ast.Set)
MAX_MEMBERS = 1024                         # integers in one such list
ALLOWED = ("integers, parameter names, + - * / // % ** & | << >>, comparisons, `X in [32, 64]` (a list of integers), "
           "and/or/not, min/max/abs")
FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}
_BOUNDED = {ast.Pow: "_bounded_pow", ast.LShift: "_bounded_lshift"}
_GLOBALS = {"__builtins__": {}, "_bounded_pow": _bounded_pow, "_bounded_lshift": _bounded_lshift, **FUNCTIONS}
_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Call, ast.IfExp,
                  ast.Constant, ast.Name, ast.Load, ast.And, ast.Or, ast.USub, ast.Not, *_BINOPS, *_CMPOPS,
                  *_MEMBERSHIP)


def evaluate(expr: str, names: Mapping[str, int]) -> Any:
    """The value of `expr` with `names` bound; ValueError if it is not a constraint
    expression, KeyError for a name `names` lacks, ArithmeticError/TypeError as Python."""
    try:
        return eval(_compiled(expr), _GLOBALS, dict(names))  # noqa: S307 - checked tree, no builtins
    except NameError as e:
        raise KeyError(getattr(e, "name", None) or str(e)) from None


Check = Callable[..., Any]   # -1: all hold; i: the i-th is false; (i, error): the i-th raised


@functools.lru_cache(maxsize=64)
def checker(exprs: tuple[str, ...]) -> tuple[Check, tuple[str, ...]]:
    """One function testing `exprs` in order, and the names it takes (positionally, sorted).
    It returns -1 when all hold, i when the i-th is false (the first such), and (i, error)
    when evaluating the i-th raised ArithmeticError, ValueError or TypeError. Built from
    the checked, bounded trees of _compiled (ValueError for one that is not a constraint)."""
    trees = [_bounded_tree(e) for e in exprs]
    args = tuple(sorted({n.id for t in trees for n in ast.walk(t) if isinstance(n, ast.Name)} - set(_GLOBALS)))
    # Only identifiers of checked trees reach this text; the expressions go in as trees.
    skeleton = ast.parse(f"def _check({', '.join(args)}):\n"
                         "    _i = -1\n"
                         "    try:\n"
                         "        pass\n"
                         "    except _errors as _e:\n"
                         "        return (_i, _e)\n"
                         "    return -1\n")
    body = []
    for i, t in enumerate(trees):
        step = ast.parse(f"_i = {i}\nif not _E:\n    return {i}\n").body
        step[1].test.operand = t.body
        body.extend(step)
    skeleton.body[0].body[1].body = body or [ast.Pass()]
    code = compile(ast.fix_missing_locations(skeleton), "<constraints>", "exec")
    scope: dict[str, Any] = {}
    # lowercase names: never a macro's (MACRO_RE)
    exec(code, {**_GLOBALS, "_errors": (ArithmeticError, ValueError, TypeError)}, scope)  # noqa: S102 - checked trees, no builtins
    return scope["_check"], args


def names(expr: str) -> set[str]:
    """The names `expr` mentions (macros and the functions it calls)."""
    return {n.id for n in ast.walk(_parse(expr)) if isinstance(n, ast.Name)}


def validate(expr: str, known: set[str], where: str) -> None:
    """Checks that `expr` is short, parses, uses only allowed syntax and known macros."""
    if len(expr) > MAX_CHARS:
        raise SweepError(f"{where}: {_shown(expr)} is {len(expr):,} characters, over the {MAX_CHARS} a constraint "
                         "may have; split it into several constraints")
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        why = getattr(e, "msg", None) or str(e) or type(e).__name__
        raise SweepError(f"{where}: {_shown(expr)} is not an expression ({why}); write e.g. {EXAMPLE}") from None
    if _depth(tree) > MAX_DEPTH:
        raise SweepError(f"{where}: {_shown(expr)} nests more than the {MAX_DEPTH} levels a constraint may; "
                         "write it flatter or split it into several constraints")
    # Checked on the tree, not by evaluating a probe: and/or, chained comparisons and
    # if/else short-circuit, so a probe never visits every branch.
    bad = _disallowed(tree)
    if bad is not None:
        raise SweepError(f"{where}: {_shown(expr)} uses {bad}, which constraints do not allow; use {ALLOWED}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in known and node.id not in FUNCTIONS:
            raise SweepError(f"{where}: {_shown(expr)} names {node.id!r}, which is not a parameter of this space; "
                             f"parameters: {', '.join(sorted(known))}")


def _shown(expr: str) -> str:
    return repr(expr) if len(expr) <= 120 else repr(expr[:100]) + "..."


@functools.lru_cache(maxsize=1024)
def _parse(expr: str) -> ast.Expression:
    if len(expr) > MAX_CHARS:
        raise ValueError(f"expression of {len(expr)} characters, over {MAX_CHARS}")
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, MemoryError, RecursionError) as e:
        raise ValueError(f"not an expression: {e}") from None
    if _depth(tree) > MAX_DEPTH:
        raise ValueError(f"expression nested over {MAX_DEPTH} levels")
    return tree


@functools.lru_cache(maxsize=1024)
def _compiled(expr: str) -> CodeType:
    """`expr` checked (ValueError if it is not a constraint expression) and compiled,
    its ** and << calls to the bounded versions."""
    return compile(_bounded_tree(expr), "<constraint>", "eval")


def _bounded_tree(expr: str) -> ast.Expression:
    """A fresh tree of `expr`, checked, with ** and << as calls to the bounded versions."""
    tree = _parse(expr)
    bad = _disallowed(tree)
    if bad is not None:
        raise ValueError(f"{expr!r} uses {bad}")

    class Bounded(ast.NodeTransformer):
        def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
            self.generic_visit(node)
            fn = _BOUNDED.get(type(node.op))
            if fn is None:
                return node
            return ast.copy_location(ast.Call(ast.Name(fn, ast.Load()), [node.left, node.right], []), node)

    return ast.fix_missing_locations(Bounded().visit(ast.parse(expr, mode="eval")))


def _depth(tree: ast.AST) -> int:
    """The syntax tree's depth, counted without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if d <= MAX_DEPTH:   # deeper is refused anyway; no need to walk on
            stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _disallowed(tree: ast.AST) -> str | None:
    """The first construct of `tree` that constraints do not allow, described; None if all are allowed."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    members = _members(tree)
    if isinstance(members, str):
        return members
    for node in ast.walk(tree):
        if isinstance(node, _COLLECTIONS) and id(node) in members:
            continue
        if not isinstance(node, _ALLOWED_NODES):
            if isinstance(node, ast.expr):
                return f"{type(node).__name__.lower()} {ast.unparse(node)!r}"
            return f"the operator {type(node).__name__}"
        if isinstance(node, ast.Call):
            f = node.func
            if not (isinstance(f, ast.Name) and f.id in FUNCTIONS):
                return f"a call to {ast.unparse(f)}"
            if node.keywords or not (len(node.args) == 1 if f.id == "abs" else len(node.args) >= 2):
                return f"{ast.unparse(node)!r} (abs takes one argument, min and max two or more)"
        if isinstance(node, ast.Constant) and (isinstance(node.value, bool) or not isinstance(node.value, (int, float))):
            return f"the constant {node.value!r}"
        if isinstance(node, ast.Name) and node.id in FUNCTIONS and id(node) not in called:
            return f"{node.id} without calling it"
    return None


def _members(tree: ast.AST) -> set[int] | str:
    """The ids of the lists that `in` and `not in` test against, each of integers alone (a
    constant, or a negated one); or what is wrong with the first that is not."""
    lists: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for op, right in zip(node.ops, node.comparators):
            if not isinstance(op, _MEMBERSHIP):
                continue
            if not (isinstance(right, _COLLECTIONS) and 0 < len(right.elts) <= MAX_MEMBERS
                    and all(_integer(e) for e in right.elts)):
                return (f"{ast.unparse(node)!r} (in and not in take a list of 1 to {MAX_MEMBERS} integers, "
                        f"e.g. X in [32, 64])")
            lists.add(id(right))
    return lists


def _integer(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool)
