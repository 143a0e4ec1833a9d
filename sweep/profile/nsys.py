"""Nsight Systems backend: commands, and the parsers for what they write.

The sweep profiles with `profile_command`, turns the .nsys-rep into SQLite with
`export_command` and reads that with `parse_sqlite`. `parse_stats_csv` reads
the `nsys stats --report cuda_gpu_kern_sum` CSV, for cross-checks and for users
who only have that file; it cannot separate launch shapes (see its docstring).

The SQLite export (schema 3.x, checked against nsys 2025.3)
-----------------------------------------------------------
Names are stored once, in StringIds(id, value); other tables hold ids.

    CUPTI_ACTIVITY_KIND_KERNEL   one row per kernel executed on the GPU: start,
        end (GPU ns), correlationId, globalPid, gridX..Z, blockX..Z,
        demangledName and shortName (StringIds ids). shortName is the bare
        function name ("matmul_kernel"); demangledName carries the return type,
        template arguments with C casts and the parameter list
        ("void matmul_kernel<(int)128, ..., (bool)1>(float *, ...)"), which is
        not the spelling Nsight Compute uses ("<128, ..., 1>"), so full names
        do not match across the two tools; the short names do.
    CUPTI_ACTIVITY_KIND_RUNTIME  one row per traced CUDA runtime call (CPU
        ns): the launch call of a kernel has the kernel's correlationId. Driver
        API launches (cuLaunchKernel) land in CUPTI_ACTIVITY_KIND_DRIVER when
        that is traced; both are looked up.
    NVTX_EVENTS  one row per NVTX range: eventType 59 (NvtxPushPopRange, from
        nvtxRangePush/Pop) or 60 (NvtxStartEndRange, from nvtxRangeStart/End),
        start/end (CPU ns, end NULL if the range never closed), globalTid of
        the thread that opened it, and the name either inline in `text` (plain
        nvtxRangePushA strings: what gpt2_forward writes) or as `textId` into
        StringIds (registered strings and some domain APIs).

globalTid and globalPid are serialized ids: the process id sits in bits 24..47
(globalTid / 0x1000000 % 0x1000000), so a kernel's globalPid tells which
process's runtime call carries its correlationId.

Attributing launches to iterations
----------------------------------
The GPU runs behind the CPU: a kernel issued in iteration i often executes
after iteration i's NVTX range has closed on the CPU. So a kernel is placed by
the CPU start of its launch call, not by its GPU time: it belongs to iteration
i when that call started inside the i-th `iteration_range` range opened on the
same thread. Ranges are numbered by start time; a range holding no launch is
not an iteration (it would report zero for every shape and fake a spread).
Launches in no such range (warm-up when no capture range was used, setup
kernels), and launches whose API call was not traced, are left out.

A generic target without NVTX ranges still works: when the file has no range
of that name at all, every captured kernel counts as one single iteration, so
there is no run-to-run spread (total_std_ns is 0).
"""

from __future__ import annotations

import csv
import io
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sweep.errors import SweepError
from sweep.profile.ranges import Range, attribute
from sweep.profile import (Backend, Dim3, Invocation, Launch, Measurement, Parsed, Request, aggregate,
                           forward_from_stdout, short_name)

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
LAUNCH_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
NVTX_TABLE = "NVTX_EVENTS"
# Used when an export has no ENUM_NSYS_EVENT_TYPE table to look them up in.
NVTX_RANGE_TYPES = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60}
SQLITE_MAGIC = b"SQLite format 3\x00"
RERUN = "re-run the profile and check the program's log"


# ---------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------

def profile_command(program: list[str], report_base: Path, nsys: str = "nsys") -> list[str]:
    """nsys profile over the program's cudaProfilerStart/Stop window, tracing CUDA and NVTX.

    nsys appends ".nsys-rep" to `report_base` (see `report_path`).
    """
    return [nsys, "profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
            "-t", "cuda,nvtx", "--force-overwrite", "true", "-o", str(report_base), *program]


def report_path(report_base: Path) -> Path:
    """The file `profile_command(..., report_base)` writes."""
    return report_base.with_name(report_base.name + ".nsys-rep")


def export_command(report: Path, sqlite: Path, nsys: str = "nsys") -> list[str]:
    """nsys export of a .nsys-rep into the SQLite file `parse_sqlite` reads."""
    return [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite), str(report)]


def stats_command(report: Path, out_base: Path, nsys: str = "nsys") -> list[str]:
    """nsys stats' kernel summary as CSV, written to `stats_csv_path(out_base)`.

    In nsys stats `-f` is --format, so force-overwrite is spelled out. Given a
    .nsys-rep, nsys stats first exports a .sqlite next to it if none is there.
    """
    return [nsys, "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--force-overwrite", "true",
            "-o", str(out_base), str(report)]


def stats_csv_path(out_base: Path) -> Path:
    """nsys stats names its output <out_base>_<report>.csv."""
    return out_base.with_name(out_base.name + "_cuda_gpu_kern_sum.csv")


# ---------------------------------------------------------------------------
# SQLite export
# ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Kernel:
    kernel: str
    kernel_full: str
    grid: Dim3
    block: Dim3
    duration_ns: float
    call_start: int | None      # CPU start of the launch call; None when it was not traced
    call_tid: int | None


def parse_sqlite(path: Path, iteration_range: str = "iteration") -> list[Measurement]:
    """Measurements per kernel x launch shape from an `nsys export --type sqlite` file.

    Each Measurement's iter_total_ns has one entry per timed iteration found
    (one when the file has no `iteration_range` NVTX ranges; see the module
    docstring for how launches are attributed).
    """
    path = Path(path)
    conn = _connect(path)
    try:
        kernels, ranges = _read(conn, path, iteration_range)
    except sqlite3.Error as e:
        raise SweepError(f"{path} could not be read as an nsys export ({e}); the file may be truncated: "
                         f"export it again with `nsys export --type sqlite --force-overwrite true`") from None
    finally:
        conn.close()
    if not ranges:
        return aggregate([_launch(k, 0) for k in kernels], 1)
    launches, iterations = _attribute(kernels, ranges)
    if not launches:
        raise SweepError(f"{path}: none of the {len(kernels)} kernel launches was issued inside one of the "
                         f"{len(ranges)} NVTX {iteration_range!r} ranges; open the ranges on the thread that "
                         f"launches the kernels, around the launches")
    return aggregate(launches, iterations)


def _connect(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise SweepError(f"{path} does not exist; run the profile and `nsys export --type sqlite` first")
    if path.stat().st_size == 0:
        raise SweepError(f"{path} is empty (0 bytes): the export did not finish; {RERUN}")
    with path.open("rb") as f:
        magic = f.read(len(SQLITE_MAGIC))
    if magic != SQLITE_MAGIC:
        hint = ("it looks like the .nsys-rep itself; convert it with `nsys export --type sqlite`"
                if path.suffix == ".nsys-rep" else "pass the .sqlite written by `nsys export --type sqlite`")
        raise SweepError(f"{path} is not an SQLite file; {hint}")
    # Read-only: never leave a journal next to a result file or change it.
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _read(conn: sqlite3.Connection, path: Path, iteration_range: str) -> tuple[list[_Kernel], list[Range]]:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if KERNEL_TABLE not in tables:
        if "StringIds" not in tables:
            raise SweepError(f"{path} is an SQLite file but not an nsys export (no StringIds or {KERNEL_TABLE} "
                             f"table); pass the file written by `nsys export --type sqlite`")
        raise SweepError(f"{path} holds no kernel launches (no {KERNEL_TABLE} table): the program ran no kernels "
                         f"inside the capture range or crashed before CUPTI flushed its records; {RERUN}")
    kernels = _kernels(conn, tables)
    if not kernels:
        raise SweepError(f"{path} holds no kernel launches ({KERNEL_TABLE} is empty): the program ran no kernels "
                         f"inside the capture range; {RERUN}")
    complete, unfinished = _ranges(conn, tables, iteration_range)
    if not complete and unfinished:
        raise SweepError(f"{path}: none of the {unfinished} NVTX {iteration_range!r} ranges was closed, so the "
                         f"program stopped inside its first timed iteration; {RERUN}")
    return kernels, complete


def _kernels(conn: sqlite3.Connection, tables: set[str]) -> list[_Kernel]:
    calls = _launch_calls(conn, tables)
    rows = conn.execute(f"""
        SELECT k.start, k.end, k.correlationId, k.globalPid, d.value, s.value,
               k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ
        FROM {KERNEL_TABLE} k
        LEFT JOIN StringIds d ON d.id = k.demangledName
        LEFT JOIN StringIds s ON s.id = k.shortName
        ORDER BY k.start""")
    out = []
    for start, end, corr, gpid, demangled, short, gx, gy, gz, bx, by, bz in rows:
        full = demangled or short or "?"
        call = calls.get((_pid(gpid), corr))
        out.append(_Kernel(kernel=short_name(full), kernel_full=full, grid=(gx, gy, gz), block=(bx, by, bz),
                           duration_ns=float(end - start), call_start=call[0] if call else None,
                           call_tid=call[1] if call else None))
    return out


def _launch_calls(conn: sqlite3.Connection, tables: set[str]) -> dict[tuple[int | None, int], tuple[int, int]]:
    """(pid, correlationId) -> (CPU start, globalTid) of every traced API call."""
    calls: dict[tuple[int | None, int], tuple[int, int]] = {}
    for table in reversed(LAUNCH_TABLES):  # runtime last: it wins if both share an id
        if table in tables:
            for start, tid, corr in conn.execute(f"SELECT start, globalTid, correlationId FROM {table}"):
                calls[(_pid(tid), corr)] = (start, tid)
    return calls


def _pid(global_id: int | None) -> int | None:
    return None if global_id is None else global_id // 0x1000000 % 0x1000000


def _ranges(conn: sqlite3.Connection, tables: set[str], name: str) -> tuple[list[Range], int]:
    """Closed ranges called `name`, and how many were never closed."""
    if NVTX_TABLE not in tables:
        return [], 0
    types = _nvtx_range_types(conn, tables)
    columns = {r[1] for r in conn.execute(f"PRAGMA table_info({NVTX_TABLE})")}
    text = "COALESCE(n.text, s.value)" if "textId" in columns else "n.text"
    join = "LEFT JOIN StringIds s ON s.id = n.textId" if "textId" in columns else ""
    rows = conn.execute(f"""
        SELECT n.start, n.end, n.globalTid FROM {NVTX_TABLE} n {join}
        WHERE n.eventType IN ({",".join("?" * len(types))}) AND {text} = ?
        ORDER BY n.start""", (*types, name)).fetchall()
    complete = [Range(start, end, tid) for start, end, tid in rows if end is not None]
    return complete, len(rows) - len(complete)


def _nvtx_range_types(conn: sqlite3.Connection, tables: set[str]) -> tuple[int, ...]:
    if "ENUM_NSYS_EVENT_TYPE" in tables:
        names = tuple(NVTX_RANGE_TYPES)
        found = conn.execute(f"SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name IN ({','.join('?' * len(names))})",
                             names).fetchall()
        if found:
            return tuple(r[0] for r in found)
    return tuple(NVTX_RANGE_TYPES.values())


def _attribute(kernels: list[_Kernel], ranges: list[Range]) -> tuple[list[Launch], int]:
    """Launches inside a range, numbered by their range; ranges without launches dropped."""
    found, used = attribute([(k.call_start, k.call_tid) for k in kernels], ranges)
    return [_launch(k, i) for k, i in zip(kernels, found) if i is not None], used


def _launch(k: _Kernel, iteration: int) -> Launch:
    return Launch(kernel=k.kernel, grid=k.grid, block=k.block, duration_ns=k.duration_ns, iteration=iteration,
                  kernel_full=k.kernel_full)


# ---------------------------------------------------------------------------
# nsys stats CSV
# ---------------------------------------------------------------------------

_STATS_COLUMNS = {  # normalized header -> field; older nsys spelled the stats out
    "time": "percent", "totaltime": "total", "instances": "instances",
    "avg": "mean", "average": "mean", "med": "median", "median": "median",
    "min": "min", "minimum": "min", "max": "max", "maximum": "max", "stddev": "std",
    "name": "name", "gridxyz": "grid", "blockxyz": "block",
}
_TIME_UNITS = {"ns": 1.0, "nsec": 1.0, "us": 1e3, "usec": 1e3, "ms": 1e6, "msec": 1e6, "s": 1e9, "sec": 1e9}
_HEADER_UNIT = re.compile(r"^(.*?)\s*\(([^)]*)\)\s*$")


def parse_stats_csv(text: str, *, source: str = "nsys stats CSV") -> list[Measurement]:
    """Measurements from `nsys stats --report cuda_gpu_kern_sum --format csv`.

    LAUNCH SHAPES ARE MERGED: this report groups launches by kernel name only,
    so two grid or block sizes of one kernel (same template instantiation) are
    one row, and every Measurement has grid = block = (0, 0, 0). Use
    `parse_sqlite` for the sweep; this parser is for cross-checks and for users
    who only have the stats CSV. (If the report carries GridXYZ/BlockXYZ
    columns, as cuda_gpu_kern_gb_sum does, they are used.)

    The report has no iterations either: each row is one "iteration" holding
    every launch in the capture (calls = Instances, iter_total_ns = (Total,)).
    `kernel_full` is the Name column (nsys' demangled name), so distinct
    template instantiations stay distinct rows even when their short names,
    and therefore `kernel`, are equal.

    Format (nsys 2025.3): a plain header line
    `Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name`,
    then one row per kernel name, numbers without thousands separators, Name
    quoted when it holds commas. nsys may print notice lines ("Processing
    [...] with [...]...") before the header; they are skipped. Times in other
    units (--timeunit) are converted from the unit in the header.
    """
    rows = list(csv.reader(io.StringIO(text)))
    start = next((i for i, row in enumerate(rows) if _is_stats_header(row)), None)
    if start is None:
        raise SweepError(f"{source}: no cuda_gpu_kern_sum header (a line with 'Total Time' and 'Name') was found; "
                         f"produce it with `nsys stats --report cuda_gpu_kern_sum --format csv`")
    fields, scales = _stats_header(rows[start])
    out = []
    for n, row in enumerate(rows[start + 1:], start + 2):
        if not any(cell.strip() for cell in row):
            break  # a blank line ends the table; nsys may print another after it
        if len(row) != len(fields):
            raise SweepError(f"{source} line {n}: {len(row)} fields where the header has {len(fields)}; "
                             f"the file is cut short or not nsys stats CSV: produce it again")
        out.append(_stats_measurement(dict(zip(fields, row)), scales, source, n))
    return sorted(out, key=lambda m: (m.kernel, m.grid, m.block, m.kernel_full))


def _is_stats_header(row: list[str]) -> bool:
    keys = {_stats_key(cell)[0] for cell in row}
    return "name" in keys and "totaltime" in keys


def _stats_key(cell: str) -> tuple[str, float]:
    """'Avg (ns)' -> ('avg', 1.0); 'Total Time (us)' -> ('totaltime', 1000.0)."""
    m = _HEADER_UNIT.match(cell)
    label, unit = (m.group(1), m.group(2).strip().lower()) if m else (cell, "")
    return re.sub(r"[^a-z]", "", label.lower()), _TIME_UNITS.get(unit, 1.0)


def _stats_header(row: list[str]) -> tuple[list[str], dict[str, float]]:
    fields, scales = [], {}
    for cell in row:
        key, scale = _stats_key(cell)
        field = _STATS_COLUMNS.get(key, key)
        fields.append(field)
        scales[field] = scale
    return fields, scales


def _stats_measurement(row: dict[str, str], scales: dict[str, float], source: str, line: int) -> Measurement:
    def time(field: str, fallback: str | None = None) -> float:
        if field not in row and fallback:
            field = fallback
        try:
            return float(row[field].replace(",", "")) * scales.get(field, 1.0)
        except (KeyError, ValueError):
            raise SweepError(f"{source} line {line}: column {field!r} is missing or not a number "
                             f"({row.get(field)!r}); produce the CSV again with nsys stats") from None

    try:
        instances = int(float(row["instances"].replace(",", "")))
    except (KeyError, ValueError):
        raise SweepError(f"{source} line {line}: Instances is missing or not a number "
                         f"({row.get('instances')!r}); produce the CSV again with nsys stats") from None
    name = row["name"].strip()
    mean = time("mean")
    return Measurement(
        kernel=short_name(name), kernel_full=name, grid=_xyz(row.get("grid")), block=_xyz(row.get("block")),
        calls=instances, median_ns=time("median", "mean"), min_ns=time("min"), max_ns=time("max"), mean_ns=mean,
        std_ns=time("std") if "std" in row else 0.0, iter_total_ns=(time("total"),),
    )


def _xyz(cell: str | None) -> Dim3:
    """GridXYZ/BlockXYZ are space-separated ('  896    1    1'); absent means merged shapes."""
    parts = re.findall(r"\d+", cell or "")
    return (int(parts[0]), int(parts[1]), int(parts[2])) if len(parts) == 3 else (0, 0, 0)


def _invocation(req: Request) -> Invocation:
    base = req.job_dir / "profile"
    rep = report_path(base)
    sqlite = rep.with_suffix(".sqlite")
    return Invocation(profile_command(req.program(), base, req.tool), rep,
                      post=(tuple(export_command(rep, sqlite, req.tool)),))


def _parse(inv: Invocation, stdout: str) -> Parsed:
    return Parsed(parse_sqlite(inv.output.with_suffix(".sqlite")), forward_from_stdout(stdout), stdout)


BACKEND = Backend("nsys", "Nsight Systems: every launch in the timed NVTX iterations, grouped by name, grid and block",
                  _invocation, _parse, tool="nsys")
