"""Nsight Compute backend: the command, and parsers for its CSV.

`profile_command` measures gpu__time_duration.sum for every launch between the
program's cudaProfilerStart/Stop, with NVTX state recorded. `parse_csv` turns
that CSV into Measurements; `parse_csv_with_skipped` also says how many failed
launches it left out. `parse_summary_csv` reads `--print-summary per-kernel`.

The CSV (ncu 2025.3, default "details" page)
--------------------------------------------
* ncu's own messages share the stream: `==PROF==`, `==WARNING==` and
  `==ERROR==` lines (and, without --log-file, the program's stdout) come
  before, between or after the rows. When the program fails, the `==ERROR==`
  lines come BEFORE the header. Only lines starting with '"' are CSV; the
  first one holding "Kernel Name" is the header.
* One row per launch per metric, keyed by "ID" (launch order, from 0).
* "Metric Value" uses thousands separators ("202,560", "3,520.00"), and its
  unit is in "Metric Unit": ns/nsecond, us/usecond, ms/msecond, s/second; all
  converted to ns.
* "Block Size" and "Grid Size" read "(256, 1, 1)".
* "Kernel Name" is the demangled signature with template arguments written
  plainly ("void matmul_kernel<128, 128, 8, 8, 8, 1>(float *, ...)"; nsys
  writes "<(int)128, ...>"); `kernel` is its short name.
* A launch that failed reads grid and block "(0, 0, 0)" and value "nan" (or
  "n/a"): it is skipped and counted, never measured.
* With --nvtx a column "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:
  Color:Msg_Type:Msg" holds the thread id, then each open push/pop range as a
  quoted "domain:name:..." entry (`2547  "<default domain>:residual:none:..."`),
  and a column "Id:Domain:Start/Stop_Range:..." the open start/end ranges.

Iterations
----------
ncu has no timestamps, so iterations come from one of, in order:
1. NVTX: when some launch is inside an `iteration_range` range, only such
   launches count (warm-up and setup drop out). Start/end ranges carry an id,
   so each distinct id is one iteration. Push/pop ranges look the same in
   every iteration, so they only filter, and the split falls to 2 or 3.
   (Only the push/pop column has been checked against a real capture; the
   start/end entry is assumed to read "id:domain:name:...".)
2. `iterations`: the launches, in ID order, are cut into that many equal
   consecutive chunks, and every chunk must launch the same sequence of
   (kernel, grid, block); otherwise SweepError, since per-iteration totals
   could not be attributed.
3. Neither: one iteration holding every launch (no run-to-run spread).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

from sweep.core.errors import SweepError
from sweep.profile.base import (WHOLE_RUN, Backend, Dim3, Invocation, Launch, Measurement, Parsed, Request, aggregate,
                           forward_from_stdout, read_output, short_name)

METRIC = "gpu__time_duration.sum"
UNITS_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
PUSH_POP_COLUMN = "thread Domain:Push/Pop_Range"
START_END_COLUMN = "Id:Domain:Start/Stop_Range"
FAILED_VALUES = {"", "n/a", "nan", "-nan"}
NO_SHAPE: Dim3 = (0, 0, 0)


def profile_command(program: list[str], csv_path: Path, ncu: str = "ncu", *, whole_run: bool = False) -> list[str]:
    """ncu over the program's cudaProfilerStart/Stop window (or, `whole_run`, every
    launch from the start): one duration per launch, NVTX recorded.

    With the window, a program that never calls cudaProfilerStart has no launch
    profiled (the CSV holds no "Kernel Name" header) and ncu exits 0: the
    backend then profiles it again from the start (see sweep.profile, "Capture
    windows"); NVTX iteration ranges then keep the checks and warm-up out.

    --log-file sends all of ncu's output (the CSV and its ==PROF== lines) to
    `csv_path` and leaves the program's own stdout alone, so the two cannot
    interleave (as the ncu CLI reference describes it; the captures in
    tests/data/h100 were made with stdout redirected instead, so the parser
    also copes with mixed output). Clocks are left as they are
    (--clock-control none) so the times are comparable with nsys and the
    engine's own timing. ncu serializes launches and by default flushes caches
    before each one, so its times are those of isolated, cold-cache launches.
    """
    window = [] if whole_run else ["--profile-from-start", "off"]
    return [ncu, "--csv", "--log-file", str(csv_path), "--metrics", METRIC, "--clock-control", "none",
            *window, "--nvtx", *program]


@dataclass(frozen=True, slots=True)
class _Row:
    id: int
    kernel_full: str
    grid: Dim3
    block: Dim3
    duration_ns: float          # nan for a failed launch
    push_pop: tuple[str, ...]   # names of the open push/pop ranges
    start_end: tuple[tuple[str, str], ...]  # (id, name) of the open start/end ranges

    @property
    def failed(self) -> bool:
        return self.grid == NO_SHAPE or self.block == NO_SHAPE or not math.isfinite(self.duration_ns)

    @property
    def shape(self) -> tuple[str, Dim3, Dim3]:
        return short_name(self.kernel_full), self.grid, self.block


def parse_csv(text: str, iterations: int | None = None, *, iteration_range: str = "iteration",
              source: str = "ncu CSV") -> list[Measurement]:
    """Measurements from ncu's --csv output; failed launches are left out (see parse_csv_with_skipped)."""
    return parse_csv_with_skipped(text, iterations, iteration_range=iteration_range, source=source)[0]


def parse_csv_with_skipped(text: str, iterations: int | None = None, *, iteration_range: str = "iteration",
                           source: str = "ncu CSV") -> tuple[list[Measurement], int]:
    """(Measurements, number of failed launches skipped) from ncu's --csv output.

    `iterations` is how many timed iterations the program ran; it is used when
    the NVTX column cannot tell them apart (module docstring). `source` names
    the file in error messages.
    """
    header, rows = _csv_table(text, source)
    _require(header, ("ID", "Kernel Name", "Block Size", "Grid Size", "Metric Name", "Metric Unit", "Metric Value"),
             source, "run ncu with --csv and without --page raw")
    parsed = [_row(r, header, source) for r in rows if r[header.index("Metric Name")] == METRIC]
    if not parsed:
        raise SweepError(f"{source} has no {METRIC} rows; profile with `ncu --metrics {METRIC}`")
    parsed.sort(key=lambda r: r.id)
    good = [r for r in parsed if not r.failed]
    skipped = len(parsed) - len(good)
    if not good:
        raise SweepError(f"{source}: all {skipped} launches failed (grid/block (0, 0, 0) or no value); "
                         f"fix the program (see ncu's ==ERROR== lines) and profile again")
    launches, n = _iterations(good, iterations, iteration_range, skipped, source)
    return aggregate(launches, n), skipped


def parse_summary_csv(text: str, *, source: str = "ncu summary CSV") -> list[Measurement]:
    """Measurements from `ncu --csv --print-summary per-kernel`.

    One row per kernel x launch shape with Invocations, Minimum, Maximum and
    Average only: median_ns is set to the average and std_ns to 0; there is
    no per-iteration split, so calls = Invocations over the whole run and
    iter_total_ns = (Average x Invocations,). Rows of failed launches (shape
    (0, 0, 0)) are left out.
    """
    header, rows = _csv_table(text, source)
    _require(header, ("Kernel Name", "Block Size", "Grid Size", "Invocations", "Metric Name", "Metric Unit",
                      "Minimum", "Maximum", "Average"), source, "run ncu with --csv --print-summary per-kernel")
    out = []
    for r in rows:
        d = dict(zip(header, r))
        if d["Metric Name"] != METRIC:
            continue
        grid, block = _dim3(d["Grid Size"], source), _dim3(d["Block Size"], source)
        unit = _unit(d["Metric Unit"], source)
        avg, lo, hi = (_number(d[c]) * unit for c in ("Average", "Minimum", "Maximum"))
        if NO_SHAPE in (grid, block) or not math.isfinite(avg):
            continue
        calls = int(_number(d["Invocations"]))
        out.append(Measurement(kernel=short_name(d["Kernel Name"]), grid=grid, block=block, calls=calls,
                               median_ns=avg, min_ns=lo, max_ns=hi, mean_ns=avg, std_ns=0.0,
                               iter_total_ns=(avg * calls,), kernel_full=d["Kernel Name"]))
    if not out:
        raise SweepError(f"{source} has no {METRIC} rows of launches that ran; profile with "
                         f"`ncu --metrics {METRIC} --print-summary per-kernel`")
    return sorted(out, key=lambda m: (m.kernel, m.grid, m.block, m.kernel_full))


# ---------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------

def _csv_table(text: str, source: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows, ncu's messages and the program's output left out."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.startswith('"')]
    header: list[str] | None = None
    rows = []
    for n, fields in zip((n for n, _ in lines), csv.reader(line for _, line in lines)):
        if header is None:
            if "Kernel Name" in fields:
                header = fields
            continue
        if len(fields) != len(header):
            raise SweepError(f"{source} line {n}: {len(fields)} fields where the header has {len(header)}; "
                             f"the file is cut short or two outputs were mixed: profile again")
        rows.append(fields)
    if header is None:
        raise SweepError(f"{source} holds no ncu CSV (no line with a \"Kernel Name\" header); "
                         f"check that the program launched kernels and that ncu ran with --csv")
    return header, rows


def _require(header: list[str], columns: tuple[str, ...], source: str, fix: str) -> None:
    missing = [c for c in columns if c not in header]
    if missing:
        raise SweepError(f"{source} lacks the column(s) {', '.join(missing)}; {fix}")


def _row(fields: list[str], header: list[str], source: str) -> _Row:
    d = dict(zip(header, fields))
    push_pop = next((v for k, v in d.items() if k.startswith(PUSH_POP_COLUMN)), "")
    start_end = next((v for k, v in d.items() if k.startswith(START_END_COLUMN)), "")
    value = d["Metric Value"].strip()
    duration = math.nan if value.lower() in FAILED_VALUES else _number(value) * _unit(d["Metric Unit"], source)
    try:
        launch_id = int(d["ID"])
    except ValueError:
        raise SweepError(f"{source}: launch ID {d['ID']!r} is not an integer; pass ncu's unmodified CSV") from None
    return _Row(id=launch_id, kernel_full=d["Kernel Name"], grid=_dim3(d["Grid Size"], source),
                block=_dim3(d["Block Size"], source), duration_ns=duration,
                push_pop=tuple(_range_name(e, 1) for e in _nvtx_entries(push_pop)),
                start_end=tuple((e.split(":", 1)[0], _range_name(e, 2)) for e in _nvtx_entries(start_end)))


def _number(cell: str) -> float:
    """'27,872' -> 27872.0; 'n/a' -> nan."""
    try:
        return float(cell.replace(",", ""))
    except ValueError:
        return math.nan


def _unit(unit: str, source: str) -> float:
    try:
        return UNITS_NS[unit.strip().lower()]
    except KeyError:
        raise SweepError(f"{source}: metric unit {unit!r} is not a time unit ({', '.join(UNITS_NS)}); "
                         f"profile with `--metrics {METRIC}` and without --print-units") from None


def _dim3(cell: str, source: str) -> Dim3:
    parts = re.findall(r"\d+", cell)
    if len(parts) != 3:
        raise SweepError(f"{source}: launch size {cell!r} is not '(x, y, z)'; pass ncu's unmodified CSV")
    return int(parts[0]), int(parts[1]), int(parts[2])


def _nvtx_entries(cell: str) -> list[str]:
    """The quoted entries of an NVTX column ('2547  "<default domain>:x:..." ' -> ['<default domain>:x:...'])."""
    return re.findall(r'"([^"]*)"', cell)


def _range_name(entry: str, index: int) -> str:
    """The range name in 'domain:name:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg' (name at `index`)."""
    parts = entry.split(":")
    # Six trailing attribute fields; a name with ':' in it spans the rest.
    return ":".join(parts[index:len(parts) - 6]) if len(parts) > index + 6 else parts[min(index, len(parts) - 1)]


# ---------------------------------------------------------------------------
# Iterations
# ---------------------------------------------------------------------------

def _iterations(rows: list[_Row], iterations: int | None, name: str, skipped: int,
                source: str) -> tuple[list[Launch], int]:
    in_range = [r for r in rows if name in r.push_pop or any(n == name for _, n in r.start_end)]
    if in_range:
        rows = in_range
        ids = _start_end_ids(rows, name)
        if ids and iterations not in (None, len(ids)):
            raise SweepError(f"{source} shows {len(ids)} NVTX {name!r} ranges but the program was run for "
                             f"{iterations} iterations; pass the iteration count it ran")
        if ids:
            return [_launch(r, ids[_range_id(r, name)]) for r in rows], len(ids)
    if iterations is None or iterations == 1:
        return [_launch(r, 0) for r in rows], 1
    return _chunk(rows, iterations, skipped, source), iterations


def _range_id(row: _Row, name: str) -> str | None:
    return next((i for i, n in row.start_end if n == name), None)


def _start_end_ids(rows: list[_Row], name: str) -> dict[str, int]:
    """Iteration index per start/end range id, in order of first launch; {} unless every row has one."""
    ids: dict[str, int] = {}
    for r in rows:
        rid = _range_id(r, name)
        if rid is None:
            return {}
        ids.setdefault(rid, len(ids))
    return ids


def _chunk(rows: list[_Row], iterations: int, skipped: int, source: str) -> list[Launch]:
    note = f" ({skipped} failed launches were skipped)" if skipped else ""
    if iterations < 1 or len(rows) % iterations:
        raise SweepError(f"{source}: {len(rows)} launches do not split into {iterations} equal iterations{note}; "
                         f"pass the iteration count the program ran, or profile with --nvtx and NVTX ranges")
    size = len(rows) // iterations
    chunks = [rows[i * size:(i + 1) * size] for i in range(iterations)]
    for i, chunk in enumerate(chunks[1:], 1):
        for pos, (first, this) in enumerate(zip(chunks[0], chunk)):
            if first.shape != this.shape:
                raise SweepError(
                    f"{source}: the launch sequence differs between iterations (launch {pos} of iteration {i} is "
                    f"{_describe(this)}, of iteration 0 {_describe(first)}){note}, so per-iteration totals cannot "
                    f"be attributed; profile with --nvtx and an NVTX range around each iteration")
    return [_launch(r, i) for i, chunk in enumerate(chunks) for r in chunk]


def _describe(row: _Row) -> str:
    kernel, grid, block = row.shape
    return f"{kernel} grid {grid} block {block}"


def _launch(row: _Row, iteration: int) -> Launch:
    kernel, grid, block = row.shape
    return Launch(kernel=kernel, grid=grid, block=block, duration_ns=row.duration_ns, iteration=iteration,
                  kernel_full=row.kernel_full)


CAPTURE_RANGE = "cudaProfilerApi"


def _invocation(req: Request) -> Invocation:
    iterations = int(req.options.get("ncu_iterations", 3))
    csv_path = req.job_dir / "profile_ncu.csv"
    program = req.program(iterations=iterations)
    whole = Invocation(profile_command(program, csv_path, req.tool, whole_run=True), csv_path,
                       iterations=iterations, capture=WHOLE_RUN)
    return Invocation(profile_command(program, csv_path, req.tool), csv_path, iterations=iterations,
                      capture=CAPTURE_RANGE, fallback=whole)


def _timed(inv: Invocation) -> bool:
    """ncu profiled a launch: its log holds a CSV header."""
    try:
        text = inv.output.read_text(errors="replace")
    except OSError:
        return False
    return any(line.startswith('"') and '"Kernel Name"' in line for line in text.splitlines())


def _parse(inv: Invocation, stdout: str) -> Parsed:
    # No iteration windows: the CSV has no timestamps (and ncu serialises and replays each kernel),
    # so a run is judged for throttling by its peak clock only (sweep.node.sampling).
    return Parsed(parse_csv(read_output(inv), iterations=inv.iterations), forward_from_stdout(stdout), stdout)


BACKEND = Backend("ncu", "Nsight Compute: gpu__time_duration.sum of each launch, replayed alone",
                  _invocation, _parse, tool="ncu", timed=_timed)
