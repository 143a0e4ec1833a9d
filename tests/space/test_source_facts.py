"""What the sources say of their macros (sweep.space.source_facts): the kernels each governs and
the static_asserts as constraints. On a program written for the purpose (tests/data/source_facts),
and against the hand-written spaces this project ships: the same kernels, the same legal points."""

from __future__ import annotations

import fnmatch
import itertools
import re
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
    files = init.with_included_headers(folder, init.source_files(folder))
    own = {m.name: m.default for m in init.scan_macros(folder, files)}
    return read_sources(folder, files, own), own


def test_each_route_by_which_a_macro_reaches_a_kernel_is_followed():
    facts, _ = facts_of(PROGRAM)
    assert dict(facts.governs) == {
        "SUM_THREADS": ("blocked_kernel", "row_sum"),   # its body and its launch; a local constant at a launch
        "TR_TILE": ("transpose",), "TR_ROWS": ("transpose",),   # template arguments given to its launcher
        "SCALE_BLOCK": ("scale_kernel",),            # handed to a launch helper with the kernel; not through
                                                     # a file-scope BLOCK that template parameters and a local shadow
        "SCALE_FAST": ("chained_kernel", "scale_kernel"),   # an #if in a device function it calls; a local
                                                           # declared from a local declared from it, at a launch
        "VEC": ("copy_kernel",),                     # the local dim3 its launch uses
        "UNUSED_LIMIT": (),                          # a static_assert alone
    }


def test_static_asserts_become_rules_with_their_messages_and_the_untranslatable_are_named():
    facts, _ = facts_of(PROGRAM)
    rules = {r.expr: (r.why, r.where) for r in facts.rules}
    assert rules["TR_TILE * TR_ROWS <= 1024 and TR_TILE % TR_ROWS == 0"] == (
        "TR_ROWS must divide TR_TILE, at most 1024 threads", "kernels.cuh:33")     # TR_THREADS expanded
    assert rules["(VEC & (VEC - 1)) == 0 and VEC <= 4"][0] == "VEC: 1, 2 or 4 floats per load"   # POW2(n) expanded
    # a constexpr constant expanded like a macro; C++'s `and` read as &&
    assert "TR_TILE * TR_ROWS // 32 >= 1 and TR_TILE * TR_ROWS // 32 <= 32" in rules
    # a function's own constexpr, read by the static_assert after it in that function only
    assert rules["SUM_THREADS // 32 <= 32 and SUM_THREADS >= 64"][0] == "run_blocked: 64 to 1024 threads"
    (u,) = facts.untranslated
    assert u.text == "sizeof(float) * VEC <= 16" and "sizeof" in u.reason and u.where == "kernels.cuh:35"


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


# Kernels the engine's code reads a macro in beyond those kernels/README.md's table names for it.
ENGINE_BEYOND_ITS_TABLE = {
    **dict.fromkeys([f"MATMUL_{m}" for m in ("BM", "BN", "BK", "WM", "WN", "TM", "TN", "STAGES")] +
                    [f"MATMUL_TF32X3_{m}" for m in ("BM", "BN", "BK", "WM", "WN", "STAGES")],
                    {"matmul_splitk_reduce_kernel"}),    # the split-K sums are launched with the matmul's tile
    "MATVEC_MAX_ROWS": {"matvec_splitk_kernel"},       # the decoding step's rows too (the table below it says so)
}


def test_the_engines_macros_reach_the_kernels_its_readme_table_names():
    """kernels/README.md names each launch-size macro's kernels, written by hand; the sources'
    reading must name every one, and beyond them only the kernels listed above, with why."""
    rows = [line.split(" | ") for line in (ROOT / "kernels" / "README.md").read_text().splitlines()
            if line.startswith("| `") and line.count(" | ") == 4]
    named = (re.sub(r"\([^)]*\)", "", row[3]) for row in rows)     # not the kernels a remark in brackets names
    table = {row[0].strip("| `"): set(re.findall(r"\b\w+_kernel\b", text)) for row, text in zip(rows, named)}
    facts, own = facts_of(ROOT / "kernels")
    assert set(table) == set(own)                       # the table has a row for every #ifndef macro
    for macro, kernels in table.items():
        assert set(facts.governs[macro]) == kernels | ENGINE_BEYOND_ITS_TABLE.get(macro, set()), macro
