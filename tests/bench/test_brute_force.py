"""bench/brute_force.py, the brute force of examples/xgemm/space.yaml in one process: the sources
it generates follow the tool's own enumeration of the legal set and build with real nvcc, and a
run's log (a real excerpt, tests/data/h200/xgemm_brute) becomes a Kernel Tuner cache. Running the
program needs a GPU (tests/gpu/test_brute_force_gpu.py)."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest

from bench import brute_force
from sweep.plan.learned import legal_points
from sweep.space import load_space
from tests.conftest import needs_nvcc

EXCERPT = Path(__file__).resolve().parents[1] / "data" / "h200" / "xgemm_brute"
XGEMM_SPACE = Path(__file__).resolve().parents[2] / "examples" / "xgemm" / "space.yaml"
XGEMM = ["--space", str(XGEMM_SPACE)]
EXAMPLES = XGEMM_SPACE.parents[1]
# Every example with a brute_force.cuh beside its space file.
BRUTE_FORCED = sorted(p.parent.name for p in EXAMPLES.glob("*/brute_force.cuh"))
HARNESS_CHECK = Path(__file__).resolve().parent / "harness_check.cu"


def build_harness_check(folder: Path) -> Path:
    """tests/bench/harness_check.cu built against bench/brute_force_harness.cuh: its program."""
    program = folder / "harness_check"
    subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", f"-I{EXAMPLES.parent / 'bench'}", str(HARNESS_CHECK),
                    "-o", str(program)], check=True, capture_output=True, text=True)
    return program


def test_the_generated_units_list_the_legal_set_in_the_tools_order_and_the_registry_calls_them_in_turn(tmp_path):
    keys, points, values = brute_force.legal_set(load_space(XGEMM_SPACE))
    assert len(points) == 15_364 and points == legal_points(load_space(XGEMM_SPACE))
    units = brute_force.write_sources(tmp_path, keys, points[:5], chunk=2)
    assert [u.name for u in units] == ["chunk_0000.cu", "chunk_0001.cu", "chunk_0002.cu"]
    first = units[0].read_text()
    assert '{"16,16,16,8,8,8,8,1,1,0,0", &brute_force_one<16, 16, 16, 8, 8, 8, 8, 1, 1, 0, 0>}' in first
    registry = (tmp_path / "registry.cu").read_text()
    assert registry.index("brute_force_chunk_0(e)") < registry.index("brute_force_chunk_1(e)") \
        < registry.index("brute_force_chunk_2(e)")


@needs_nvcc
def test_a_build_of_the_first_points_compiles_and_links_the_harness(tmp_path, capsys):
    assert brute_force.main(["build", *XGEMM, "--build", str(tmp_path), "--jobs", "2", "--limit", "3", "--chunk", "2"]) == 0
    assert (tmp_path / "brute_force").is_file()
    built = json.loads((tmp_path / "build.json").read_text())
    assert built["configurations"] == 3 and built["units"] == 2 and built["compile_seconds"] >= 0
    assert "3 configurations in 2 units" in capsys.readouterr().out


@needs_nvcc
@pytest.mark.parametrize("example", BRUTE_FORCED)
def test_every_examples_harness_compiles_and_links_on_the_shared_one(tmp_path, example):
    """Each example's brute_force.cuh and brute_force_main.cu build against bench's harness (one
    configuration: its unit, the registry and the main)."""
    space = str(EXAMPLES / example / "space.yaml")
    assert brute_force.main(["build", "--space", space, "--build", str(tmp_path), "--jobs", "2", "--limit", "1"]) == 0
    assert (tmp_path / "brute_force").is_file()


@needs_nvcc
def test_the_harness_self_check_compiles(tmp_path):
    """tests/gpu/test_brute_force_gpu.py runs it; here it must at least build."""
    assert build_harness_check(tmp_path).is_file()


def test_a_logged_run_becomes_a_cache_of_each_configurations_median_time(tmp_path, capsys):
    out = tmp_path / "cache.json.gz"
    assert brute_force.main(["cache", *XGEMM, "--build", str(EXCERPT), "--log", str(EXCERPT / "run_excerpt.jsonl"),
                             str(out)]) == 0
    data = json.loads(gzip.open(out).read())
    lines = [json.loads(line) for line in (EXCERPT / "run_excerpt.jsonl").read_text().splitlines()[1:]]
    assert data["device_name"] == "NVIDIA H200" and data["kernel_name"] == "xgemm_kernel"
    assert data["problem_size"] == [2048, 2048, 2048] and data["objective"] == "time"
    assert list(data["cache"]) == [r["key"] for r in lines]
    first = data["cache"]["16,16,16,8,8,8,8,1,1,0,0"]
    assert first["time"] == sorted(lines[0]["times"])[3] and first["times"] == lines[0]["times"]
    assert first["compile_time"] == pytest.approx(4117 / 15364 * 1000)
    assert first["benchmark_time"] == pytest.approx(lines[0]["wall_s"] * 1000)
    assert "8 of 15364 configurations (8 measured, 0 failed)" in capsys.readouterr().out


def test_a_log_of_another_build_is_refused_naming_the_line(tmp_path):
    text = (EXCERPT / "run_excerpt.jsonl").read_text().replace('"key": "16,16,16,8,8,8,8,1,1,0,1"',
                                                               '"key": "32,16,16,8,8,8,8,1,1,0,1"')
    log = tmp_path / "run.jsonl"
    log.write_text(text)
    with pytest.raises(SystemExit, match="line 1 is 32,16,16,8,8,8,8,1,1,0,1, the space's point 1 is 16,16"):
        brute_force.main(["cache", *XGEMM, "--build", str(EXCERPT), "--log", str(log), str(tmp_path / "c.json")])


def test_a_torn_last_line_of_a_killed_run_is_dropped_and_the_rest_kept(tmp_path):
    log = tmp_path / "run.jsonl"
    log.write_text((EXCERPT / "run_excerpt.jsonl").read_text() + '{"i": 8, "key": "16,16,')
    rows = brute_force.logged(log)
    assert [r.get("i") for r in rows] == [None, 0, 1, 2, 3, 4, 5, 6, 7]


def test_a_resumed_run_cuts_a_torn_last_line_so_the_next_one_appended_is_kept(tmp_path):
    log = tmp_path / "run.jsonl"
    whole = (EXCERPT / "run_excerpt.jsonl").read_text()
    log.write_text(whole + '{"i": 8, "key": "16,16,')
    assert brute_force.resume_point(log) == 8
    assert log.read_text() == whole
    with log.open("a") as out:                  # what run() appends next
        out.write('{"i": 8, "key": "k", "wall_s": 0.01, "times": [1.0]}\n')
    assert [r.get("i") for r in brute_force.logged(log)][-2:] == [7, 8]
    assert brute_force.resume_point(tmp_path / "none.jsonl") == 0


def test_a_space_without_the_harness_beside_it_is_refused_naming_the_folder(tmp_path):
    (tmp_path / "space.yaml").write_text(XGEMM_SPACE.read_text().replace("dir: .", f"dir: {XGEMM_SPACE.parent}"))
    with pytest.raises(SystemExit, match=f"{tmp_path}: no brute_force.cuh beside the space file"):
        brute_force.legal_set(brute_force.load_space(tmp_path / "space.yaml"))


def test_the_cache_names_the_one_kernel_the_spaces_macros_govern():
    dedisp = XGEMM_SPACE.parents[1] / "dedisp" / "space.yaml"
    assert brute_force.kernel_name(brute_force.load_space(XGEMM_SPACE)) == "xgemm_kernel"
    assert brute_force.kernel_name(brute_force.load_space(dedisp)) == "dedisp_kernel"
    keys, points, _ = brute_force.legal_set(brute_force.load_space(dedisp))
    assert keys == ["DEDISP_BLOCK_X", "DEDISP_BLOCK_Y", "DEDISP_TILE_X", "DEDISP_TILE_Y", "DEDISP_STRIDE_X",
                    "DEDISP_STRIDE_Y"] and len(points) == 11_130
