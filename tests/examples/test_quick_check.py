"""examples/quick_check, the program bench/scaling.py sweeps: its space loads with 48 legal
points, and a dry run builds a legal configuration and the fast-tail one (its own check
finds that one on a GPU) while the static_assert and ptxas refuse theirs. Running it needs a GPU."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from sweep.space import check, load_space, make_config
from tests.conftest import dry_run_narrowed, needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "quick_check"


def test_the_space_file_loads_with_48_legal_points_of_80():
    space = load_space(EXAMPLE / "space.yaml")
    assert space.target.source_dir == EXAMPLE and space.size() == (80, "4*5*2*2")
    assert space.target.verify == "profile" and space.profile.backend == "cupti"
    points = [dict(zip([p.macro for p in space.swept], v)) for v in itertools.product(*[p.values for p in space.swept])]
    legal = [p for p in points if check(space, make_config(space, p)) is None]
    assert len(legal) == 48
    assert "fast tail" in check(space, make_config(space, {"QC_BLOCK": 256, "QC_ITEMS": 4, "QC_VEC": 4,
                                                           "QC_FAST_TAIL": 1}))


@pytest.mark.slow
@needs_nvcc
def test_a_dry_run_builds_the_legal_and_fast_tail_ones_and_skips_the_static_assert_and_the_ptxas_refusal(tmp_path):
    p, jobs = dry_run_narrowed(EXAMPLE, tmp_path, {"QC_BLOCK": [1024], "QC_ITEMS": [2, 3, 4], "QC_VEC": [4],
                                                    "QC_FAST_TAIL": [0, 1]}, defaults={"QC_BLOCK": 1024}, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "built 2, skipped 2" in p.stdout + p.stderr
    folder = jobs / "quick-check"
    assert (folder / "B1024_I2_V4_F0" / "build" / "quick_check").is_file()
    assert (folder / "B1024_I2_V4_F1" / "build" / "quick_check").is_file()
    results = {d.name: json.loads((d / "result.json").read_text()) for d in folder.iterdir() if (d / "result.json").is_file()}
    skipped = {t: r["reason"] for t, r in results.items() if r["status"] == "skipped"}
    assert skipped["B1024_I3_V4_F0"] == "static_assert: QC_ITEMS must be a power of two"
    assert skipped["B1024_I4_V4_F0"].startswith("resource limit: shared memory per block 65536 bytes > 49152")
