"""`pip install .` (not editable) into a fresh virtual environment, then the CLI from
an empty folder outside the checkout, as a new user runs it: its help, the default
command's dry run (the engine and its space shipped as package data), a custom
target's dry run, and status, best, report, choose and clean on a sweep run there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import json
import re

import pytest
import yaml
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}   # nothing may point back at the checkout

pytestmark = needs_nvcc


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv with the project installed from a copy of the checkout (no editable link back)."""
    root = tmp_path_factory.mktemp("install")
    src = root / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "jobs", "results", "build", "*.egg-info",
                                                             "__pycache__", ".pytest_cache", "tests", ".devtools",
                                                             ".whl"))
    env_dir = root / "venv"
    # system site packages give it the dependencies without a download; the project itself is new
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(src)],
                       capture_output=True, text=True, env=CLEAN_ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    shutil.rmtree(src)  # nothing may lean on the source tree
    return env_dir


def test_installed_package_is_not_the_checkout_and_carries_its_templates(venv, tmp_path):
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import sweep, sweep.core.paths as p; print(sweep.__file__); print(p.TEMPLATES); "
                        "print(sorted(x.name for x in p.TEMPLATES.iterdir()))"],
                       capture_output=True, text=True, cwd=tmp_path, env=CLEAN_ENV)
    assert r.returncode == 0, r.stderr
    file, templates, names = r.stdout.splitlines()
    assert str(venv) in file and str(ROOT) not in file
    assert templates.startswith(str(venv)) and "conf.cuh.j2" in names and "job.sbatch.j2" in names


def test_installed_package_builds_the_cupti_library_from_its_own_source(venv, tmp_path):
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import sys; from pathlib import Path; from sweep.profile import cupti; print(cupti.SOURCE); "
                        "print(cupti.library(Path(sys.argv[1])))", str(tmp_path / "cache")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    source, lib = r.stdout.splitlines()
    assert source.startswith(str(venv)) and Path(source).is_file() and Path(lib).is_file()


def toy_in(folder: Path) -> Path:
    """A copy of the CPU toy target in folder/mytarget and a two-configuration space over it in
    folder/toy.yaml, as a user's own program and space file; returns the target's folder."""
    target = folder / "mytarget"
    shutil.copytree(DATA / "toy_target", target)
    space = yaml.safe_load((DATA / "toy_space.yaml").read_text())
    space["target"]["dir"] = "mytarget"
    space["parameters"]["ALPHA_BLOCK"]["values"] = [64, 128]
    space["parameters"]["BETA_X"]["values"] = [32]
    space["parameters"]["BETA_Y"]["values"] = [4]
    (folder / "toy.yaml").write_text(yaml.safe_dump(space, sort_keys=False))
    return target


def test_installed_cli_helps_and_dry_runs_a_custom_target_from_another_directory(venv, tmp_path):
    cli = venv / "bin" / "config-sweep"
    h = subprocess.run([str(cli), "--help"], capture_output=True, text=True, cwd=tmp_path, env=CLEAN_ENV)
    assert h.returncode == 0 and "exit codes" in h.stdout
    toy_in(tmp_path)
    r = subprocess.run([str(cli), "run", "toy.yaml", "--dry-run", "--arch", "sm_90"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=600, env=CLEAN_ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    jobs = sorted((tmp_path / "jobs" / "toy").glob("A*"))
    assert len(jobs) == 2 and all((j / "build" / "toy_bench").is_file() for j in jobs)
    # a job folder reruns by hand, from anywhere, with the installed framework
    again = subprocess.run([str(venv / "bin" / "python"), "-m", "sweep.node.job", str(jobs[0]), "--stages", "build"],
                           capture_output=True, text=True, cwd="/", env=CLEAN_ENV)
    assert again.returncode == 0, again.stdout + again.stderr


def test_installed_default_command_dry_runs_the_shipped_engine_space_from_an_empty_folder(venv, tmp_path):
    """`config-sweep --dry-run --arch sm_90` with nothing else: spaces/seed.yaml and the engine's
    kernels come from the installed package, every tuple compiles with nvcc, through the cache."""
    env = {**CLEAN_ENV, "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([str(venv / "bin" / "config-sweep"), "--dry-run", "--arch", "sm_90"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=1500, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    jobs = tmp_path / "jobs" / "seed"
    built = sorted(d.name for d in jobs.iterdir() if (d / "build" / "gpt2_forward").is_file())
    assert built == sorted(["R4_G4_E3x3x3_L4_P4_F16", "R8_G8_E4x4x4_L8_P8_F16", "R16_G16_E5x5x5_L16_P16_F16",
                            "R32_G32_E6x6x6_L32_P32_F16", "R64_G64_E7x7x7_L64_P64_F16", "R128_G128_E8x8x8_L128_P128_F16",
                            "R256_G256_E9x9x9_L256_P256_F16", "R512_G512_E10x10x10_L512_P512_F16",
                            "R1024_G1024_E10x10x10_L1024_P1024_F16"])
    conf = (jobs / "R128_G128_E8x8x8_L128_P128_F16" / "conf.cuh").read_text()
    assert "#define RESIDUAL_BLOCK_SIZE 128" in conf and "#define ENCODER_BLOCK_Z 8" in conf
    assert "config-sweep run" in conf and str(venv) in conf     # the command and the installed space it came from
    # the object cache: after the first tuple, only the five swept families recompile
    later = json.loads((jobs / "R128_G128_E8x8x8_L128_P128_F16" / "built.json").read_text())["build"]
    assert len(later["compiled"]) <= 5 < len(later["cached"])
    assert "usage: config-sweep" not in r.stderr


def test_installed_tool_loads_every_shipped_space_by_its_checkout_path(venv, tmp_path):
    names = sorted(p.relative_to(ROOT).as_posix() for p in [*(ROOT / "spaces").glob("*.yaml"),
                                                           *(ROOT / "examples").glob("*/space*.yaml")])
    code = ("import sys; from pathlib import Path; from sweep.core import paths; from sweep.space import target\n"
            "for n in sys.argv[1:]:\n"
            "    p = paths.shipped_file(Path(n)); s = target.load(p); print(n, s.name, p)\n")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", code, *names], capture_output=True, text=True,
                       cwd=tmp_path, env=CLEAN_ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert len(lines) == len(names) and all(str(venv) in line for line in lines)


def test_installed_examples_include_only_shipped_files_and_build_there(venv, tmp_path):
    """Every `#include "..."` of a shipped example resolves in its own installed folder, in the
    examples' shared `common` folder or in a folder its Makefile puts on the include path
    (gemm_stencil's SOURCE_DIRS: two other examples' kernels; conf.cuh is the one each job
    renders), and an installed example's Makefile (which includes ../common/program.mk) builds
    it; the checkout-only brute force, whose harness lives under bench/, is not shipped."""
    from sweep.space.init import header_dirs

    r = subprocess.run([str(venv / "bin" / "python"), "-c", "from sweep.core import paths; print(paths.EXAMPLES)"],
                       capture_output=True, text=True, cwd=tmp_path, env=CLEAN_ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    examples = Path(r.stdout.strip())
    assert str(venv) in str(examples)
    sources = [p for p in examples.glob("*/*") if p.suffix in (".cu", ".cuh", ".h")]
    assert {p.parent.name for p in sources} >= {"xgemm", "dedisp", "pnpoly", "tiled_gemm", "stencil_cmake", "common"}
    missing = [f"{p.parent.name}/{p.name}: {name}" for p in sources
               for name in re.findall(r'^\s*#include\s+"([^"]+)"', p.read_text(), re.M)
               if name != "conf.cuh" and not any((d / name).exists() for d in [p.parent, *header_dirs(p.parent)])]
    assert missing == []
    assert not list(examples.glob("*/brute_force*"))
    for example in ("quick_check", "gemm_stencil"):
        build = tmp_path / f"{example}_build"
        made = subprocess.run(["make", "-C", str(examples / example), f"BUILD_DIR={build}", "ARCH=sm_90"],
                              capture_output=True, text=True, timeout=600, env=CLEAN_ENV)
        assert made.returncode == 0, (made.stdout + made.stderr)[-3000:]
        assert (build / example).is_file()


def test_installed_tool_runs_status_best_report_and_clean_on_a_sweep_in_an_empty_folder(venv, tmp_path):
    cli = str(venv / "bin" / "config-sweep")
    target = toy_in(tmp_path)
    env = {**CLEAN_ENV, "CUDA_VISIBLE_DEVICES": "0"}      # the toy target runs on the CPU, as if on GPU 0

    def cli_run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([cli, *args], capture_output=True, text=True, cwd=tmp_path, timeout=600, env=env)

    r = cli_run("run", "toy.yaml", "--executor", "debug", "--no-confirm")
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "best launch sizes per kernel" in r.stdout
    st = cli_run("status")
    assert st.returncode == 0 and st.stdout.startswith("toy: ok 2"), st.stdout + st.stderr
    best = cli_run("best", "toy")
    assert best.returncode == 0 and "#define ALPHA_BLOCK " in best.stdout, best.stdout + best.stderr
    rep = cli_run("report", "toy")
    assert rep.returncode == 0 and (tmp_path / "results" / "toy" / "report.html").is_file(), rep.stdout + rep.stderr
    # which strategy would have done: the tool's own sweep replayed, no GPU
    ch = cli_run("choose", "toy.yaml", "--from", "results/toy", "--strategies", "grid,learning", "--seeds", "2",
                 "--budgets", "1,2", "--start-from", "results/toy")
    assert ch.returncode == 0 and re.search(r"^learning\s+2\s", ch.stdout, re.M), ch.stdout + ch.stderr
    assert re.search(r"^learning\+start\s+2\s+1\.000", ch.stdout, re.M), ch.stdout   # its first: the best recorded
    cl = cli_run("clean", "toy")
    assert cl.returncode == 0, cl.stdout + cl.stderr
    assert not any((tmp_path / "jobs" / "toy").glob("*/build")) and (tmp_path / "results" / "toy" / "best.json").is_file()
    assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in (DATA / "toy_target").iterdir())
