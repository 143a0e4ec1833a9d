"""The package's stages import only downward, and no module imports itself back.

LAYERS is the one declared list of the stages, bottom first; a module may import
its own stage and the stages below it, never one above (function-level and
type-checking imports count too: they are the same dependency, only later). The
import graph, read from the sources with ast, must also have no circle, and no
module may grow past MAX_LINES (split it along a seam). The tests mirror the stages:
each test file sits in tests/<stage>/ or in a folder about an environment.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sweep"
LAYERS: tuple[tuple[str, ...], ...] = (
    ("sweep.core",),                                  # errors, atomic writes, paths, size limits
    ("sweep.stats",),                                 # pure statistics
    ("sweep.profile",),                               # backends: outputs -> Measurements
    ("sweep.records",),                               # the contract between stages
    ("sweep.space",),                                 # declare: space files, T1, targets
    ("sweep.plan",),                                  # strategies
    ("sweep.node",),                                  # what runs on the GPU node for one job
    ("sweep.dispatch",),                              # executors, progress
    ("sweep.decide",),                                # collect, select, certify
    ("sweep.report",),                                # HTML, markdown, JSON, T4
    ("sweep.pipeline",),                              # a sweep from start to end
    ("sweep.api", "sweep.cli", "sweep"),              # the ways in
)
MAX_LINES = 400
TESTS = Path(__file__).resolve().parent
# Test folders that are not a stage: the checkout's other folders (bench, kernels, examples,
# docs) and the environments some tests need (a Slurm cluster, a GPU, headless Chromium).
TEST_FOLDERS_BESIDE_STAGES = frozenset({"bench", "browser", "data", "docs", "examples", "gpu", "kernels", "slurm"})


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The sweep modules `name` imports (anywhere in its file)."""
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "sweep")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "sweep":
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                out.add(sub if sub in known else module)
    out.discard(name)
    return {m for m in out if m in known}


def layer_of(module: str) -> int:
    best = (-1, -1)
    for rank, names in enumerate(LAYERS):
        for prefix in names:
            if module == prefix or module.startswith(prefix + ".") and prefix != "sweep":
                best = max(best, (len(prefix), rank))
    if best[1] < 0:
        raise AssertionError(f"{module} belongs to no layer: add its package to LAYERS in {__file__}")
    return best[1]


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def test_every_module_belongs_to_a_declared_layer():
    for name in modules():
        layer_of(name)


def test_no_module_imports_a_later_stage():
    upward = [f"{m} (layer {LAYERS[layer_of(m)][0]}) imports {d} (layer {LAYERS[layer_of(d)][0]})"
              for m, deps in graph().items() for d in sorted(deps) if layer_of(d) > layer_of(m)]
    assert upward == [], "imports that climb a stage:\n" + "\n".join(upward)


def test_the_import_graph_has_no_circle():
    g = graph()
    circles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        stack.append(node)
        for dep in sorted(g[node]):
            if state.get(dep) == "open":
                circles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(g):
        if node not in state:
            visit(node, [])
    assert circles == [], "import circles:\n" + "\n".join(circles)


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_module_is_longer_than_the_limit(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path} has {lines} lines (limit {MAX_LINES}): split it along a seam"


def test_each_test_file_sits_in_its_stages_folder_under_a_name_no_other_folder_uses():
    stages = {name.split(".")[1] for names in LAYERS for name in names if "." in name}
    files = sorted(TESTS.rglob("test_*.py"))
    misplaced = [str(p.relative_to(TESTS)) for p in files
                 if p.parent == TESTS and p != TESTS / "test_layers.py"
                 or p.parent != TESTS and p.relative_to(TESTS).parts[0] not in stages | TEST_FOLDERS_BESIDE_STAGES]
    assert misplaced == [], ("test files outside tests/<stage>/ (docs/testing.md says where a test goes):\n"
                             + "\n".join(misplaced))
    # pytest imports each file by its name (the folders are not packages): a second file of one
    # name fails the whole collection.
    by_name: dict[str, list[str]] = {}
    for p in files:
        by_name.setdefault(p.name, []).append(str(p.relative_to(TESTS)))
    shared = [" and ".join(paths) for paths in by_name.values() if len(paths) > 1]
    assert shared == [], "test files sharing a name:\n" + "\n".join(shared)
