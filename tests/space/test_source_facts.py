"""What the sources say of their macros (sweep.space.source_facts): the kernels each governs and
the static_asserts as constraints. On a program written for the purpose (tests/data/source_facts),
and against the hand-written spaces this project ships: the same kernels, the same legal points."""

from __future__ import annotations

import fnmatch
import itertools
import subprocess
from pathlib import Path

import pytest

from sweep.space import expr, init, target
from sweep.space.source_facts import read_sources
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "tests" / "data" / "source_facts"
SHIPPED = sorted([*ROOT.glob("examples/*/space*.yaml"), *ROOT.glob("spaces/*.yaml")])
# Where the sources and a shipped space differ, and why the sources are right:
NOT_IN_THE_SPACE = {
    ("HOST_HEAVY_UNSAFE", "transpose_tiled_kernel"),         # only lifts a static_assert: no kernel reads it
}
NOT_IN_THE_SOURCES_READING = {
    ("ATTENTION_DECODE_BLOCK_SIZE", "attention_decode_kernel"),  # spaces/decode.yaml times the split path only
}


def facts_of(folder: Path):
    own = {m.name: m.default for m in init.scan_macros(folder)}
    return read_sources(folder, init.source_files(folder), own), own


def test_each_route_by_which_a_macro_reaches_a_kernel_is_followed():
    facts, _ = facts_of(PROGRAM)
    assert dict(facts.governs) == {
        "SUM_THREADS": ("row_sum",),                 # its body and its launch
        "TR_TILE": ("transpose",), "TR_ROWS": ("transpose",),   # template arguments given to its launcher
        "SCALE_BLOCK": ("scale_kernel",),            # handed to a launch helper with the kernel
        "SCALE_FAST": ("scale_kernel",),             # an #if in a device function it calls
        "VEC": ("copy_kernel",),                     # the local dim3 its launch uses
        "UNUSED_LIMIT": (),                          # a static_assert alone
    }


def test_static_asserts_become_rules_with_their_messages_and_the_untranslatable_are_named():
    facts, _ = facts_of(PROGRAM)
    rules = {r.expr: (r.why, r.where) for r in facts.rules}
    assert rules["TR_TILE * TR_ROWS <= 1024 and TR_TILE % TR_ROWS == 0"] == (
        "TR_ROWS must divide TR_TILE, at most 1024 threads", "kernels.cuh:32")     # TR_THREADS expanded
    assert rules["(VEC & (VEC - 1)) == 0 and VEC <= 4"][0] == "VEC: 1, 2 or 4 floats per load"   # POW2(n) expanded
    (u,) = facts.untranslated
    assert u.text == "sizeof(float) * VEC <= 16" and "sizeof" in u.reason and u.where == "kernels.cuh:34"


def test_a_rule_false_at_the_sources_own_values_is_refused_as_misread(tmp_path):
    (tmp_path / "k.cu").write_text("#ifndef B\n#define B 96\n#endif\n"
                                   "static_assert((B & (B - 1)) == 0 || B % 32 == 0, \"B\");\n"
                                   "static_assert(B & B - 1 == 0, \"precedence: B & ((B - 1) == 0)\");\n")
    facts = read_sources(tmp_path, [tmp_path / "k.cu"], {"B": 96})
    assert [r.expr for r in facts.rules] == ["(B & (B - 1)) == 0 or B % 32 == 0"]
    assert [r.expr for r in read_sources(tmp_path, [tmp_path / "k.cu"], {"B": 1}).rules][1:] == ["B & (B - 1 == 0)"]
    (u,) = facts.untranslated
    assert "false at the sources' own values" in u.reason


@pytest.mark.parametrize("space_file", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_sources_name_the_kernels_each_shipped_space_lists_for_its_macros(space_file):
    space = target.load(space_file)
    facts, _ = facts_of(Path(space.target.source_dir))
    for p in (p for p in space.parameters if not p.derived):
        read = set(facts.governs[p.macro])
        missed = {(p.macro, g) for g in p.kernels if not any(fnmatch.fnmatchcase(k, g) for k in read)}
        extra = {(p.macro, k) for k in read if not any(fnmatch.fnmatchcase(k, g) for g in p.kernels)}
        assert missed <= NOT_IN_THE_SPACE and extra <= NOT_IN_THE_SOURCES_READING, (missed, extra)


@pytest.mark.parametrize("space_file, illegal", [("examples/tiled_gemm/space_large.yaml", 1573),
                                                 ("examples/stencil_cmake/space_large.yaml", 166),
                                                 ("spaces/decode.yaml", 18), ("spaces/seed.yaml", 0)])
def test_the_translated_static_asserts_keep_the_same_points_as_the_hand_written_constraints(space_file, illegal):
    space = target.load(ROOT / space_file)
    facts, own = facts_of(Path(space.target.source_dir))
    swept = [p for p in space.parameters if not p.derived]
    hand, _ = expr.checker(tuple(c.expr for c in space.constraints))
    ours, _ = expr.checker(tuple(r.expr for r in facts.rules))
    hand_names = sorted({n for c in space.constraints for n in expr.names(c.expr)} - set(expr.FUNCTIONS))
    our_names = sorted({n for r in facts.rules for n in expr.names(r.expr)} - set(expr.FUNCTIONS))
    differ = refused = 0
    for values in itertools.product(*(p.values for p in swept)):
        point = {**own, **dict(zip((p.macro for p in swept), values))}
        point.update({p.macro: point[p.equals] for p in space.parameters if p.derived})
        by_hand = hand(*(point[n] for n in hand_names)) == -1
        differ += by_hand != (ours(*(point[n] for n in our_names)) == -1)
        refused += not by_hand
    assert (differ, refused) == (0, illegal)


@needs_nvcc
def test_the_program_written_for_these_tests_compiles_under_its_makefile(tmp_path):
    """The facts above are of a real CUDA program, not of text that only looks like one."""
    p = subprocess.run(["make", "-C", str(PROGRAM), f"BUILD_DIR={tmp_path}", "ARCH=sm_90", "all"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and (tmp_path / "program").is_file(), p.stdout + p.stderr
