"""A static_assert's C condition in the constraint language (sweep.space.c_expr): C's precedence
kept, `/` as integer division, macros expanded, and what has no faithful translation refused."""

from __future__ import annotations

import itertools

import pytest

from sweep.space import expr
from sweep.space.c_expr import Unsupported, python_expr

SWEPT = {"A", "B", "C"}


@pytest.mark.parametrize("c, python", [
    ("A % 32 == 0 && A <= 1024", "A % 32 == 0 and A <= 1024"),
    ("A & B == C", "A & (B == C)"),                       # C compares before it masks
    ("(A & (A - 1)) == 0", "(A & (A - 1)) == 0"),
    ("A << 2 + B", "A << (2 + B)"),
    ("A < B < C", "(A < B) < C"),                         # never a Python chain
    ("A ? B : C", "B if A else C"),
    ("A / B % C", "A // B % C"),
    ("A - (B - C)", "A - (B - C)"),
    ("!(A % 32) || B >= 0x20u", "not A % 32 or B >= 32"),
])
def test_a_c_condition_reads_as_the_compiler_reads_it(c, python):
    assert python_expr(c, SWEPT, {}) == python


def test_every_translation_agrees_with_c_semantics_on_a_grid_of_values():
    cases = {"A & B == C": lambda a, b, c: a & int(b == c), "A - B - C": lambda a, b, c: a - b - c,
             "A < B < C": lambda a, b, c: int(int(a < b) < c), "A | B & C": lambda a, b, c: a | (b & c),
             "A / B * C": lambda a, b, c: a // b * c, "A ? B : C": lambda a, b, c: b if a else c}
    for c, meaning in cases.items():
        text = python_expr(c, SWEPT, {})
        for a, b, cc in itertools.product((0, 1, 2, 3, 8), (1, 2, 3), (0, 1, 4)):
            assert bool(expr.evaluate(text, {"A": a, "B": b, "C": cc})) == bool(meaning(a, b, cc)), (c, a, b, cc)


def test_object_and_function_like_macros_defined_from_the_swept_ones_are_expanded():
    derived = {"THREADS": "((A / B) * C)"}
    functions = {"OK": (("n",), "((n) >= 32 && (n) % 32 == 0)")}
    assert python_expr("THREADS <= 1024 && OK(A)", SWEPT, derived, functions) == \
        "A // B * C <= 1024 and (A >= 32 and A % 32 == 0)"


@pytest.mark.parametrize("c, says", [
    ("sizeof(A) == 4", "a call of sizeof()"),
    ("(int)A > 0", "a cast to int"),
    ("A ^ B", "'^'"),
    ("~A", "'~'"),
    ("(A && B) == 1", "a logical result ('&&') used as a number"),
    ("Check<A>::ok", "Check, which is no swept macro"),
    ("A +", "ends too soon"),
])
def test_what_has_no_faithful_translation_is_refused_saying_what(c, says):
    with pytest.raises(Unsupported) as e:
        python_expr(c, SWEPT, {})
    assert says in str(e.value)


def test_a_macro_defined_from_itself_is_refused_not_expanded_forever():
    with pytest.raises(Unsupported, match="too deep"):
        python_expr("LOOP > 0", SWEPT, {"LOOP": "LOOP + 1"})


@pytest.mark.parametrize("text, derived, says", [
    ("(" * 500 + "A" + ")" * 500 + " > 0", {}, "parentheses more than 40 deep"),
    ("M7 > 0", {"M0": "A", **{f"M{i}": "(" + " + ".join([f"M{i - 1}"] * 10) + ")" for i in range(1, 8)}},
     "tokens once its macros are expanded"),                 # 10^7 copies of A, were it expanded
])
def test_a_condition_that_would_recurse_or_expand_without_bound_is_refused(text, derived, says):
    with pytest.raises(Unsupported, match=says):
        python_expr(text, SWEPT, derived)


def test_cs_alternative_operator_spellings_read_as_the_symbols():
    assert python_expr("(A % B == 0) and not (C < 1) or A not_eq B", SWEPT, {}) == \
        "A % B == 0 and not C < 1 or A != B"
