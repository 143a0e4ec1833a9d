"""examples/xgemm (CLBlast's xgemm in CUDA, the shape of the community's GEMM space): its space
file counts 15,364 legal points with the tool's own enumeration, the kernel builds with real nvcc
from conf.cuh's macros, an illegal configuration stops at the static_assert that names its rule
(a sweep records it as skipped), and bench/data's brute force on an H200 measured exactly the
legal set. Running it needs a GPU (tests/gpu/test_xgemm_gpu.py)."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest

from tests.examples.conf_build import kernel_symbols, make_with_conf, refused_at_static_assert
from sweep.plan.learned import legal_points
from sweep.space import check, default_config, load_space, make_config
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "xgemm"

OPTIMUM_H200 = {"XGEMM_MWG": 128, "XGEMM_NWG": 128, "XGEMM_KWG": 32, "XGEMM_MDIMC": 16, "XGEMM_NDIMC": 16,
                "XGEMM_MDIMA": 8, "XGEMM_NDIMB": 32, "XGEMM_VWM": 4, "XGEMM_VWN": 2, "XGEMM_SA": 1, "XGEMM_SB": 1}


def make(tmp: Path, macros: dict[str, int] | None = None) -> subprocess.CompletedProcess:
    return make_with_conf(EXAMPLE, tmp, macros)


def test_the_space_counts_15364_legal_points_and_its_default_is_one():
    space = load_space(EXAMPLE / "space.yaml")
    assert space.size() == (165_888, "4*4*2*3*3*3*3*4*4*2*2") and space.strategy.name == "learning"
    points = legal_points(space)
    assert len(points) == 15_364 and OPTIMUM_H200 in points
    assert check(space, default_config(space)) is None
    unstaged = {**OPTIMUM_H200, "XGEMM_SA": 0}      # MDIMA 8 != MDIMC 16 where A is not staged
    assert "not a knob" in check(space, make_config(space, unstaged))


@needs_nvcc
def test_the_default_configuration_builds_for_sm_90_from_the_template(tmp_path):
    p = make(tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    if (symbols := kernel_symbols(tmp_path / "build" / "xgemm")) is not None:
        assert "_Z12xgemm_kernelILi64ELi64ELi32ELi16ELi16ELi16ELi16ELi2ELi2ELi1ELi1EEviiiPKfS1_Pf" in symbols


@needs_nvcc
@pytest.mark.parametrize("macros, rule", [
    ({"XGEMM_MWG": 16, "XGEMM_MDIMC": 16, "XGEMM_MDIMA": 16, "XGEMM_VWM": 2},
     "XGEMM_MWG must be a multiple of XGEMM_MDIMC*XGEMM_VWM (whole vectors per thread along m)"),
    ({"XGEMM_KWG": 16, "XGEMM_MDIMC": 32, "XGEMM_NDIMC": 32, "XGEMM_MDIMA": 32, "XGEMM_NDIMB": 32,
      "XGEMM_MWG": 128, "XGEMM_NWG": 128, "XGEMM_VWM": 4, "XGEMM_VWN": 4},
     "XGEMM_KWG must be a multiple of XGEMM_MDIMC*XGEMM_NDIMC/XGEMM_MDIMA (the threads staging A along k)"),
], ids=["vectors-along-m", "staging-depth"])
def test_an_illegal_configuration_stops_at_the_static_assert_naming_its_rule(tmp_path, macros, rule):
    space = load_space(EXAMPLE / "space.yaml")
    assert check(space, make_config(space, {**default_config(space).as_dict(), **macros})) is not None
    assert refused_at_static_assert(EXAMPLE, tmp_path, macros) == f"static_assert: {rule}"


def test_the_committed_brute_force_measured_exactly_the_legal_set():
    """bench/data/xgemm_H200.json.gz (bench/brute_force.py on an H200): every point the tool calls
    legal checked and timed, nothing else, none failed."""
    space = load_space(EXAMPLE / "space.yaml")
    cache = json.loads(gzip.open(ROOT / "bench" / "data" / "xgemm_H200.json.gz").read())
    names = [p.macro for p in space.swept]
    assert cache["tune_params_keys"] == names and cache["device_name"] == "NVIDIA H200"
    recorded = {key for key in cache["cache"]}
    assert recorded == {",".join(str(p[n]) for n in names) for p in legal_points(space)}
    times = {key: e["time"] for key, e in cache["cache"].items()}
    assert all(isinstance(t, float) and t > 0 for t in times.values())
    assert min(times, key=times.get) == ",".join(str(OPTIMUM_H200[n]) for n in names)
