"""A C integer constant expression (a static_assert's condition) in the constraint language.

    python_expr("GEMM_BM % GEMM_TM == 0 && GEMM_THREADS <= 1024", {"GEMM_BM", "GEMM_TM", ...},
                {"GEMM_THREADS": "((GEMM_BM / GEMM_TM) * (GEMM_BN / GEMM_TN))"})
    -> "GEMM_BM % GEMM_TM == 0 and GEMM_BM // GEMM_TM * (GEMM_BN // GEMM_TN) <= 1024"

It is parsed with C's precedence and written back with Python's, parenthesized where the two
differ (C's `a & b == c` is `a & (b == c)`; Python's is `(a & b) == c`), so a rule means what
the compiler checks. `/` becomes `//` (C divides integers; for the non-negative sizes of a launch
the two truncations agree), `&&` `||` `!` become and/or/not, `c ? a : b` becomes `a if c else b`.
An object-like macro the sources define from the swept ones (GEMM_THREADS above) is expanded.
What has no counterpart, or could mean something else in Python, is refused (Unsupported, saying
what): casts, sizeof, calls, `~` and `^`, a name that is no swept or expandable macro, and a logical
result used as a number (C's `(a && b) == 1` is 0 or 1; Python's `and` returns an operand).
"""

from __future__ import annotations

import re
from typing import Iterator, Mapping

TOKEN = re.compile(r"\s*(?:(?P<num>0[xX][0-9a-fA-F]+|\d+)[uUlL]*|(?P<name>[A-Za-z_]\w*)"
                   r"|(?P<op>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%<>&|^!~?:(),]))")
MAX_EXPANSION = 8            # macros defined from macros, this deep
MAX_TOKENS = 20_000          # tokens read for one condition, its macros expanded
MAX_NESTING = 40             # parentheses deep (each level is a dozen frames of the parser)
# (C operator, Python operator, Python precedence) of the left-associative binary operators, by C level
C_LEVELS = (("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="), ("<<", ">>"),
            ("+", "-"), ("*", "/", "%"))
PYTHON = {"||": ("or", 2), "&&": ("and", 3), "|": ("|", 6), "&": ("&", 8), "==": ("==", 5), "!=": ("!=", 5),
          "<": ("<", 5), "<=": ("<=", 5), ">": (">", 5), ">=": (">=", 5), "<<": ("<<", 9), ">>": (">>", 9),
          "+": ("+", 10), "-": ("-", 10), "*": ("*", 11), "/": ("//", 11), "%": ("%", 11)}
LOGICAL = frozenset({"||", "&&", "!"})
ALTERNATIVE = {"and": "&&", "or": "||", "not": "!", "not_eq": "!=", "bitand": "&", "bitor": "|", "xor": "^", "compl": "~"}
COMPARISON = 5
BITWISE = frozenset({6, 8, 9})            # | & << >> (Python's levels)
ARITHMETIC = frozenset({6, 8, 9, 10, 11})  # those and + - * // %


class Unsupported(ValueError):
    """The expression has no faithful translation; the message says what part."""


Macros = Mapping[str, str]                              # object-like: name -> C text
FunctionMacros = Mapping[str, tuple[tuple[str, ...], str]]  # function-like: name -> (parameters, C text)


def python_expr(text: str, swept: set[str], derived: Macros, functions: FunctionMacros | None = None) -> str:
    """`text` (C) as a constraint over the `swept` macros, expanding the `derived` ones and the
    function-like `functions` (`#define OK(n) ((n) % 32 == 0)`). Bounded: MAX_TOKENS tokens read in
    all, once the macros are expanded, and MAX_NESTING parentheses deep (a hostile header cannot
    make it hang, or recurse past Python's limit)."""
    try:
        tree = _Parser(text, swept, derived, functions or {}, 0, [MAX_TOKENS]).whole()
        return _emit(tree, boolean=True)[0]
    except RecursionError:
        raise Unsupported("nested too deeply") from None


class _Parser:
    def __init__(self, text: str, swept: set[str], derived: Macros, functions: FunctionMacros, depth: int,
                 budget: list[int]):
        self.tokens = list(_tokens(text))
        budget[0] -= len(self.tokens)
        if budget[0] < 0:
            raise Unsupported(f"over {MAX_TOKENS:,} tokens once its macros are expanded")
        nesting = 0
        for _, value in self.tokens:
            nesting += (value == "(") - (value == ")")
            if nesting > MAX_NESTING:
                raise Unsupported(f"parentheses more than {MAX_NESTING} deep")
        self.at = 0
        self.swept, self.derived, self.functions, self.depth, self.budget = swept, derived, functions, depth, budget

    def expanded(self, text: str) -> tuple:
        if self.depth >= MAX_EXPANSION:
            raise Unsupported("macros expanded too deep")
        return _Parser(text, self.swept, self.derived, self.functions, self.depth + 1, self.budget).whole()

    def whole(self) -> tuple:
        if not self.tokens:
            raise Unsupported("an empty expression")
        tree = self.ternary()
        if self.at != len(self.tokens):
            raise Unsupported(f"{self.tokens[self.at][1]!r} where the expression should end")
        return tree

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise Unsupported("an expression that ends too soon")
        token = self.tokens[self.at]
        if expected is not None and token[1] != expected:
            raise Unsupported(f"{token[1]!r} where {expected!r} belongs")
        self.at += 1
        return token

    def ternary(self) -> tuple:
        cond = self.binary(0)
        if self.peek() != "?":
            return cond
        self.take("?")
        yes = self.ternary()
        self.take(":")
        return ("cond", cond, yes, self.ternary())

    def binary(self, level: int) -> tuple:
        if level == len(C_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in C_LEVELS[level]:
            op = self.take()[1]
            if op == "^":
                raise Unsupported("'^' (exclusive or), which constraints do not allow")
            left = ("bin", op, left, self.binary(level + 1))
        return left

    def unary(self) -> tuple:
        op = self.peek()
        if op in ("!", "-", "+", "~"):
            self.take()
            if op == "~":
                raise Unsupported("'~' (bitwise not), which constraints do not allow")
            operand = self.unary()
            return operand if op == "+" else ("not" if op == "!" else "neg", operand)
        return self.primary()

    def primary(self) -> tuple:
        kind, value = self.take()
        if kind == "num":
            return ("num", int(value, 0) if not re.fullmatch(r"0\d+", value) else int(value, 8))
        if kind == "name":
            if self.peek() == "(" and value in self.functions:
                return self.call(value)
            if self.peek() == "(":
                raise Unsupported(f"a call of {value}(), which has no counterpart in a constraint")
            return self.name(value)
        if value == "(":
            if self.peek() is not None and self.tokens[self.at][0] == "name" and self.at + 1 < len(self.tokens) \
                    and self.tokens[self.at + 1][1] == ")" and self.tokens[self.at][1] not in self.swept \
                    and self.tokens[self.at][1] not in self.derived:
                raise Unsupported(f"a cast to {self.tokens[self.at][1]}")
            inner = self.ternary()
            self.take(")")
            return inner
        raise Unsupported(f"{value!r} where a value belongs")

    def name(self, name: str) -> tuple:
        if name in self.swept:
            return ("name", name)
        if name in ("true", "false"):
            return ("num", int(name == "true"))
        if name in self.derived:
            return self.expanded(self.derived[name])
        raise Unsupported(f"{name}, which is no swept macro nor one defined from them")

    def call(self, name: str) -> tuple:
        """A function-like macro's body, each parameter replaced by its argument in parentheses."""
        params, body = self.functions[name]
        self.take("(")
        args, depth, current = [], 0, []
        while True:
            kind, value = self.take()
            if value == ")" and depth == 0:
                break
            if value == "," and depth == 0:
                args.append(current)
                current = []
                continue
            depth += (value == "(") - (value == ")")
            current.append(value)
        args.append(current)
        if len(args) != len(params) and params:
            raise Unsupported(f"{name}() given {len(args)} argument(s) for its {len(params)}")
        given = dict(zip(params, (" ".join(a) for a in args)))
        return self.expanded(" ".join(f"( {given[v]} )" if k == "name" and v in given else v
                                      for k, v in _tokens(body)))


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    at, end = 0, len(text.rstrip())
    while at < end:
        m = TOKEN.match(text, at)
        if m is None or m.end() == at:
            raise Unsupported(f"{text[at:].strip()[:20]!r}, which is not part of an integer expression")
        at = m.end()
        kind = m.lastgroup or "op"
        if kind == "name" and m.group(kind) in ALTERNATIVE:     # C++'s `and`, `or`, `not` ...
            yield "op", ALTERNATIVE[m.group(kind)]
        else:
            yield kind, m.group(kind)


def _emit(node: tuple, boolean: bool) -> tuple[str, int]:
    """(Python text, its precedence). boolean: the value is only tested for truth (a rule's
    top, an and/or/not operand, a condition), where C's 0/1 and Python's operands agree."""
    kind = node[0]
    if kind == "num":
        return str(node[1]), 13
    if kind == "name":
        return node[1], 13
    if kind == "neg":
        return "-" + _wrapped(node[1], 12, False), 12
    if kind == "not":
        if not boolean:
            raise Unsupported("a logical result ('!') used as a number")
        return "not " + _wrapped(node[1], 4, True), 4
    if kind == "cond":
        _, cond, yes, no = node
        return f"{_wrapped(yes, 2, boolean)} if {_wrapped(cond, 2, True)} else {_wrapped(no, 1, boolean)}", 1
    _, op, left, right = node
    py, prec = PYTHON[op]
    if op in LOGICAL and not boolean:
        raise Unsupported(f"a logical result ('{op}') used as a number")
    inner = op in LOGICAL
    if prec == COMPARISON:    # Python chains comparisons; C compares the first result: never chain
        return f"{_wrapped(left, prec + 1, False, BITWISE)} {py} {_wrapped(right, prec + 1, False, BITWISE)}", prec
    if prec in BITWISE:       # parentheses a reader expects, where either language would drop them
        return f"{_wrapped(left, prec, inner, ARITHMETIC)} {py} {_wrapped(right, prec + 1, inner, ARITHMETIC)}", prec
    return f"{_wrapped(left, prec, inner)} {py} {_wrapped(right, prec + 1, inner)}", prec


def _wrapped(node: tuple, least: int, boolean: bool, clear: frozenset = frozenset()) -> str:
    """The node's text, in parentheses where its precedence is below `least`, or is one of `clear`
    under another operator (so `(X & (X - 1)) == 0` keeps the parentheses C needed)."""
    text, prec = _emit(node, boolean)
    return text if prec >= least and not (prec in clear and node[0] == "bin") else f"({text})"
