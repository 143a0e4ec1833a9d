"""Shared fixtures: the CPU toy target (tests/data/toy_target) and sweeps over it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

DATA = Path(__file__).parent / "data"
TOY_TARGET = DATA / "toy_target"
H100 = DATA / "h100"

# The node-wide GPU locks (sweep.node.gpus) of this test run's own: the toy's "GPU 0" of
# concurrent test runs on one machine is no shared device, nor is it between the run's xdist
# workers (pytest -n), which inherit the folder made here in the controlling process: each
# worker makes its own. A folder set before the run (to share real GPUs' locks) stays as set.
_MADE_LOCK_DIR = "SWEEP_TESTS_MADE_LOCK_DIR"
if "SWEEP_LOCK_DIR" not in os.environ or (os.environ.get(_MADE_LOCK_DIR) == os.environ["SWEEP_LOCK_DIR"]
                                          and "PYTEST_XDIST_WORKER" in os.environ):
    import atexit
    import tempfile

    _worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    os.environ["SWEEP_LOCK_DIR"] = os.environ[_MADE_LOCK_DIR] = tempfile.mkdtemp(prefix=f"sweep-locks-{_worker}")
    # the process that made it removes it when it exits: no lock folder of a finished run is left behind
    atexit.register(shutil.rmtree, os.environ["SWEEP_LOCK_DIR"], ignore_errors=True)

# Fixtures set up once per session or module and costly to set up (an nvcc-built sweep): the
# tests sharing one are kept on one xdist worker, so it is set up once, not once per worker.
# Module-scoped fixtures count always (one instance per module); session-scoped ones by name.
COSTLY_SESSION_FIXTURES = {"toy_sweep"}


@pytest.hookimpl(tryfirst=True)   # before xdist's own hook reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    parent: dict[object, object] = {}

    def root(key: object) -> object:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    shared: dict[pytest.Item, list[object]] = {}
    for item in items:
        if item.get_closest_marker("xdist_group") or not hasattr(item, "_fixtureinfo"):
            continue    # grouped already (the Slurm and GPU tests), or no fixtures
        keys = []
        for name, defs in item._fixtureinfo.name2fixturedefs.items():
            scope = defs[-1].scope if defs else "function"
            if scope == "module":
                keys.append((name, item.path.name))
            elif scope == "session" and name in COSTLY_SESSION_FIXTURES:
                keys.append((name,))
        if keys:
            shared[item] = keys
            for key in keys[1:]:
                parent[root(key)] = root(keys[0])
    for item, keys in shared.items():
        item.add_marker(pytest.mark.xdist_group("fixture:" + "/".join(map(str, root(keys[0])))))


def toy_space_dict(**overrides) -> dict:
    space = yaml.safe_load((DATA / "toy_space.yaml").read_text())
    space["target"]["dir"] = str(TOY_TARGET)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(space.get(key), dict):
            space[key].update(value)
        else:
            space[key] = value
    return space


@pytest.fixture
def write_space(tmp_path):
    """write_space(**overrides) -> path of a toy space file in tmp_path."""
    def _write(name: str = "toy.yaml", **overrides) -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(toy_space_dict(**overrides), sort_keys=False))
        return path
    return _write


@pytest.fixture
def job_for(write_space, tmp_path):
    """job_for(alpha=, beta_x=, beta_y=, backend=, **space overrides) -> a rendered toy job folder."""
    from sweep.node import render
    from sweep.space import target
    from sweep.space import config_hash, make_config

    def _make(alpha=128, beta_x=64, beta_y=4, backend="events", **overrides) -> Path:
        profile = {"backend": backend, **overrides.pop("profile", {})}
        space = target.load(write_space(profile=profile, **overrides))
        c = make_config(space, {"ALPHA_BLOCK": alpha, "BETA_X": beta_x, "BETA_Y": beta_y})
        jc = render.job_config(space, c, f"A{alpha}_B{beta_x}x{beta_y}", config_hash(space, c, "d"), "abc123")
        return render.write_job(render.render_job(space, jc, tmp_path / "jobs", tmp_path / "cache"))
    return _make


@pytest.fixture
def dirs(tmp_path):
    """Fresh jobs/ and results/ folders."""
    return tmp_path / "jobs", tmp_path / "results"


@pytest.fixture
def fake_gpus(monkeypatch):
    """Pretend two GPUs are visible (the toy target never touches them)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")


# The tests that build with real nvcc (CI has it; a GPU-less laptop may not): a module's
# `pytestmark = needs_nvcc`, or one test's @needs_nvcc.
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


@pytest.fixture(scope="session")
def has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return os.system("nvidia-smi -L > /dev/null 2>&1") == 0


def run_toy_sweep(root: Path, space: dict, **options):
    """Run `space` (a toy space dict) as root/toy.yaml through the debug executor, as if on
    GPU 0: (space path, jobs root, results root, RunSummary). Skips without nvcc."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    from sweep.pipeline import driver as pipeline

    path = root / "toy.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    try:
        summary = pipeline.run(path, pipeline.Options(executor="debug", jobs_root=root / "jobs",
                                                      results_root=root / "results", poll_s=0.05, **options))
    finally:
        if old is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old
    return path, root / "jobs", root / "results", summary


@pytest.fixture(scope="session")
def toy_sweep(tmp_path_factory):
    """One full toy grid sweep (debug executor): (space path, jobs root, results root, RunSummary)."""
    return run_toy_sweep(tmp_path_factory.mktemp("toy_sweep"), toy_space_dict(), report=False)


PY_TARGET = DATA / "py_target"


def py_space_dict(name: str = "py", **parameters) -> dict:
    """A space over tests/data/py_target (no compiler, no GPU: k_a reads ALPHA_BLOCK, fastest at
    128; k_b reads BETA, fastest at 4); `parameters` replace the default ALPHA_BLOCK sweep."""
    return {"name": name, "target": {"name": "py", "dir": str(PY_TARGET), "profile": ["{build}/bench", "-n",
                                                                                      "{iterations}"],
                                     "events": ["--json", "{events_json}"]},
            "strategy": "grid",
            "parameters": parameters or {"ALPHA_BLOCK": {"tag": "A", "values": [32, 64, 128, 256], "default": 256,
                                                         "kernels": ["k_a"]}},
            "build": {"arch": ["sm_90"]}, "run": {"iterations": 5}, "profile": {"backend": "events"}}


def run_py_sweep(root: Path, space: dict, **options):
    """Run `space` (a py_space_dict) as root/<name>.yaml in-process with the debug executor, as if
    on GPU 0, without confirming or a report unless asked: (jobs root, results root, RunSummary).
    Needs make and an nvcc on PATH only for the preflight (nothing is compiled)."""
    from sweep.pipeline import driver as pipeline

    path = root / f"{space['name']}.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    options = {"confirm": False, "report": False, **options}
    old = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "PATH")}
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    if shutil.which("nvcc") is None:   # preflight asks for one; this target never calls it
        fake = root / "_bin"
        fake.mkdir(exist_ok=True)
        (fake / "nvcc").write_text("#!/bin/sh\nexit 1\n")
        (fake / "nvcc").chmod(0o755)
        os.environ["PATH"] = f"{fake}{os.pathsep}{old['PATH']}"
    try:
        summary = pipeline.run(path, pipeline.Options(executor="debug", jobs_root=root / "jobs",
                                                      results_root=root / "results", poll_s=0.05, **options))
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return root / "jobs", root / "results", summary


def dry_run_narrowed(example: Path, tmp_path: Path, values: dict[str, list], defaults: dict | None = None,
                     timeout: int = 600, **space_keys) -> tuple[subprocess.CompletedProcess, Path]:
    """`config_sweep.py run --dry-run --arch sm_90` (render and compile, no GPU) of an example's
    space.yaml with each macro's values narrowed to `values` (and `defaults`, `space_keys` set),
    jobs and results under tmp_path: the process, and the jobs folder."""
    data = yaml.safe_load((example / "space.yaml").read_text())
    data["target"]["dir"] = str(example)
    data.update(space_keys)
    for macro, vs in values.items():
        data["parameters"][macro]["values"] = vs
    for macro, default in (defaults or {}).items():
        data["parameters"][macro]["default"] = default
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    jobs = tmp_path / "jobs"
    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, str(root / "config_sweep.py"), "run", str(tmp_path / "space.yaml"), "--dry-run",
                        "--arch", "sm_90", "--jobs-dir", str(jobs), "--results-dir", str(tmp_path / "results")],
                       capture_output=True, text=True, timeout=timeout, cwd=root,
                       env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    return p, jobs
