"""examples/host_heavy, the "no NVTX ranges, host work dominates the run" program,
builds with real nvcc by the target contract and through the tool's dry run: a
legal tile builds, a tile whose HH_ROWS does not divide HH_TILE stops at its
static_assert, a tile of 128 is refused by ptxas for its shared memory (both
recorded as skipped), and HOST_HEAVY_UNSAFE lets the wrong-result tile build (its
own check finds it on a GPU). Running it needs a GPU."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from sweep.space import check, load_space, make_config
from tests.examples.conf_build import make_with_conf, sweeps_nvcc
from tests.conftest import dry_run_narrowed, needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "host_heavy"
pytestmark = needs_nvcc

UNSAFE = {"HH_TILE": 32, "HH_ROWS": 6, "HH_PAD": 0, "HOST_HEAVY_UNSAFE": 1}     # builds, computes wrong results
NOT_DIVIDING = {"HH_TILE": 32, "HH_ROWS": 6, "HH_PAD": 0, "HOST_HEAVY_UNSAFE": 0}
TOO_MUCH_SHARED = {"HH_TILE": 128, "HH_ROWS": 8, "HH_PAD": 0, "HOST_HEAVY_UNSAFE": 0}  # 64 KB


def test_the_space_file_loads_with_its_0_1_flags_and_58_legal_points():
    space = load_space(EXAMPLE / "space.yaml")
    assert space.target.source_dir == EXAMPLE and space.size() == (96, "4*6*2*2")
    assert space.target.verify == "profile" and space.profile.backend == "cupti"
    assert space.run.iterations == 1
    import itertools
    points = [dict(zip([p.macro for p in space.swept], v)) for v in itertools.product(*[p.values for p in space.swept])]
    legal = [p for p in points if check(space, make_config(space, p)) is None]
    assert len(legal) == 58
    # the unsafe flag only where it changes something; the build decides the rest
    assert check(space, make_config(space, UNSAFE)) is None
    assert check(space, make_config(space, NOT_DIVIDING)) is None and check(space, make_config(space, TOO_MUCH_SHARED)) is None
    assert "changes nothing" in check(space, make_config(space, {**UNSAFE, "HH_ROWS": 8}))
    assert "1024 threads" in check(space, make_config(space, {**TOO_MUCH_SHARED, "HH_ROWS": 16}))


@pytest.mark.slow
def test_a_dry_run_builds_the_legal_tile_and_skips_the_static_assert_and_the_ptxas_refusal(tmp_path):
    p, jobs = dry_run_narrowed(EXAMPLE, tmp_path, {"HH_TILE": [32, 128], "HH_ROWS": [6, 8], "HH_PAD": [0],
                                                    "HOST_HEAVY_UNSAFE": [0]}, defaults={"HH_PAD": 0})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "built 1, skipped 3" in p.stdout + p.stderr   # a dry run builds; it measures nothing
    folder = jobs / "host-heavy"
    assert (folder / "T32x8_P0_U0" / "build" / "host_heavy").is_file()
    results = {d.name: json.loads((d / "result.json").read_text()) for d in folder.iterdir() if (d / "result.json").is_file()}
    assert {t: r["status"] for t, r in results.items()} == {"T32x6_P0_U0": "skipped", "T128x6_P0_U0": "skipped",
                                                             "T128x8_P0_U0": "skipped"}
    assert results["T32x6_P0_U0"]["reason"] == ("static_assert: HH_TILE must be a multiple of HH_ROWS "
                                                 "(every thread copies as many rows of the tile)")
    assert results["T128x8_P0_U0"]["reason"].startswith("resource limit: shared memory per block 65536 bytes > 49152")


@pytest.mark.slow
def test_the_unsafe_tile_builds_through_the_sweeps_nvcc_with_its_macros(tmp_path):
    p = make_with_conf(EXAMPLE, tmp_path, UNSAFE, extra=(f"NVCC={sweeps_nvcc(tmp_path)}", "NVCCFLAGS=-O3"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "objcache: miss" in p.stderr + p.stdout
    exe = tmp_path / "build" / "host_heavy"
    assert exe.is_file() and not (EXAMPLE / "build").exists()
    if shutil.which("nm"):
        nm = subprocess.run(["nm", str(exe)], capture_output=True, text=True).stdout
        assert "_Z22transpose_tiled_kernelILi32ELi6ELi0EEviiPKfPf" in nm

