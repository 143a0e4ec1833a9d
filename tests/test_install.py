"""`pip install .` (not editable) into a fresh virtual environment, then the CLI from
another directory: its help, and a dry run of a custom target (templates found as
package data, jobs importable whatever the working directory)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}   # nothing may point back at the checkout

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


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


def test_installed_cli_helps_and_dry_runs_a_custom_target_from_another_directory(venv, tmp_path):
    cli = venv / "bin" / "config-sweep"
    h = subprocess.run([str(cli), "--help"], capture_output=True, text=True, cwd=tmp_path, env=CLEAN_ENV)
    assert h.returncode == 0 and "exit codes" in h.stdout
    target = tmp_path / "mytarget"
    shutil.copytree(DATA / "toy_target", target)
    space = yaml.safe_load((DATA / "toy_space.yaml").read_text())
    space["target"]["dir"] = "mytarget"
    space["parameters"]["ALPHA_BLOCK"]["values"] = [64, 128]
    space["parameters"]["BETA_X"]["values"] = [32]
    space["parameters"]["BETA_Y"]["values"] = [4]
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(space, sort_keys=False))
    r = subprocess.run([str(cli), "run", "toy.yaml", "--dry-run", "--arch", "sm_90"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=600, env=CLEAN_ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    jobs = sorted((tmp_path / "jobs" / "toy").glob("A*"))
    assert len(jobs) == 2 and all((j / "build" / "toy_bench").is_file() for j in jobs)
    # a job folder reruns by hand, from anywhere, with the installed framework
    again = subprocess.run([str(venv / "bin" / "python"), "-m", "sweep.node.job", str(jobs[0]), "--stages", "build"],
                           capture_output=True, text=True, cwd="/", env=CLEAN_ENV)
    assert again.returncode == 0, again.stdout + again.stderr
