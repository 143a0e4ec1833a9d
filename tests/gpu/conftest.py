"""GPU tests: marked `gpu`, skipped cleanly where no NVIDIA GPU answers (CI), run on the H100."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def example_space(example: Path, folder: Path, **changes) -> Path:
    """A copy of an example's space.yaml in `folder`, its target dir the example's and its top-level
    keys updated with `changes` (name=..., strategy=...): a sweep the test names apart."""
    import yaml

    space = yaml.safe_load((example / "space.yaml").read_text())
    space.update(changes)
    space["target"]["dir"] = str(example)
    path = folder / f"{space['name']}.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    return path


def gpu_available() -> bool:
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


@pytest.hookimpl(tryfirst=True)   # before xdist's own hook reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(getattr(item, "path", item.fspath))).resolve()
        if HERE in path.parents:
            item.add_marker(pytest.mark.gpu)
            # One xdist worker runs them all, one at a time: the GPU and its timings are not
            # shared between two tests, and the session's engine build is made once.
            item.add_marker(pytest.mark.xdist_group("gpu"))
            if not gpu_available():
                item.add_marker(pytest.mark.skip(reason="no NVIDIA GPU here (nvidia-smi -L fails)"))


@pytest.fixture(scope="session")
def engine_build(tmp_path_factory) -> Path:
    """The engine built with default launch sizes for this GPU (programs + kernel_check), in a fresh
    folder, or made up to date in SWEEP_TEST_ENGINE_BUILD where set (a device run that built the tree
    already: make rebuilds what its sources or flags changed)."""
    from sweep.node.build import detect_arch

    given = os.environ.get("SWEEP_TEST_ENGINE_BUILD")
    out = Path(given).resolve() if given else tmp_path_factory.mktemp("engine")
    p = subprocess.run(["make", "-C", str(ROOT / "kernels"), "-j8", f"BUILD_DIR={out}", f"ARCH={detect_arch()}",
                        "all", "check"], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def odd_model(tmp_path_factory):
    """The odd-shaped model (2 layers, 3 heads, n_embd 96) with transformers' reference outputs."""
    pytest.importorskip("transformers")
    from gpt2_engine import export as engine_export

    return engine_export.ensure_export(tmp_path_factory.mktemp("odd"), preset="odd", seed=0)


@pytest.fixture(scope="session")
def sweep_roots(tmp_path_factory):
    """One jobs/results root for the GPU sweeps, so they share the object cache and the model export."""
    root = tmp_path_factory.mktemp("sweeps")
    return root / "jobs", root / "results"


@pytest.fixture(scope="session")
def tiled_gemm(tmp_path_factory) -> tuple[Path, Path]:
    """(the CUPTI injection library, examples/tiled_gemm) built for this GPU."""
    from sweep.profile import cupti
    from tests.examples.conf_build import built

    out = tmp_path_factory.mktemp("tiled_gemm")
    return cupti.library(out / "cache"), built(ROOT / "examples" / "tiled_gemm", out) / "tiled_gemm"
