"""sweep/core/paths.py: where jobs/ and results/ go, in a checkout, installed, and installed editable."""

from __future__ import annotations

from pathlib import Path

from sweep.core import paths

CHECKOUT = Path("/home/me/cuda-launch-sweep")


def test_the_checkout_s_script_writes_into_the_checkout_from_any_folder():
    assert paths.work_root(Path("/scratch/me"), "python config_sweep.py", CHECKOUT) == CHECKOUT


def test_the_command_run_inside_the_checkout_writes_into_it():
    assert paths.work_root(CHECKOUT, "config-sweep", CHECKOUT) == CHECKOUT
    assert paths.work_root(CHECKOUT / "examples" / "tiled_gemm", "config-sweep", CHECKOUT) == CHECKOUT


def test_an_editable_install_run_from_a_project_folder_writes_there_not_into_the_checkout():
    project = Path("/home/me/my-kernels")
    assert paths.work_root(project, "config-sweep", CHECKOUT) == project
    assert paths.work_root(Path("/home/me/cuda-launch-sweep-old"), "config-sweep", CHECKOUT) != CHECKOUT


def test_an_installed_tool_writes_into_the_working_directory():
    assert paths.work_root(Path("/scratch/me"), "python config_sweep.py", None) == Path("/scratch/me")
