"""CUPTI backend: the injection library built with real nvcc, and the parser fed
real captures of examples/tiled_gemm on an H100 (tests/data/h100/cupti; its
README says how each was made). Variants of a capture (cut, damaged, edited)
are made in tmp_path from a real one, so each test states what it changes.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sweep.core.errors import SweepError
from sweep.profile import cupti
from sweep.profile.cupti_file import FORMAT
from sweep.profile.ranges import Range, attribute
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "h100" / "cupti"

TILED = "gemm_tiled_kernel"
DEFAULT_SHAPES = {((4, 4, 1), (256, 1, 1)), ((8, 8, 1), (256, 1, 1)), ((16, 16, 1), (256, 1, 1))}
TILES_B_SHAPES = {((4, 2, 1), (128, 1, 1)), ((8, 4, 1), (128, 1, 1)), ((16, 8, 1), (128, 1, 1))}


@dataclass(frozen=True)
class Expect:
    complete: bool
    signal: int | None
    iterations: int
    launches: int               # kernel records in the file
    counted: int                # launches in timed iterations
    unfinished: int = 0
    partial: int = 0
    unclosed: int = 0


# Every run checks 4 shapes with both kernels (8 launches) and warms up 2
# iterations (6 launches) before its timed iterations of 3 launches.
CAPTURES = {
    "gemm_shapes.txt": Expect(True, None, 1, 74, 74),
    "gemm_nvtx.txt": Expect(True, None, 20, 74, 60),
    "gemm_tiles_b_nvtx.txt": Expect(True, None, 10, 44, 30),
    "gemm_abort.txt": Expect(False, 6, 7, 38, 21, unclosed=1),
    "gemm_segv.txt": Expect(False, 11, 7, 38, 21, unclosed=1),
    "gemm_sigterm.txt": Expect(False, 15, 85, 269, 255),
    "gemm_abort_nodrain.txt": Expect(False, 6, 2, 38, 6, unfinished=17, partial=5, unclosed=1),
}
NVTX_CAPTURES = {
    "gemm_nvtx.txt": DEFAULT_SHAPES, "gemm_tiles_b_nvtx.txt": TILES_B_SHAPES, "gemm_abort.txt": DEFAULT_SHAPES,
    "gemm_segv.txt": DEFAULT_SHAPES, "gemm_sigterm.txt": DEFAULT_SHAPES, "gemm_abort_nodrain.txt": DEFAULT_SHAPES,
}


def shapes(capture: cupti.ParsedCapture) -> dict:
    return {(m.kernel, m.grid, m.block): m for m in capture.measurements}


def edited(tmp_path: Path, name: str, edit) -> Path:
    """A copy of a real capture with its lines passed through `edit(lines) -> lines`."""
    lines = (DATA / name).read_text().splitlines(keepends=True)
    path = tmp_path / name
    path.write_text("".join(edit(lines)))
    return path


# --- the parser, on real captures ---------------------------------------------

@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_parse_reads_each_real_capture_as_it_was_recorded(name):
    want = CAPTURES[name]
    got = cupti.parse(DATA / name)
    assert (got.complete, got.signal, got.iterations, got.launches, got.counted) == (
        want.complete, want.signal, want.iterations, want.launches, want.counted)
    assert (got.unfinished, got.partial_iterations, got.unclosed_ranges, got.dropped) == (
        want.unfinished, want.partial, want.unclosed, 0)
    assert got.truncated is not want.complete
    assert sum(m.instances for m in got.measurements) == want.counted


@pytest.mark.parametrize("name", sorted(NVTX_CAPTURES))
def test_nvtx_iterations_time_one_kernel_at_three_launch_shapes_and_leave_checks_and_warm_up_out(name):
    got = cupti.parse(DATA / name)
    assert set(shapes(got)) == {(TILED, grid, block) for grid, block in NVTX_CAPTURES[name]}
    for m in got.measurements:
        assert m.calls == 1
        assert len(m.iter_total_ns) == got.iterations
        assert all(t > 0 for t in m.iter_total_ns)  # every shape ran in every iteration kept


def test_without_nvtx_ranges_every_launch_counts_in_one_iteration():
    got = shapes(cupti.parse(DATA / "gemm_shapes.txt"))
    assert set(got) == {(TILED, g, b) for g, b in DEFAULT_SHAPES} | {(TILED, (3, 2, 1), (256, 1, 1))} | {
        ("gemm_reference_kernel", grid, (16, 16, 1)) for grid in ((9, 7, 1), (16, 16, 1), (32, 32, 1), (64, 64, 1))}
    big = got[(TILED, (16, 16, 1), (256, 1, 1))]
    assert big.calls == 23                      # 1 check + 2 warm-up + 20 timed
    assert len(big.iter_total_ns) == 1 and big.total_std_ns == 0.0
    assert big.iter_total_ns[0] == pytest.approx(big.mean_ns * 23)


def test_timed_iterations_hold_exactly_the_launches_issued_inside_them():
    """Launches are numbered in issue order: 1-8 checks, 9-14 warm-up, 15-74 the 20 timed iterations."""
    path = DATA / "gemm_nvtx.txt"
    durations = {int(f[1]): int(f[3]) - int(f[2]) for f in (l.split("\t") for l in path.read_text().splitlines())
                 if f[0] == "kern"}
    got = cupti.parse(path)
    assert sum(sum(m.iter_total_ns) for m in got.measurements) == sum(durations[c] for c in range(15, 75))
    first = [sum(m.iter_total_ns[0] for m in got.measurements)]
    assert first == [durations[15] + durations[16] + durations[17]]


def test_per_launch_times_are_nanoseconds_a_little_under_the_programs_own_event_timing():
    """The same run printed an event-to-event median of 0.1167 ms for 1024 (README); events also time the launch gap."""
    big = shapes(cupti.parse(DATA / "gemm_nvtx.txt"))[(TILED, (16, 16, 1), (256, 1, 1))]
    assert 100_000 < big.median_ns < 116_700
    assert big.min_ns <= big.median_ns <= big.max_ns


@pytest.mark.parametrize("name, registers, static_smem, launches", [
    ("gemm_nvtx.txt", 64, 8192, 23),            # default tiles: 1 check + 2 warm-up + 20 timed per shape
    ("gemm_tiles_b_nvtx.txt", 166, 6144, 13),   # BM=128 BN=64 BK=8 TM=TN=8
])
def test_resources_give_registers_and_shared_memory_per_launch_shape(name, registers, static_smem, launches):
    got = cupti.parse(DATA / name)
    for m in got.measurements:
        (r,) = got.resources_of(m)
        assert (r.registers_per_thread, r.static_shared_bytes, r.dynamic_shared_bytes, r.local_bytes_per_thread) == (
            registers, static_smem, 0, 0)
        assert r.shared_bytes == static_smem and r.launches == launches
    reference = [r for r in got.resources if r.kernel == "gemm_reference_kernel"]
    assert len(reference) == 4 and all(r.static_shared_bytes == 0 for r in reference)


def test_kernel_names_are_demangled_with_template_arguments_and_shortened_like_the_other_backends():
    got = cupti.parse(DATA / "gemm_tiles_b_nvtx.txt")
    m = got.measurements[0]
    assert m.kernel == TILED
    assert m.kernel_full == ("void gemm_tiled_kernel<128, 64, 8, 8, 8>"
                             "(int, int, int, float const*, float const*, float*)")
    assert got.resources_of(m)[0].mangled == "_Z17gemm_tiled_kernelILi128ELi64ELi8ELi8ELi8EEviiiPKfS1_Pf"


@pytest.mark.parametrize("name, signal", [("gemm_abort.txt", 6), ("gemm_segv.txt", 11)])
def test_a_crash_keeps_the_closed_iterations_and_leaves_out_the_one_it_died_in(name, signal):
    got = cupti.parse(DATA / name)
    assert got.iterations == 7 and got.unclosed_ranges == 1     # died inside iteration 7 (0-based)
    assert got.summary().startswith(f"TRUNCATED by signal {signal}: 21 of 38 launches in 7 timed iterations")


def test_an_iteration_with_a_launch_still_queued_at_the_crash_is_left_out_whole():
    """The first library flushed without waiting: iterations 2-6 closed on the CPU with launches the GPU had not run."""
    got = cupti.parse(DATA / "gemm_abort_nodrain.txt")
    assert (got.unfinished, got.partial_iterations, got.iterations) == (17, 5, 2)
    assert "17 unfinished launches, 5 iterations left out as unfinished" in got.summary()


def test_a_sigterm_from_outside_keeps_every_iteration_finished_before_it():
    got = cupti.parse(DATA / "gemm_sigterm.txt")
    assert got.signal == 15 and got.iterations == 85 and got.unclosed_ranges == 0


def test_a_custom_range_name_ignores_the_iteration_ranges_like_nsys():
    got = cupti.parse(DATA / "gemm_nvtx.txt", iteration_range="step")
    assert got.iterations == 1 and got.counted == 74


# --- damaged and edited captures ------------------------------------------------

def test_a_torn_last_line_is_dropped_and_everything_before_it_read(tmp_path):
    data = (DATA / "gemm_nvtx.txt").read_bytes()
    cut = data.rindex(b"\nkern\t") + 20             # inside the last kernel record
    path = tmp_path / "torn.txt"
    path.write_bytes(data[:cut])
    got = cupti.parse(path)
    assert not got.complete and got.signal is None
    assert got.launches == 73 and got.iterations == 19  # the last iteration's range end came later: never read
    assert got.summary().startswith("TRUNCATED (no end line")


def test_a_capture_cut_before_any_kernel_record_says_the_program_stopped_before_a_flush(tmp_path):
    path = edited(tmp_path, "gemm_abort.txt",
                  lambda ls: [l for l in ls if l.split("\t")[0] in ("sweep-cupti/1", "api")])
    with pytest.raises(SweepError, match="stopped before CUPTI flushed any kernel record"):
        cupti.parse(path)


@pytest.mark.parametrize("content, message", [
    (None, "does not exist: the program never initialised CUDA"),
    (b"", "is empty"),
    (b"Time (%),Total Time (ns),Instances\n", "is not a capture of the CUPTI injection library"),
    (b"sweep-cupti/3\tpid=1\n", "is in format 'sweep-cupti/3'.*rebuild the library"),
])
def test_files_that_are_not_captures_are_refused_with_the_fix(tmp_path, content, message):
    path = tmp_path / "capture.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SweepError, match=message):
        cupti.parse(path)


def test_a_damaged_line_inside_the_file_names_its_line_number(tmp_path):
    path = edited(tmp_path, "gemm_nvtx.txt", lambda ls: ls[:40] + ["kern\t1\tnot-a-number\n"] + ls[40:])
    with pytest.raises(SweepError, match=r"line 41: not a valid 'kern' record"):
        cupti.parse(path)


def test_ranges_that_never_closed_mean_the_program_stopped_in_its_first_iteration(tmp_path):
    path = edited(tmp_path, "gemm_nvtx.txt", lambda ls: [l for l in ls if not l.startswith("mark\tE")])
    with pytest.raises(SweepError, match="none of the 20 NVTX 'iteration' ranges was closed"):
        cupti.parse(path)


def test_without_launch_calls_ranges_cannot_place_launches(tmp_path):
    path = edited(tmp_path, "gemm_nvtx.txt", lambda ls: [l for l in ls if not l.startswith("call\t")])
    with pytest.raises(SweepError, match="no launch calls were traced"):
        cupti.parse(path)


def test_a_range_end_whose_id_opened_nothing_closes_the_innermost_open_range_of_its_thread(tmp_path):
    def renumber(lines):
        return [l.replace("mark\tE\t", "mark\tE\t1000", 1) if l.startswith("mark\tE") else l for l in lines]

    original = cupti.parse(DATA / "gemm_nvtx.txt")
    assert cupti.parse(edited(tmp_path, "gemm_nvtx.txt", renumber)).measurements == original.measurements


def test_the_library_source_writes_the_format_the_reader_reads():
    source = cupti.SOURCE.read_text()
    assert f'"{FORMAT}"' in source and cupti.ENV_OUT in source
    for tag in ("clock", "name", "kern", "call", "mark", "api", "drop", "signal", "end"):
        assert f"//   {tag} " in source or f"//   {tag}\t" in source, f"record {tag!r} is not documented"


# --- attribution to ranges ---------------------------------------------------------

def test_a_launch_belongs_to_the_innermost_range_of_its_own_thread():
    ranges = [Range(0, 100, 1), Range(10, 20, 1), Range(0, 100, 2)]
    where, n = attribute([(15, 1), (50, 1), (15, 3), (None, 1), (150, 1)], ranges)
    assert where == [1, 0, None, None, None] and n == 2


def test_a_range_without_launches_is_not_an_iteration():
    where, n = attribute([(5, 7), (25, 7)], [Range(0, 10, 7), Range(10, 20, 7), Range(20, 30, 7)])
    assert where == [0, 1] and n == 2


# --- building the library --------------------------------------------------------

def fake_nvcc(tmp_path: Path, top: Path) -> str:
    """An nvcc that reports CUDA 13.0 and a toolkit at `top`, for the not-found paths."""
    script = tmp_path / "nvcc"
    script.write_text("#!/bin/sh\ncase \"$*\" in\n"
                      "  *--version*) echo 'Cuda compilation tools, release 13.0, V13.0.88';;\n"
                      f"  *--dryrun*) echo '#$ TOP={top}' >&2;;\nesac\n")
    script.chmod(0o755)
    return str(script)


def loads_with_entry_point(lib: Path) -> bool:
    """dlopen in a fresh process (libcupti loads too) and find InitializeInjection."""
    code = "import ctypes, sys; ctypes.CDLL(sys.argv[1]).InitializeInjection"
    return subprocess.run([sys.executable, "-c", code, str(lib)], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    return cupti.library(tmp_path_factory.mktemp("cupti_cache"))


@pytest.mark.slow
def test_library_builds_a_loadable_injection_library_with_nvcc(built):
    assert built.read_bytes()[:4] == b"\x7fELF"
    assert loads_with_entry_point(built)
    facts = json.loads(built.with_suffix(".json").read_text())
    assert Path(facts["libcupti"]).is_file() and Path(facts["cupti_lib_dir"]) == Path(facts["libcupti"]).parent
    assert built.name.startswith(f"libsweep_cupti-cuda{facts['cuda_version']}-{platform.machine()}-")


@pytest.mark.slow
def test_library_is_cached_so_a_second_call_does_not_rebuild(built, monkeypatch):
    before = built.stat()
    monkeypatch.setattr(cupti.subprocess, "run", _no_builds(cupti.subprocess.run))
    assert cupti.library(built.parent) == built
    assert (built.stat().st_ino, built.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not [p for p in built.parent.iterdir() if p.name.endswith(".so") and p.name.startswith(".")]


def _no_builds(run):
    def guarded(cmd, *args, **kwargs):
        assert "-shared" not in cmd, "library() rebuilt a cached library"
        return run(cmd, *args, **kwargs)
    return guarded


@pytest.mark.slow
def test_a_changed_source_builds_a_new_library(built, tmp_path, monkeypatch):
    changed = tmp_path / "cupti_inject.cpp"
    changed.write_text(cupti.SOURCE.read_text() + "// changed\n")
    monkeypatch.setattr(cupti, "SOURCE", changed)
    lib = cupti.library(built.parent)
    assert lib != built and lib.parent == built.parent and built.is_file()
    assert loads_with_entry_point(lib)


BUILDER = """
import errno, fcntl, sys
from pathlib import Path
if sys.argv[2] == "no-locks":
    def refuse(*args):
        raise OSError(errno.ENOLCK, "No locks available")
    fcntl.flock = refuse
from sweep.profile import cupti
print(cupti.library(Path(sys.argv[1])))
"""


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("locks", ["flock", "no-locks"])
def test_concurrent_builders_all_end_with_the_same_valid_library(tmp_path, locks):
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", BUILDER, str(cache), locks], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    results = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in results]
    paths = {out.strip() for out, _ in results}
    assert len(paths) == 1
    lib = Path(paths.pop())
    assert loads_with_entry_point(lib)
    leftovers = sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock"))
    assert leftovers == sorted([lib.name, lib.with_suffix(".json").name])


def test_a_missing_cupti_header_is_named_with_the_fix(tmp_path):
    top = tmp_path / "cuda"
    (top / "lib64").mkdir(parents=True)
    message = r"cupti\.h was not found .*CUDA 13\.0\.88.*apt install cuda-cupti-dev-13-0.*cupti_home="
    with pytest.raises(SweepError, match=message):
        cupti.library(tmp_path / "cache", nvcc=fake_nvcc(tmp_path, top))
    assert not (tmp_path / "cache").exists()


def test_a_missing_libcupti_is_named_with_the_folders_searched(tmp_path):
    home = tmp_path / "cupti"
    (home / "include").mkdir(parents=True)
    (home / "include" / "cupti.h").write_text("")
    with pytest.raises(SweepError, match=rf"libcupti\.so was not found .*{home / 'lib64'}"):
        cupti.library(tmp_path / "cache", nvcc=fake_nvcc(tmp_path, tmp_path / "nowhere"), cupti_home=home)


def test_a_missing_nvcc_says_how_to_load_cuda(tmp_path):
    with pytest.raises(SweepError, match="not found on PATH.*module load cuda"):
        cupti.library(tmp_path, nvcc=str(tmp_path / "no" / "nvcc"))


# --- the environment to run a program under it -----------------------------------

def test_environment_loads_the_library_routes_nvtx_to_cupti_and_names_the_output(tmp_path):
    lib = tmp_path / "libsweep_cupti-x.so"
    lib.write_bytes(b"")
    lib.with_suffix(".json").write_text(json.dumps({"cupti_lib_dir": "/cuda/lib", "libcupti": "/cuda/lib/libcupti.so"}))
    env = cupti.environment(lib, tmp_path / "out.txt", base={"LD_LIBRARY_PATH": "/a:/cuda/lib:/b"})
    assert env == {"CUDA_INJECTION64_PATH": str(lib), "NVTX_INJECTION64_PATH": "/cuda/lib/libcupti.so",
                   "SWEEP_CUPTI_OUT": str(tmp_path / "out.txt"), "LD_LIBRARY_PATH": "/cuda/lib:/a:/b"}
    assert cupti.environment(lib, tmp_path / "o", base={})["LD_LIBRARY_PATH"] == "/cuda/lib"


def test_environment_without_the_build_facts_says_where_to_get_the_library(tmp_path):
    with pytest.raises(SweepError, match=r"\.json is missing or unreadable.*cupti\.library\(\)"):
        cupti.environment(tmp_path / "lib.so", tmp_path / "out.txt")
