"""Shared fixtures: the CPU toy target (tests/data/toy_target) and sweeps over it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

DATA = Path(__file__).parent / "data"
TOY_TARGET = DATA / "toy_target"
H100 = DATA / "h100"


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
def dirs(tmp_path):
    """Fresh jobs/ and results/ folders."""
    return tmp_path / "jobs", tmp_path / "results"


@pytest.fixture
def fake_gpus(monkeypatch):
    """Pretend two GPUs are visible (the toy target never touches them)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")


def needs_nvcc():
    return pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


@pytest.fixture(scope="session")
def has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return os.system("nvidia-smi -L > /dev/null 2>&1") == 0


@pytest.fixture(scope="session")
def toy_sweep(tmp_path_factory):
    """One full toy grid sweep (debug executor): (space path, jobs root, results root, RunSummary)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    from sweep import pipeline

    root = tmp_path_factory.mktemp("toy_sweep")
    space = root / "toy.yaml"
    space.write_text(yaml.safe_dump(toy_space_dict(), sort_keys=False))
    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    try:
        summary = pipeline.run(space, pipeline.Options(executor="debug", jobs_root=root / "jobs",
                                                       results_root=root / "results", report=False, poll_s=0.05))
    finally:
        if old is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old
    return space, root / "jobs", root / "results", summary
