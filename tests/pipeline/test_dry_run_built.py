"""A dry run's configurations read as what they are: built (not pending), in status
and the report, each with its kernels' registers, spills and shared memory from the
compiler. CPU only: the job folders are rendered and given the built.json a dry run
writes (the real dry runs are in tests/pipeline/test_adopt.py and tests/examples, slow)."""

from __future__ import annotations

import json
from pathlib import Path

from sweep.core import atomic
from sweep.decide import collect
from sweep.node import resources
from sweep.pipeline import manage
from sweep.records import Manifest, Status, now

BUILD_LOG = Path(__file__).resolve().parents[1] / "data" / "adopt" / "stencil_build.log"


def dry_built_sweep(job_for, tmp_path: Path) -> Path:
    """Two rendered toy jobs, one built by a dry run (built.json with its kernels), one not built."""
    built = job_for(alpha=64)
    job_for(alpha=128)
    cfg = json.loads((built / "config.json").read_text())
    atomic.write_json(built / "built.json", {"config_hash": cfg["config_hash"], "at": now(), "seconds": 1.0,
                                              "build": {"kernels": resources.kernels(BUILD_LOG.read_text())}})
    sweep_dir = built.parent
    Manifest(sweep=sweep_dir.name, space=str(tmp_path / "toy.yaml"), strategy="grid", backend="events",
             executor="local", grid_size=2, grid_product="2", commit="abc", source_digest="d", created=now(),
             tags=tuple(sorted(d.name for d in sweep_dir.iterdir() if d.is_dir()))).save(sweep_dir)
    return sweep_dir


def test_a_dry_run_build_is_built_not_pending_with_its_kernels_resources(job_for, tmp_path):
    sweep_dir = dry_built_sweep(job_for, tmp_path)
    rows = collect.collect(sweep_dir).configs.set_index("tag")
    assert rows.loc["A64_B64x4", "status"] == Status.BUILT == "built"
    assert rows.loc["A128_B64x4", "status"] == "pending"
    assert "jacobi_kernel<32, 8, 1>: 32 registers, no spills, 1360 B shared" in rows.loc["A64_B64x4", "resources"]
    assert "spilly: 255 registers, 88 B spill stores / 92 B loads" in rows.loc["A64_B64x4", "resources"]


def test_status_lists_the_built_configurations_with_their_resources(job_for, tmp_path, capsys):
    sweep_dir = dry_built_sweep(job_for, tmp_path)
    s = manage.status(sweep_dir.name, sweep_dir.parent)
    assert s["counts"] == {"built": 1, "pending": 1}
    from sweep import cli

    assert cli.main(["status", sweep_dir.name, "--jobs-dir", str(sweep_dir.parent)]) == 0
    out = capsys.readouterr().out
    assert "A64_B64x4: built, not measured (a dry run, or an interrupted one), residual_sum_kernel<256>: 30 registers" in out


def test_built_is_neither_final_nor_a_failure():
    assert not Status.BUILT.final and not Status.BUILT.failed


def test_the_report_shows_the_built_configurations_and_their_kernels(job_for, tmp_path, fake_gpus):
    sweep_dir = dry_built_sweep(job_for, tmp_path)
    manage.recollect(sweep_dir.name, sweep_dir.parent, tmp_path / "results")
    md = (tmp_path / "results" / sweep_dir.name / "report.md").read_text()
    assert "1 built by a dry run (not measured)" in md
    assert "## Built by a dry run: each kernel as the compiler sized it" in md
    assert "| A64_B64x4 | residual_sum_kernel<256>: 30 registers" in md.replace("\\<", "<").replace("&lt;", "<")
    html = (tmp_path / "results" / sweep_dir.name / "report.html").read_text()
    assert 'id="built"' in html and "jacobi_kernel&lt;32, 8, 1&gt;: 32 registers" in html


def test_clean_removes_a_cmake_targets_configured_trees_and_keeps_the_build_records(job_for, tmp_path):
    sweep_dir = dry_built_sweep(job_for, tmp_path)
    tree = sweep_dir / "_cmake" / "0123456789abcdef"
    tree.mkdir(parents=True)
    (tree / "CMakeCache.txt").write_text("x\n")
    removed = manage.clean(sweep_dir.name, sweep_dir.parent, tmp_path / "results")
    assert sweep_dir / "_cmake" in removed and not (sweep_dir / "_cmake").exists()
    assert (sweep_dir / "A64_B64x4" / "built.json").is_file() and (sweep_dir / "sweep.json").is_file()
