"""nsys backend against the real H100 capture (tests/data/h100/nsys_forward_odd.sqlite).

The capture is gpt2_forward on the odd model, -n 3 -w 2, under
--capture-range=cudaProfilerApi: 3 timed iterations of 21 launches each.
Variants of it (moved launch calls, other NVTX encodings, damage) are built
in tmp_path with plain SQL, so each test states what it changes.
"""

from __future__ import annotations

import shutil
import sqlite3
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from sweep.core.errors import SweepError
from sweep.profile import nsys

DATA = Path(__file__).resolve().parents[1] / "data" / "h100"
CAPTURE = DATA / "nsys_forward_odd.sqlite"
ITERATIONS = 3
LAUNCHES_PER_ITERATION = 21

# Calls per iteration of the odd model (2 layers, own matmul, full fusion, flash
# attention), per (kernel, grid, block); see tests/data/h100/README.md.
FORWARD_SHAPES = {
    ("encoder_kernel", (3, 16, 4), (32, 4, 1)): 1,
    ("layernorm_kernel", (256, 1, 1), (256, 1, 1)): 1,
    ("matmul_kernel", (3, 2, 1), (256, 1, 1)): 4,      # qkv and fc, per layer
    ("matmul_kernel", (1, 2, 1), (256, 1, 1)): 4,      # proj and fcproj, per layer
    ("matmul_kernel", (393, 2, 1), (256, 1, 1)): 1,    # logits
    ("prepare_bias_kernel", (72, 1, 1), (256, 1, 1)): 2,
    ("prepare_gelu_kernel", (96, 1, 1), (256, 1, 1)): 2,
    ("attention_flash_kernel", (1, 3, 4), (256, 1, 1)): 2,
    ("residual_layernorm_kernel", (256, 1, 1), (256, 1, 1)): 4,
}


def shapes(measurements) -> dict:
    return {(m.kernel, m.grid, m.block): m for m in measurements}


def copy_capture(tmp_path: Path) -> Path:
    path = tmp_path / "capture.sqlite"
    shutil.copyfile(CAPTURE, path)
    return path


def edit(path: Path, *statements: str) -> None:
    with sqlite3.connect(path) as conn:
        for sql in statements:
            conn.execute(sql)
    conn.close()


@pytest.fixture(scope="module")
def measured():
    return nsys.parse_sqlite(CAPTURE)


# --- commands -----------------------------------------------------------------

def test_profile_command_captures_the_profiler_api_window_with_cuda_and_nvtx():
    cmd = nsys.profile_command(["./prog", "-n", "3"], Path("out/rep"))
    assert cmd == ["nsys", "profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
                   "-t", "cuda,nvtx", "--cuda-graph-trace=node", "--force-overwrite", "true", "-o", "out/rep",
                   "./prog", "-n", "3"]
    assert nsys.report_path(Path("out/rep")) == Path("out/rep.nsys-rep")


def test_export_command_writes_sqlite_over_an_old_one():
    assert nsys.export_command(Path("r.nsys-rep"), Path("r.sqlite")) == [
        "nsys", "export", "--type", "sqlite", "--force-overwrite", "true", "-o", "r.sqlite", "r.nsys-rep"]


def test_stats_command_spells_out_force_overwrite_because_f_means_format():
    cmd = nsys.stats_command(Path("r.nsys-rep"), Path("out/stats"))
    assert cmd == ["nsys", "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--force-overwrite", "true",
                   "-o", "out/stats", "r.nsys-rep"]
    assert "-f" not in cmd
    assert nsys.stats_csv_path(Path("out/stats")) == Path("out/stats_cuda_gpu_kern_sum.csv")


# --- the real capture -----------------------------------------------------------

def test_capture_yields_three_iterations_of_21_launches(measured):
    assert {len(m.iter_total_ns) for m in measured} == {ITERATIONS}
    assert sum(m.calls for m in measured) == LAUNCHES_PER_ITERATION
    assert sum(m.instances for m in measured) == ITERATIONS * LAUNCHES_PER_ITERATION


def test_capture_calls_per_iteration_match_the_forward_pass_structure(measured):
    assert {key: m.calls for key, m in shapes(measured).items()} == FORWARD_SHAPES


def test_calls_per_iteration_agree_with_a_direct_count_per_range():
    # Independent of the parser: count launches per shape per NVTX range in SQL.
    with sqlite3.connect(CAPTURE) as conn:
        rows = conn.execute("""
            SELECT s.value, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, n.start
            FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN StringIds s ON s.id = k.shortName
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
            JOIN NVTX_EVENTS n ON n.text = 'iteration' AND r.start >= n.start AND r.start < n.end
                              AND n.globalTid = r.globalTid""").fetchall()
    conn.close()
    per_range: dict[tuple, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for name, gx, gy, gz, bx, by, bz, range_start in rows:
        per_range[(name, (gx, gy, gz), (bx, by, bz))][range_start] += 1
    assert {key: set(counts.values()) for key, counts in per_range.items()} == {
        key: {calls} for key, calls in FORWARD_SHAPES.items()}
    assert all(len(counts) == ITERATIONS for counts in per_range.values())


def test_iteration_totals_sum_to_all_kernel_time_inside_iteration_ranges(measured):
    with sqlite3.connect(CAPTURE) as conn:
        (expected,) = conn.execute("""
            SELECT SUM(k.end - k.start)
            FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
            WHERE EXISTS (SELECT 1 FROM NVTX_EVENTS n WHERE n.text = 'iteration' AND n.globalTid = r.globalTid
                          AND r.start >= n.start AND r.start < n.end)""").fetchone()
    conn.close()
    assert sum(sum(m.iter_total_ns) for m in measured) == expected


def test_per_launch_statistics_match_the_raw_durations(measured):
    with sqlite3.connect(CAPTURE) as conn:
        rows = conn.execute("""
            SELECT s.value, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, k.end - k.start
            FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName""").fetchall()
    conn.close()
    durations = defaultdict(list)
    for name, gx, gy, gz, bx, by, bz, d in rows:
        durations[(name, (gx, gy, gz), (bx, by, bz))].append(d)
    for key, m in shapes(measured).items():
        assert m.median_ns == statistics.median(durations[key])
        assert (m.min_ns, m.max_ns) == (min(durations[key]), max(durations[key]))
        assert all(t > 0 for t in m.iter_total_ns)


def test_warm_up_launches_are_absent_from_the_capture(measured):
    # -w 2 ran two forward passes before cudaProfilerStart; the capture range left them out.
    with sqlite3.connect(CAPTURE) as conn:
        (kernels,) = conn.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    conn.close()
    assert kernels == ITERATIONS * LAUNCHES_PER_ITERATION
    assert sum(m.instances for m in measured) == kernels


def test_kernel_names_are_short_and_template_free_with_the_full_name_kept(measured):
    for m in measured:
        assert m.kernel.isidentifier(), m.kernel
        assert m.kernel in m.kernel_full
    # In this capture nsys' own shortName is already the bare name; ours agrees.
    with sqlite3.connect(CAPTURE) as conn:
        short = {r[0] for r in conn.execute(
            "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName")}
    conn.close()
    assert {m.kernel for m in measured} == short
    matmul = shapes(measured)[("matmul_kernel", (393, 2, 1), (256, 1, 1))]
    # nsys writes template arguments with C casts, unlike ncu.
    assert matmul.kernel_full.startswith("void matmul_kernel<(int)128, (int)128,")


# --- NVTX attribution, on modified copies -----------------------------------------

def test_a_launch_issued_outside_every_iteration_range_is_excluded(tmp_path):
    path = copy_capture(tmp_path)
    # Move the launch call of the first timed encoder_kernel to before the first range.
    edit(path, """
        UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = (SELECT MIN(start) - 1000 FROM NVTX_EVENTS)
        WHERE correlationId = (SELECT k.correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL k
                               JOIN StringIds s ON s.id = k.shortName
                               WHERE s.value = 'encoder_kernel' ORDER BY k.start LIMIT 1)""")
    got = shapes(nsys.parse_sqlite(path))
    full = shapes(nsys.parse_sqlite(CAPTURE))
    key = ("encoder_kernel", (3, 16, 4), (32, 4, 1))
    assert got[key].iter_total_ns == (0.0, *full[key].iter_total_ns[1:])
    assert {k: m.iter_total_ns for k, m in got.items() if k != key} == {
        k: m.iter_total_ns for k, m in full.items() if k != key}


def test_a_launch_counts_for_the_range_its_cpu_call_was_in_even_if_the_gpu_ran_it_later(measured):
    # The GPU runs behind the CPU: in the capture, launches issued inside a range
    # execute after that range closed. They must still count for that iteration.
    with sqlite3.connect(CAPTURE) as conn:
        late = conn.execute("""
            SELECT DISTINCT s.value, k.gridX FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN StringIds s ON s.id = k.shortName
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
            JOIN NVTX_EVENTS n ON n.text = 'iteration' AND r.start >= n.start AND r.start < n.end
            WHERE k.start >= n.end""").fetchall()
    conn.close()
    assert ("matmul_kernel", 393) in late
    logits = shapes(measured)[("matmul_kernel", (393, 2, 1), (256, 1, 1))]
    assert len(logits.iter_total_ns) == ITERATIONS and all(t > 0 for t in logits.iter_total_ns)


def test_no_iteration_ranges_means_one_iteration_holding_every_launch(tmp_path):
    path = copy_capture(tmp_path)
    edit(path, "DELETE FROM NVTX_EVENTS WHERE text = 'iteration'")
    got = shapes(nsys.parse_sqlite(path))
    assert {len(m.iter_total_ns) for m in got.values()} == {1}
    assert {key: m.calls for key, m in got.items()} == {key: ITERATIONS * c for key, c in FORWARD_SHAPES.items()}
    assert all(m.total_std_ns == 0.0 for m in got.values())


def test_a_file_without_an_nvtx_table_is_one_iteration(tmp_path):
    path = copy_capture(tmp_path)
    edit(path, "DROP TABLE NVTX_EVENTS")
    assert sum(m.calls for m in nsys.parse_sqlite(path)) == ITERATIONS * LAUNCHES_PER_ITERATION


def test_another_range_name_selects_those_ranges():
    # Every launch sits in an NVTX range named after its kernel family.
    got = nsys.parse_sqlite(CAPTURE, iteration_range="layernorm")
    assert [(m.kernel, m.calls, len(m.iter_total_ns)) for m in got] == [("layernorm_kernel", 1, ITERATIONS)]


@pytest.mark.parametrize("variant, statements", [
    ("start/end ranges (eventType 60)", ["UPDATE NVTX_EVENTS SET eventType = 60 WHERE text = 'iteration'"]),
    ("registered string (textId)", [
        "INSERT INTO StringIds (id, value) VALUES (999999, 'iteration')",
        "UPDATE NVTX_EVENTS SET textId = 999999, text = NULL WHERE text = 'iteration'"]),
])
def test_iteration_ranges_are_found_in_every_nvtx_encoding(tmp_path, variant, statements):
    path = copy_capture(tmp_path)
    edit(path, *statements)
    got = nsys.parse_sqlite(path)
    assert {len(m.iter_total_ns) for m in got} == {ITERATIONS}
    assert {key: m.calls for key, m in shapes(got).items()} == FORWARD_SHAPES


def test_ranges_on_another_thread_than_the_launches_are_an_error(tmp_path):
    path = copy_capture(tmp_path)
    edit(path, "UPDATE NVTX_EVENTS SET globalTid = globalTid + 1 WHERE text = 'iteration'")
    with pytest.raises(SweepError, match=r"none of the 63 kernel launches.*3 NVTX 'iteration' ranges"):
        nsys.parse_sqlite(path)


def test_ranges_that_never_closed_are_an_error(tmp_path):
    path = copy_capture(tmp_path)
    edit(path, "UPDATE NVTX_EVENTS SET end = NULL WHERE text = 'iteration'")
    with pytest.raises(SweepError, match="none of the 3 NVTX 'iteration' ranges was closed"):
        nsys.parse_sqlite(path)


# --- broken files -------------------------------------------------------------------

def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _text(path: Path) -> None:
    path.write_text("==PROF== this is a log, not a database\n")


def _truncated(path: Path) -> None:
    path.write_bytes(CAPTURE.read_bytes()[:8192])


def _plain_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()


def _no_kernel_table(path: Path) -> None:
    shutil.copyfile(CAPTURE, path)
    edit(path, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")


def _no_kernels(path: Path) -> None:
    shutil.copyfile(CAPTURE, path)
    edit(path, "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")


@pytest.mark.parametrize("make, reason", [
    (None, "does not exist"),
    (_empty, "is empty"),
    (_text, "is not an SQLite file"),
    (_truncated, "could not be read as an nsys export"),
    (_plain_sqlite, "not an nsys export"),
    (_no_kernel_table, "holds no kernel launches"),
    (_no_kernels, "holds no kernel launches"),
])
def test_unusable_files_raise_sweep_error_naming_the_file(tmp_path, make, reason):
    path = tmp_path / "broken.sqlite"
    if make:
        make(path)
    with pytest.raises(SweepError, match=reason) as info:
        nsys.parse_sqlite(path)
    assert str(path) in str(info.value)


def test_a_report_passed_instead_of_its_export_says_to_export_it(tmp_path):
    path = tmp_path / "run.nsys-rep"
    path.write_bytes(b"\x00NSYS-REP binary")
    with pytest.raises(SweepError, match="nsys export --type sqlite"):
        nsys.parse_sqlite(path)


def test_parsing_leaves_the_capture_unchanged(tmp_path):
    path = copy_capture(tmp_path)
    before = path.read_bytes()
    nsys.parse_sqlite(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capture.sqlite"]


# --- nsys stats CSV (captured in the same run as the sqlite) ---------------------------

# REAL: `nsys stats --report cuda_gpu_kern_sum --format csv` of the report the sqlite was exported from.
STATS_CSV = (CAPTURE.parent / "nsys_forward_odd_cuda_gpu_kern_sum.csv").read_text()


def test_stats_csv_has_one_merged_row_per_kernel_name_with_shapes_zeroed():
    got = nsys.parse_stats_csv(STATS_CSV)
    assert [m.kernel for m in got] == sorted(m.kernel for m in got)
    assert {m.grid for m in got} == {m.block for m in got} == {(0, 0, 0)}
    # The three matmul shapes share one instantiation, so they are one row.
    matmul = [m for m in got if m.kernel == "matmul_kernel"]
    assert len(matmul) == 1 and matmul[0].calls == ITERATIONS * (4 + 4 + 1)
    assert matmul[0].kernel_full.startswith("void matmul_kernel<(int)128")


def test_stats_csv_agrees_with_the_sqlite_per_kernel_name(measured):
    got = {m.kernel: m for m in nsys.parse_stats_csv(STATS_CSV)}
    per_kernel = defaultdict(lambda: [0, 0.0, float("inf"), 0.0])
    for m in measured:
        acc = per_kernel[m.kernel]
        acc[0] += m.instances
        acc[1] += sum(m.iter_total_ns)
        acc[2] = min(acc[2], m.min_ns)
        acc[3] = max(acc[3], m.max_ns)
    assert set(got) == set(per_kernel)
    for kernel, (instances, total, lo, hi) in per_kernel.items():
        m = got[kernel]
        assert (m.calls, m.iter_total_ns, m.min_ns, m.max_ns) == (instances, (total,), lo, hi)
        assert m.mean_ns == pytest.approx(total / instances, abs=0.06)  # nsys prints one decimal


def test_stats_csv_converts_a_header_time_unit_and_accepts_old_column_names():
    text = ("Time(%),Total Time (us),Instances,Average (us),Minimum (us),Maximum (us),StdDev (us),Name\n"
            '100.0,6.0,3,2.0,1.5,2.5,0.5,"void k<(int)1>(float *, int)"\n')
    (m,) = nsys.parse_stats_csv(text)
    assert (m.kernel, m.calls, m.iter_total_ns, m.mean_ns, m.median_ns, m.min_ns, m.max_ns, m.std_ns) == (
        "k", 3, (6000.0,), 2000.0, 2000.0, 1500.0, 2500.0, 500.0)


@pytest.mark.parametrize("text, reason", [
    ("", "no cuda_gpu_kern_sum header"),
    ("SKIPPED: capture.sqlite does not contain CUDA kernel data.\n", "no cuda_gpu_kern_sum header"),
    ("Time (%),Total Time (ns),Instances,Avg (ns),Name\n12.0,100,x,1.0,k\n", "Instances is missing or not a number"),
    ("Time (%),Total Time (ns),Instances,Avg (ns),Name\n12.0,100\n", "2 fields where the header has 5"),
])
def test_stats_csv_that_is_not_a_kernel_summary_raises_sweep_error(text, reason):
    with pytest.raises(SweepError, match=reason):
        nsys.parse_stats_csv(text, source="run_cuda_gpu_kern_sum.csv")


# --- one kernel at several block sizes in one run (kernel_bench under nsys) --------------

BLOCKS_CAPTURE = CAPTURE.parent / "nsys_kernel_bench_blocks.sqlite"


def test_one_kernel_launched_at_six_block_sizes_gives_six_measurements():
    got = [m for m in nsys.parse_sqlite(BLOCKS_CAPTURE) if m.kernel == "residual_kernel"]
    assert sorted(m.block[0] for m in got) == [32, 64, 128, 256, 512, 1024]
    with sqlite3.connect(BLOCKS_CAPTURE) as conn:  # the same launches, counted straight from the capture
        per_block = dict(conn.execute("""
            SELECT k.blockX, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
            WHERE s.value = 'residual_kernel' GROUP BY k.blockX""").fetchall())
    conn.close()
    assert {m.block[0]: m.instances for m in got} == per_block


def test_the_stats_report_would_have_merged_those_block_sizes_into_one_row():
    # why the sweep parses the sqlite: grouped by name alone, six launch sizes become one number
    assert len({m.block for m in nsys.parse_sqlite(BLOCKS_CAPTURE) if m.kernel == "gelu_kernel"}) == 6


def test_a_program_without_iteration_ranges_counts_as_one_iteration():
    assert {len(m.iter_total_ns) for m in nsys.parse_sqlite(BLOCKS_CAPTURE)} == {1}


def test_whole_run_profile_command_has_no_capture_range():
    cmd = nsys.profile_command(["./prog"], Path("out/rep"), whole_run=True)
    assert cmd == ["nsys", "profile", "-t", "cuda,nvtx", "--cuda-graph-trace=node", "--force-overwrite", "true",
                   "-o", "out/rep", "./prog"]


def test_the_backend_tries_the_profiler_api_window_then_falls_back_to_the_whole_run(tmp_path):
    from sweep.profile import Request

    inv = nsys.BACKEND.invocation(Request(tmp_path, lambda extra=(), iterations=None: ["./prog"], "nsys"))
    assert inv.capture == "cudaProfilerApi" and "--capture-range=cudaProfilerApi" in inv.command
    assert inv.fallback.capture == "whole run" and not any("capture-range" in w for w in inv.fallback.command)
    assert inv.fallback.output == inv.output and inv.fallback.post == inv.post
    assert not nsys.BACKEND.timed(inv)
    inv.output.write_bytes(b"")
    assert nsys.BACKEND.timed(inv)
