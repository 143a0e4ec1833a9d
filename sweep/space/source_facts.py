"""What a program's sources say of its launch-size macros, read as text (nothing is built or run):

- which kernels each macro governs: a kernel reads it where its body (its `#if` lines too), its
  `__launch_bounds__` or a function it calls names it, or where a launch of it (`k<<<grid, block>>>`,
  `k<TILE><<<...>>>`) names it in its template arguments, its launch configuration, or the
  declaration of a variable that configuration uses in the same function (`dim3 block(TX, TY);`),
  or the arguments of a call that hands the kernel on (`launch(kernel, grid, dim3(BLOCK))`), or
  the template or call arguments given to a function that calls or instantiates it;
  a macro defined from others (`#define THREADS (BM / TM * BN)`) counts as those;
- the rules: each `static_assert` over the macros, in the constraint language (sweep.space.c_expr),
  with its message as the reason; one that cannot be translated is named with why.

`config-sweep init` writes both into a starter space. It is a reading, not a proof: a macro
used through a path this does not follow (a function pointer, a launch through cudaLaunchKernel)
is missed, so the starter says to check the lists.
"""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from sweep.core.errors import SweepError
from sweep.space import c_expr, expr
from sweep.space.source_text import source_text

IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)(?:\((?P<params>[^)]*)\))?"
                    r"(?P<body>(?:[ \t][^\n]*)?)$", re.M)
CALL_OR_DEFINITION = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*[(<]")
TEMPLATE_REFERENCE = re.compile(r"\b([A-Za-z_]\w*)\s*(<(?:[^<>;{}]|<[^<>;{}]*>)*>)")
TEMPLATE_PARAMETER = re.compile(r"(?:[<,]\s*)(?:int|unsigned(?:\s+int)?|bool|size_t|long|auto|typename|class|uint)"
                                r"\s+([A-Za-z_]\w*)")
QUALIFIERS = re.compile(r"\s*(?:(?:const|noexcept|override|final)\b\s*)*")
LAUNCH = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*(?P<targs><(?:[^<>;{}]|<[^<>;{}]*>)*>)?\s*<<<")
CONSTANT = re.compile(r"\b(?:static\s+)?constexpr\s+(?:(?:unsigned|signed|const)\s+)*(?:int|uint|unsigned|long|size_t|"
                      r"int64_t|uint32_t|int32_t|auto)\s+([A-Za-z_]\w*)\s*=\s*([^;{}]+);")
STATIC_ASSERT = re.compile(r"\bstatic_assert\s*\(")
STRING = re.compile(r'"((?:\\.|[^"\\\n])*)"')
NOT_A_FUNCTION = frozenset({"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "__launch_bounds__",
                            "__attribute__", "__align__", "alignas", "static_assert", "constexpr", "else", "do",
                            "alignof", "typeid", "throw", "new", "delete", "operator", "defined"})
DECLARATION = re.compile(r"\b(?:(?:static\s+)?(?:constexpr|const)\s+)?(?:dim3|int|unsigned(?:\s+int)?|size_t|long|auto|uint3"
                         r"|int64_t)\s+([A-Za-z_]\w*)\s*[(={]([^;]*);")


@dataclass(frozen=True, slots=True)
class SourceRule:
    expr: str          # in the constraint language
    why: str           # the static_assert's message
    where: str         # file:line


@dataclass(frozen=True, slots=True)
class Untranslated:
    text: str          # the static_assert's condition as written
    reason: str
    where: str


@dataclass(frozen=True)
class SourceFacts:
    governs: Mapping[str, tuple[str, ...]]     # macro -> the kernels that read it, sorted
    rules: tuple[SourceRule, ...]
    untranslated: tuple[Untranslated, ...]


@dataclass(frozen=True, slots=True)
class _Source:
    name: str          # relative to the program's folder
    code: str          # comments blanked (offsets kept), strings kept: for messages
    plain: str         # strings blanked too: for the names a span reads (its #if lines among them)
    shape: str         # directives blanked too: for braces, parentheses and definitions


def read_sources(program_dir: Path, files: Iterable[Path], defaults: Mapping[str, int]) -> SourceFacts:
    """The facts of `files` (under program_dir) about the macros of `defaults` (name -> the
    sources' own value: a rule false there is refused as mistranslated)."""
    sources = [_load(Path(program_dir), p) for p in files]
    sources = [s for s in sources if s is not None]
    swept = set(defaults)
    defines = [_defines(s.code) for s in sources]
    derived = {n: b for objects, _ in defines for n, b in objects.items() if n not in swept}
    functions = {n: f for _, fs in defines for n, f in fs.items()}
    reads: dict[str, set[str]] = {}     # function -> the names of its definition (and of its launches: a kernel)
    calls: dict[str, set[str]] = {}     # function -> the names its definition calls or instantiates
    kernels: set[str] = set()
    bodies: dict[str, list[tuple[int, int]]] = {}   # source -> its functions' bodies, outermost, in order
    for s in sources:
        spans = []
        for name, head, body, called, span in _definitions(s):
            reads.setdefault(name, set()).update(head, body)
            calls.setdefault(name, set()).update(called)
            spans.append(span)
            if "__global__" in head:
                kernels.add(name)
        bodies[s.name] = _outermost(spans)
        for name, used in _launches(s, bodies[s.name]):
            reads.setdefault(name, set()).update(used)
            calls.setdefault(name, set()).update(used)     # a grid computed by a function: its names too
    for s in sources:                   # `constexpr int WARPS = THREADS / 32;` at file scope: read as a macro
        for name, value in _constants(s.code, 0, len(s.code), bodies[s.name]).items():
            if name not in swept:
                derived.setdefault(name, value)
    passed: dict[str, set[str]] = {}    # function -> the names of the template and call arguments it is given
    handed: dict[str, set[str]] = {}    # kernel -> the names of the calls that hand it on (a launch helper's)
    for s in sources:                   # anywhere, a function-like macro's body among them
        for name, given, at in _arguments(s.plain):
            shadowable = bool(given & derived.keys())    # a name a local declaration may shadow
            if shadowable:
                given = _declared(s.shape, at, given, bodies[s.name])
            if name in calls:
                passed.setdefault(name, set()).update(given)
            if given & kernels:         # `launch(kernel, grid, dim3(BLOCK))`: the sizes go with the kernel
                sized = given if shadowable else _declared(s.shape, at, given, bodies[s.name])
                for k in given & kernels:
                    handed.setdefault(k, set()).update(sized)
    names = {k: set().union(handed.get(k, set()), *(reads.get(f, set()) for f in _down(k, calls))) for k in kernels}
    for g, given in passed.items():     # a function's arguments reach every kernel it calls or instantiates
        for k in _down(g, calls) & kernels:
            names[k] |= given
    governs: dict[str, set[str]] = {m: set() for m in swept}
    for k in kernels:
        for m in _macros(names[k], swept, derived):
            governs[m].add(k)
    rules, untranslated = _rules(sources, swept, derived, functions, defaults, bodies)
    return SourceFacts({m: tuple(sorted(ks)) for m, ks in governs.items()}, rules, untranslated)


def _load(program_dir: Path, path: Path) -> _Source | None:
    try:
        text = source_text(path)
    except OSError:
        return None
    code = COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else _blank(m.group(0)), text)
    plain = COMMENT_OR_STRING.sub(lambda m: _blank(m.group(0)), text)
    shape = DIRECTIVE.sub(lambda m: _blank(m.group(0)), plain)
    return _Source(os.path.relpath(path, program_dir), code, plain, shape)


def _blank(text: str) -> str:
    """Spaces in place of `text`, its newlines kept (offsets and line numbers stay)."""
    return re.sub(r"[^\n]", " ", text)


def _defines(code: str) -> tuple[dict[str, str], dict[str, tuple[tuple[str, ...], str]]]:
    """The object-like `#define NAME body` and the function-like `#define NAME(a, b) body`
    (continuations joined), the first definition of each."""
    objects: dict[str, str] = {}
    functions: dict[str, tuple[tuple[str, ...], str]] = {}
    for m in DEFINE.finditer(code.replace("\\\n", " ")):
        body = m.group("body").strip()
        if m.group("params") is not None:
            functions.setdefault(m.group("name"), (tuple(p.strip() for p in m.group("params").split(",") if p.strip()),
                                                   body))
        elif body:
            objects.setdefault(m.group("name"), body)
    return objects, functions


def _closing(text: str, at: int, opening: str, closing: str) -> int:
    """The index just past the bracket closing the one at `at` (len(text) if none)."""
    depth = 0
    for i in range(at, len(text)):
        c = text[i]
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _definitions(s: _Source) -> Iterable[tuple[str, set[str], set[str], set[str], tuple[int, int]]]:
    """(name, the names of its head, of its body, those its body calls or instantiates, where its
    body starts and ends) of each function defined (not only declared): a name, its parameters, at
    most qualifiers, then a body. The head runs from the end of the statement before (its return
    type, template line, __global__ and __launch_bounds__)."""
    shape = s.shape
    for m in CALL_OR_DEFINITION.finditer(shape):
        name = m.group(1)
        if name in NOT_A_FUNCTION:
            continue
        close = _closing(shape, m.end() - 1, "(", ")")
        q = QUALIFIERS.match(shape, close)
        if q.end() >= len(shape) or shape[q.end()] != "{":
            continue
        start = max(shape.rfind(c, 0, m.start()) for c in ";{}") + 1
        end = _closing(shape, q.end(), "{", "}")
        head = s.plain[start:q.end()]
        bound = set(TEMPLATE_PARAMETER.findall(head))    # given at each instantiation, not a file-scope name
        yield (name, set(IDENT.findall(head)) - bound, set(IDENT.findall(s.plain[q.end():end])) - bound,
               set(CALLED.findall(shape, q.end(), end)), (q.end(), end))


def _outermost(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans no other span holds, in order (a function's body, not a block inside it)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if not out or start >= out[-1][1]:
            out.append((start, end))
    return out


def _arguments(plain: str) -> Iterable[tuple[str, set[str], int]]:
    """(name, the names of its arguments, where) of each `f<...>` and `f(...)` in `plain`."""
    for m in TEMPLATE_REFERENCE.finditer(plain):
        yield m.group(1), set(IDENT.findall(m.group(2))), m.start()
    for m in CALL_OR_DEFINITION.finditer(plain):
        if m.group(1) not in NOT_A_FUNCTION:
            yield m.group(1), set(IDENT.findall(plain[m.end():_closing(plain, m.end() - 1, "(", ")")])), m.start()


def _launches(s: _Source, bodies: list[tuple[int, int]]) -> Iterable[tuple[str, set[str]]]:
    """(kernel, names) of each `kernel<...><<<config>>>`: the names of its template arguments, its
    configuration, and the declarations of the variables of both in the enclosing function."""
    shape = s.shape
    for m in LAUNCH.finditer(shape):
        end = shape.find(">>>", m.end())
        if end < 0:
            continue
        used = set(IDENT.findall(m.group("targs") or "")) | set(IDENT.findall(shape[m.end():end]))
        yield m.group("name"), _declared(shape, m.start(), used, bodies)


def _declared(shape: str, at: int, names: set[str], bodies: list[tuple[int, int]]) -> set[str]:
    """`names`, each declared before `at` in the same function body (`dim3 block(TX, TY);`,
    `constexpr int BLOCK = SIZE;`; outside any body, the file before it) replaced by the names of
    its declarations, through declarations of declared names too: a local shadows any file-scope
    name it has. Applied to its own result it changes nothing."""
    body = _body_at(bodies, at)
    local: dict[str, list[str]] = {}       # name -> the texts that declare it
    for decl in DECLARATION.finditer(shape, body[0] if body else 0, at):
        local.setdefault(decl.group(1), []).append(decl.group(2))
    return _leaves(names, lambda n: [m for text in local[n] for m in IDENT.findall(text)] if n in local else None)


def _down(function: str, calls: dict[str, set[str]]) -> set[str]:
    """The function and those it calls or instantiates, transitively."""
    seen, todo = {function}, [function]
    while todo:
        for callee in calls.get(todo.pop(), set()) & calls.keys():
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return seen


def _macros(names: set[str], swept: set[str], derived: dict[str, str]) -> set[str]:
    """The swept macros among `names`, through the macros defined from them."""
    return swept & _leaves(names, lambda n: IDENT.findall(derived[n]) if n in derived and n not in swept else None)


def _leaves(names: set[str], expand) -> set[str]:
    """The names reached from `names` that do not expand: each one `expand` gives a list for (its
    definition's names) is replaced by those, transitively, each name visited once."""
    out, seen, todo = set(), set(), list(names)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        more = expand(n)
        if more is None:
            out.add(n)
        else:
            todo.extend(more)
    return out


def _constants(code: str, start: int, end: int, bodies: list[tuple[int, int]]) -> dict[str, str]:
    """The `constexpr` integer constants defined in code[start:end] outside the function `bodies`
    (name -> C text), the first of each name."""
    out: dict[str, str] = {}
    for m in CONSTANT.finditer(code, start, end):
        if _body_at(bodies, m.start()) is None:
            out.setdefault(m.group(1), m.group(2).strip())
    return out


def _body_at(bodies: list[tuple[int, int]], at: int) -> tuple[int, int] | None:
    """The function body holding offset `at` (None: file scope)."""
    i = bisect.bisect_right(bodies, (at, at)) - 1
    return bodies[i] if i >= 0 and bodies[i][0] <= at < bodies[i][1] else None


def _rules(sources: list[_Source], swept: set[str], derived: dict[str, str], functions: c_expr.FunctionMacros,
           defaults: Mapping[str, int], bodies: dict[str, list[tuple[int, int]]]
           ) -> tuple[tuple[SourceRule, ...], tuple[Untranslated, ...]]:
    """Each static_assert over the swept macros, translated; one inside a function also reads the
    constexpr constants that function defines before it (`constexpr uint WARPS = THREADS / 32;`)."""
    rules: dict[str, SourceRule] = {}
    untranslated: list[Untranslated] = []
    for s in sources:
        for m in STATIC_ASSERT.finditer(s.shape):
            body = _body_at(bodies[s.name], m.start())
            local = {**derived, **{n: v for n, v in _constants(s.code, body[0], m.start(), []).items() if n not in swept}} \
                if body else derived
            close = _closing(s.shape, m.end() - 1, "(", ")")
            inside = s.shape[m.end():close - 1]
            comma = _top_level_comma(inside)
            condition = " ".join(s.code[m.end():m.end() + (comma if comma >= 0 else len(inside))].split())
            message = s.code[m.end() + comma + 1:close - 1] if comma >= 0 else ""
            why = "".join(STRING.findall(message)).replace('\\"', '"') or condition
            where = f"{s.name}:{s.code.count(chr(10), 0, m.start()) + 1}"
            if not _macros(set(IDENT.findall(condition)), swept, local):
                continue               # a rule of other things: nothing a space can say
            try:
                text = c_expr.python_expr(condition, swept, local, functions)
                expr.validate(text, swept, where)
                holds = expr.evaluate(text, defaults)
            except (c_expr.Unsupported, SweepError, ValueError, ArithmeticError, TypeError) as e:
                untranslated.append(Untranslated(condition, str(e), where))
                continue
            if not holds:
                untranslated.append(Untranslated(condition, "false at the sources' own values, so read wrongly", where))
            elif text not in rules:
                rules[text] = SourceRule(text, why, where)
    return tuple(rules.values()), tuple(untranslated)


def _top_level_comma(text: str) -> int:
    depth = 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            return i
    return -1
