"""ncu backend against the real H100 captures in tests/data/h100.

ncu_forward_odd.csv: gpt2_forward on the odd model, -n 2, no --nvtx column.
ncu_forward_odd_summary.csv: the same with --print-summary per-kernel.
ncu_kernel_bench_nvtx.csv: kernel_bench with --nvtx, residual_kernel and others
at six block sizes; its last launch failed (grid and block (0, 0, 0)).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.core.errors import SweepError
from sweep.profile import ncu, nsys

DATA = Path(__file__).resolve().parents[1] / "data" / "h100"
FORWARD = (DATA / "ncu_forward_odd.csv").read_text()
SUMMARY = (DATA / "ncu_forward_odd_summary.csv").read_text()
BENCH = (DATA / "ncu_kernel_bench_nvtx.csv").read_text()
BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)


def shapes(measurements) -> dict:
    return {(m.kernel, m.grid, m.block): m for m in measurements}


@pytest.fixture(scope="module")
def nsys_forward():
    return shapes(nsys.parse_sqlite(DATA / "nsys_forward_odd.sqlite"))


def test_profile_command_logs_csv_to_a_file_and_records_nvtx():
    cmd = ncu.profile_command(["./prog", "-n", "2"], Path("out/ncu.csv"))
    assert cmd == ["ncu", "--csv", "--log-file", "out/ncu.csv", "--metrics", "gpu__time_duration.sum",
                   "--clock-control", "none", "--profile-from-start", "off", "--nvtx", "./prog", "-n", "2"]


# --- ncu_forward_odd.csv ------------------------------------------------------------

def test_forward_capture_splits_into_two_iterations_with_the_nsys_structure(nsys_forward):
    got = shapes(ncu.parse_csv(FORWARD, iterations=2))
    assert {len(m.iter_total_ns) for m in got.values()} == {2}
    assert {key: m.calls for key, m in got.items()} == {key: m.calls for key, m in nsys_forward.items()}
    assert sum(m.calls for m in got.values()) == 21


def test_forward_capture_without_an_iteration_count_is_one_iteration():
    got = ncu.parse_csv(FORWARD)
    assert {len(m.iter_total_ns) for m in got} == {1}
    assert sum(m.calls for m in got) == 42


def test_thousands_separators_and_ns_units_are_parsed():
    logits = shapes(ncu.parse_csv(FORWARD, iterations=2))[("matmul_kernel", (393, 2, 1), (256, 1, 1))]
    assert logits.iter_total_ns == (205376.0, 202560.0)  # rows "205,376" and "202,560"
    assert (logits.min_ns, logits.max_ns) == (202560.0, 205376.0)


def test_forward_capture_names_are_short_and_the_full_name_is_ncus_spelling():
    got = ncu.parse_csv(FORWARD, iterations=2)
    assert all(m.kernel.isidentifier() for m in got)
    matmul = shapes(got)[("matmul_kernel", (3, 2, 1), (256, 1, 1))]
    assert matmul.kernel_full.startswith("void matmul_kernel<128, 128, 8, 8, 8, 1>(")


def test_forward_times_are_positive_and_near_nsys_for_the_long_kernels(nsys_forward):
    got = shapes(ncu.parse_csv(FORWARD, iterations=2))
    assert all(m.min_ns > 0 for m in got.values())
    logits = ("matmul_kernel", (393, 2, 1), (256, 1, 1))
    assert got[logits].median_ns == pytest.approx(nsys_forward[logits].median_ns, rel=0.05)


def test_iterations_that_do_not_divide_the_launches_are_an_error():
    with pytest.raises(SweepError, match="42 launches do not split into 4 equal iterations"):
        ncu.parse_csv(FORWARD, iterations=4)


def test_chunks_with_different_launch_sequences_are_an_error():
    # Swap two launches of the second iteration (IDs 22 and 23): same count, other order.
    lines = FORWARD.splitlines()
    i22 = next(i for i, line in enumerate(lines) if line.startswith('"22"'))
    lines[i22], lines[i22 + 1] = lines[i22 + 1].replace('"23"', '"22"', 1), lines[i22].replace('"22"', '"23"', 1)
    with pytest.raises(SweepError, match=r"launch sequence differs between iterations.*launch 1 of iteration 1"
                                         r".*--nvtx") as info:
        ncu.parse_csv("\n".join(lines), iterations=2, source="swapped.csv")
    assert "swapped.csv" in str(info.value)


@pytest.mark.parametrize("unit, factor", [("ns", 1), ("nsecond", 1), ("us", 1e3), ("usecond", 1e3),
                                          ("ms", 1e6), ("msecond", 1e6), ("s", 1e9)])
def test_metric_units_are_normalized_to_ns(unit, factor):
    text = FORWARD.replace('"gpu__time_duration.sum","ns","205,376"', f'"gpu__time_duration.sum","{unit}","2.5"')
    logits = shapes(ncu.parse_csv(text, iterations=2))[("matmul_kernel", (393, 2, 1), (256, 1, 1))]
    assert logits.iter_total_ns[0] == pytest.approx(2.5 * factor)


def test_an_unknown_metric_unit_is_an_error():
    text = FORWARD.replace('"gpu__time_duration.sum","ns","205,376"', '"gpu__time_duration.sum","cycle","9"')
    with pytest.raises(SweepError, match="metric unit 'cycle' is not a time unit"):
        ncu.parse_csv(text, iterations=2)


def test_rows_of_other_metrics_are_ignored():
    extra = ('"0","2396","gpt2_forward","127.0.0.1","encoder_kernel(float *)","1","13","(32, 4, 1)","(3, 16, 4)",'
             '"0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","12.5"')
    got = ncu.parse_csv(FORWARD + extra + "\n", iterations=2)
    assert sum(m.instances for m in got) == 42


# --- ncu_kernel_bench_nvtx.csv ------------------------------------------------------------

def test_one_kernel_at_six_block_sizes_is_six_measurements():
    got = [m for m in ncu.parse_csv(BENCH) if m.kernel == "residual_kernel"]
    assert sorted(m.block for m in got) == [(b, 1, 1) for b in BLOCK_SIZES]
    assert len({(m.grid, m.block) for m in got}) == 6
    assert all(m.calls == 4 and m.min_ns > 0 for m in got)
    # Each block size is its own template instantiation; the full names keep that.
    assert {m.block[0]: m.kernel_full.split("(")[0] for m in got}[128] == "void residual_kernel<128, 1>"


def test_the_failed_launch_is_skipped_and_counted():
    measurements, skipped = ncu.parse_csv_with_skipped(BENCH)
    assert skipped == 1
    assert "encoder_kernel" not in {m.kernel for m in measurements}
    assert all((0, 0, 0) not in (m.grid, m.block) for m in measurements)
    assert sum(m.instances for m in measurements) == 168  # IDs 0..168, the last one failed


def test_nvtx_column_without_iteration_ranges_keeps_every_launch():
    got = ncu.parse_csv(BENCH)
    assert len(got) == 7 * len(BLOCK_SIZES)
    assert {len(m.iter_total_ns) for m in got} == {1}


def test_error_lines_before_the_header_are_skipped():
    assert BENCH.index("==ERROR==") < BENCH.index('"ID"')
    assert ncu.parse_csv(BENCH)


def _with_nvtx_ranges(text: str, ranges_of) -> str:
    """CONSTRUCTED: the forward capture with the --nvtx column the bench capture shows,
    filled per launch ID by `ranges_of(id) -> (push_pop_cell, start_end_cell)`."""
    out = []
    for line in text.splitlines():
        if not line.startswith('"'):
            out.append(line)
            continue
        first, rest = line.split(",", 1)
        launch_id = first.strip('"')
        if launch_id == "ID":
            cells = ('"thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",'
                     '"Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"')
        else:
            push_pop, start_end = ranges_of(int(launch_id))
            cells = '"' + push_pop.replace('"', '""') + '","' + start_end.replace('"', '""') + '"'
        head = rest.split(",", 3)
        out.append(",".join([first, *head[:3], cells, head[3]]))
    return "\n".join(out) + "\n"


def _push_pop(*names: str) -> str:
    return "2396  " + " ".join(f'"<default domain>:{n}:none:none:none:none:none:none"' for n in names) + " "


def test_push_pop_iteration_ranges_filter_out_launches_outside_them():
    # Launches 0..20 outside any iteration range (as warm-up would be), 21..41 inside one.
    text = _with_nvtx_ranges(FORWARD, lambda i: (_push_pop("iteration", "matmul") if i >= 21 else
                                                 _push_pop("matmul"), ""))
    got = ncu.parse_csv(text)
    assert sum(m.calls for m in got) == 21
    assert {len(m.iter_total_ns) for m in got} == {1}


def test_start_end_iteration_ranges_split_by_range_id():
    # Assumed entry format "id:domain:name:..." (no real capture with start/end ranges yet).
    text = _with_nvtx_ranges(FORWARD, lambda i: (
        _push_pop("matmul"), f'"{7 + i // 21}:<default domain>:iteration:none:none:none:none:none:none"'))
    got = shapes(ncu.parse_csv(text))
    assert {len(m.iter_total_ns) for m in got.values()} == {2}
    assert got[("matmul_kernel", (393, 2, 1), (256, 1, 1))].iter_total_ns == (205376.0, 202560.0)


def test_start_end_ranges_that_disagree_with_the_iteration_count_are_an_error():
    text = _with_nvtx_ranges(FORWARD, lambda i: (
        "", f'"{7 + i // 21}:<default domain>:iteration:none:none:none:none:none:none"'))
    with pytest.raises(SweepError, match="shows 2 NVTX 'iteration' ranges but the program was run for 3"):
        ncu.parse_csv(text, iterations=3)


# --- summary ---------------------------------------------------------------------------------

def test_summary_parses_one_measurement_per_shape_with_invocations_over_the_run(nsys_forward):
    got = shapes(ncu.parse_summary_csv(SUMMARY))
    assert {key: m.calls for key, m in got.items()} == {key: 2 * m.calls for key, m in nsys_forward.items()}
    matmul = got[("matmul_kernel", (1, 2, 1), (256, 1, 1))]
    assert (matmul.min_ns, matmul.max_ns, matmul.mean_ns, matmul.median_ns) == (26624.0, 94080.0, 60496.0, 60496.0)
    assert matmul.iter_total_ns == (60496.0 * 8,)
    assert matmul.std_ns == 0.0


def test_summary_averages_agree_with_the_per_launch_csv_of_another_run():
    per_launch = shapes(ncu.parse_csv(FORWARD, iterations=2))
    for key, m in shapes(ncu.parse_summary_csv(SUMMARY)).items():
        assert m.mean_ns == pytest.approx(per_launch[key].mean_ns, rel=0.25), key


# --- not ncu CSV -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, reason", [
    ("", "no ncu CSV"),
    ("==PROF== Connected to process 1\n==ERROR== LaunchFailed\n", "no ncu CSV"),
    ('"ID","Kernel Name"\n"0","k"\n', "lacks the column"),
    (FORWARD.replace("gpu__time_duration.sum", "dram__bytes.sum"), "has no gpu__time_duration.sum rows"),
    (FORWARD.rsplit('","', 1)[0] + "\n", "fields where the header has"),
])
def test_text_that_is_not_usable_ncu_csv_raises_sweep_error_naming_the_source(text, reason):
    with pytest.raises(SweepError, match=reason) as info:
        ncu.parse_csv(text, source="job/ncu.csv")
    assert "job/ncu.csv" in str(info.value)


def test_a_summary_without_the_summary_columns_is_an_error():
    with pytest.raises(SweepError, match="lacks the column.*Invocations"):
        ncu.parse_summary_csv(FORWARD, source="job/summary.csv")



# --- ncu --csv --log-file with --nvtx: what the ncu backend runs -------------------------

LOGFILE = Path(__file__).resolve().parents[1] / "data" / "h100" / "ncu_forward_odd_logfile.csv"


def test_log_file_capture_with_nvtx_column_splits_into_its_iterations():
    got = ncu.parse_csv(LOGFILE.read_text(), iterations=2)
    assert sum(m.calls for m in got) == 21  # the odd model's launches per forward pass
    assert {len(m.iter_total_ns) for m in got} == {2}
    assert all(m.min_ns > 0 for m in got)


def test_whole_run_profile_command_profiles_from_the_start():
    cmd = ncu.profile_command(["./prog"], Path("out/ncu.csv"), whole_run=True)
    assert "--profile-from-start" not in cmd and cmd[-2:] == ["--nvtx", "./prog"]


def test_the_backend_tries_the_profiler_api_window_then_falls_back_to_the_whole_run(tmp_path):
    from sweep.profile import Request

    inv = ncu.BACKEND.invocation(Request(tmp_path, lambda extra=(), iterations=None: ["./prog", str(iterations)], "ncu"))
    assert inv.capture == "cudaProfilerApi" and inv.fallback.capture == "whole run"
    assert inv.command[-1] == inv.fallback.command[-1] == "3" and inv.fallback.iterations == 3


@pytest.mark.parametrize("log, timed", [(FORWARD, True),
                                        ((DATA / "capture_window" / "ncu_no_start.log").read_text(), False)],
                         ids=["a-capture-with-rows", "no-cudaProfilerStart-no-kernels-profiled"])
def test_a_run_counts_as_timed_when_ncu_profiled_a_launch(tmp_path, log, timed):
    from sweep.profile import Invocation

    (tmp_path / "ncu.csv").write_text(log)
    assert ncu.BACKEND.timed(Invocation([], tmp_path / "ncu.csv")) is timed


def test_a_whole_run_capture_keeps_the_timed_nvtx_iterations_and_leaves_checks_and_warm_up_out():
    got = shapes(ncu.parse_csv((DATA / "capture_window" / "ncu_whole_run.csv").read_text(), iterations=3))
    assert {key: m.calls for key, m in got.items()} == {
        ("gemm_tiled_kernel", grid, (256, 1, 1)): 1 for grid in ((4, 4, 1), (8, 8, 1), (16, 16, 1))}
    assert {len(m.iter_total_ns) for m in got.values()} == {3}
