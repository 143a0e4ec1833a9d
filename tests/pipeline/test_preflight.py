"""What a run checks before it spends GPU time, and what it notices after: typos in
placeholders and architectures, make syntax, the environment, programs the build did
not make, a conf.cuh that had no effect."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from sweep.pipeline import driver as pipeline
from sweep.core.errors import SweepError
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"

pytestmark = needs_nvcc


def _dry(space: Path, dirs, **opts) -> pipeline.RunSummary:
    jobs, results = dirs
    return pipeline.run(space, pipeline.Options(executor="local", jobs_root=jobs, results_root=results, dry_run=True,
                                                arch=opts.pop("arch", "sm_90"), report=False, **opts))


def test_a_placeholder_typo_fails_the_dry_run_before_anything_is_rendered(write_space, dirs):
    space = write_space(target={"profile": ["{build}/toy_bench", "-n", "{iteration}"]})
    with pytest.raises(SweepError, match=r"uses \{iteration\}, which no job fills in; placeholders: .*iterations"):
        _dry(space, dirs)
    assert not (dirs[0] / "toy").exists()


def test_an_architecture_nvcc_does_not_know_is_refused_with_the_ones_it_does(write_space, dirs):
    with pytest.raises(SweepError, match=r"architecture 'sm90' is not one nvcc here compiles for; choose one of .*sm_90"):
        _dry(write_space(), dirs, arch="sm90")


@pytest.mark.parametrize("flag", ["$(shell touch /tmp/x)", "`touch /tmp/x`", "-DX=$HOME"])
def test_make_syntax_in_nvcc_flags_is_refused(write_space, dirs, flag):
    with pytest.raises(SweepError, match="would be expanded by make or the shell"):
        _dry(write_space(build={"nvcc_flags": ["-O2", flag]}), dirs)


def test_a_program_the_build_did_not_make_is_a_compile_failure_naming_it(write_space, dirs):
    space = write_space(target={"verify": ["{build}/toy_chek"]},
                        parameters={"ALPHA_BLOCK": {"tag": "A", "values": [64], "kernels": ["alpha_kernel"]},
                                    "BETA_X": {"tag": "B", "values": [32], "kernels": ["beta_kernel"]},
                                    "BETA_Y": {"tag": "B", "values": [4], "kernels": ["beta_kernel"]}})
    s = _dry(space, dirs)
    assert s.counts == {"compile_failed": 1}
    r = (dirs[0] / "toy" / "A64_B32x4" / "result.json").read_text()
    assert "the build made no program" in r and "toy_chek" in r


def test_an_exported_nvccflags_does_not_replace_the_space_flags(write_space, dirs, monkeypatch):
    monkeypatch.setenv("NVCCFLAGS", "-DTHIS_WOULD_BREAK=(")
    monkeypatch.setenv("NVCC_BIN", "/nonexistent/nvcc")
    space = write_space(parameters={"ALPHA_BLOCK": {"tag": "A", "values": [64], "kernels": ["alpha_kernel"]},
                                    "BETA_X": {"tag": "B", "values": [32], "kernels": ["beta_kernel"]},
                                    "BETA_Y": {"tag": "B", "values": [4], "kernels": ["beta_kernel"]}})
    s = _dry(space, dirs)
    assert s.counts == {"built": 1}
    log = (dirs[0] / "toy" / "A64_B32x4" / "build.log").read_text()
    assert "THIS_WOULD_BREAK" not in log and "/nonexistent" not in log


def test_a_conf_cuh_beside_the_sources_that_shadows_the_generated_one_is_flagged(tmp_path, dirs, fake_gpus):
    target = tmp_path / "shadowed"
    shutil.copytree(DATA / "toy_target", target)
    (target / "conf.cuh").write_text("#pragma once\n#define ALPHA_BLOCK 128\n#define BETA_X 32\n#define BETA_Y 4\n")
    mk = (target / "Makefile").read_text()
    (target / "Makefile").write_text(mk.replace("FLAGS     := -std=c++17 $(NVCCFLAGS)", "FLAGS     := -std=c++17 $(NVCCFLAGS) -I$(DIR)"))
    space = yaml.safe_load((DATA / "toy_space.yaml").read_text())
    space["target"]["dir"] = str(target)
    space["parameters"]["ALPHA_BLOCK"]["values"] = [64, 128]
    space["parameters"]["BETA_X"]["values"] = [32]
    space["parameters"]["BETA_Y"]["values"] = [4]
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(space))
    jobs, results = dirs
    s = pipeline.run(path, pipeline.Options(executor="debug", jobs_root=jobs, results_root=results, confirm=False,
                                            report=False))
    assert s.counts == {"ok": 2}
    assert any("conf.cuh had no effect: 2 configurations" in n for n in s.best.notes), s.best.notes
    assert "conf.cuh had no effect" in (results / "toy" / "best.json").read_text()


def test_the_same_sweep_unshadowed_has_no_such_note(toy_sweep):
    _, _, _, summary = toy_sweep
    assert not any("no effect" in n for n in summary.best.notes)
