"""Nsight Systems backend: commands, and the parsers for what they write.

The sweep profiles with `profile_command`, turns the .nsys-rep into SQLite with
`export_command` and reads that with `parse_sqlite`. `parse_stats_csv` reads
the `nsys stats --report cuda_gpu_kern_sum` CSV, for cross-checks and for users
who only have that file; it cannot separate launch shapes (see its docstring).

The SQLite export (schema 3.x, checked against nsys 2025.3)
-----------------------------------------------------------
Names are stored once, in StringIds(id, value); other tables hold ids.

    CUPTI_ACTIVITY_KIND_KERNEL   one row per kernel executed on the GPU: start,
        end (GPU ns), deviceId, contextId, streamId, correlationId, globalPid,
        gridX..Z, blockX..Z, demangledName and shortName (StringIds ids).
        shortName is the bare function name ("matmul_kernel"); demangledName
        carries the return type, template arguments with C casts and the
        parameter list ("void matmul_kernel<(int)128, ..., (bool)1>(float *,
        ...)"), which is not the spelling Nsight Compute uses ("<128, ...,
        1>"), so full names do not match across the two tools; the short
        names do.
    CUPTI_ACTIVITY_KIND_RUNTIME  one row per traced CUDA runtime call (CPU
        ns): the launch call of a kernel has the kernel's correlationId (for a
        kernel of a replayed CUDA graph, the cudaGraphLaunch call's). Driver
        API launches (cuLaunchKernel) land in CUPTI_ACTIVITY_KIND_DRIVER when
        that is traced; both are looked up.
    NVTX_EVENTS  one row per NVTX range: eventType 59 (NvtxPushPopRange, from
        nvtxRangePush/Pop) or 60 (NvtxStartEndRange, from nvtxRangeStart/End),
        start/end (CPU ns, end NULL if the range never closed), globalTid of
        the thread that opened it, and the name either inline in `text` (plain
        nvtxRangePushA strings: what gpt2_forward writes) or as `textId` into
        StringIds (registered strings and some domain APIs).

    TARGET_INFO_SESSION_START_TIME  one row: utcEpochNs, the session's start on the
        wall clock (ns since the epoch), with utcTime and localTime as text.

globalTid and globalPid are serialized ids: the process id sits in bits 24..47
(globalTid / 0x1000000 % 0x1000000), so a kernel's globalPid tells which
process's runtime call carries its correlationId.

Times (start, end) are ns from the session's start, CPU and GPU on one timeline:
in the committed H100 exports the diagnostics put "Profiling has started" at 0
and the profiler's set-up before it at negative times, and the first kernels
sit milliseconds after 0 (`nsys_forward_odd.sqlite`, captured through
cudaProfilerStart: 16.5 ms) or seconds after (`nsys_kernel_bench_blocks.sqlite`,
the whole run: 2.7 s). So utcEpochNs + a time is that moment on the wall clock,
which is how each timed iteration's window (`Export.windows`) is placed for the
sampler's per-iteration throttling check; an export without the table has none.

A kernel's time
---------------
A launch's duration is the time it adds to its stream (sweep.profile.overlap):
end - start, less any part of it spent while an earlier kernel on the same
(deviceId, contextId, streamId) still ran. Under programmatic dependent launch
a kernel's blocks start before its predecessor ends and wait for it, so its
span would count that wait twice; without PDL kernels on a stream never
overlap and the duration is end - start, as nsys reports it. Every kernel of
the export is on that timeline (warm-up ones too), and kernels on different
streams are never clipped against each other. An export without a streamId
column (none seen) is timed by spans alone.

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

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sweep.core.errors import SweepError
from sweep.profile.base import (WHOLE_RUN, Backend, Dim3, Invocation, Launch, Measurement, Parsed, Request, Window,
                           aggregate, forward_from_stdout, iteration_windows, short_name)
from sweep.profile.nsys_stats import parse_stats_csv, stats_command, stats_csv_path  # noqa: F401  (its API, here too)
from sweep.profile.overlap import clip, note
from sweep.profile.ranges import Range, attribute

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
LAUNCH_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
NVTX_TABLE = "NVTX_EVENTS"
SESSION_START_TABLE = "TARGET_INFO_SESSION_START_TIME"
# Used when an export has no ENUM_NSYS_EVENT_TYPE table to look them up in.
NVTX_RANGE_TYPES = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60}
SQLITE_MAGIC = b"SQLite format 3\x00"
RERUN = "re-run the profile and check the program's log"


# ---------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------

def profile_command(program: list[str], report_base: Path, nsys: str = "nsys", *, whole_run: bool = False) -> list[str]:
    """nsys profile over the program's cudaProfilerStart/Stop window (or, `whole_run`,
    from start to exit), tracing CUDA and NVTX.

    `--cuda-graph-trace=node`: the kernels of a replayed CUDA graph (gpt2_generate's
    decoding steps) are traced one by one, each with the correlationId of the
    cudaGraphLaunch call that replayed it; nsys's default traces a graph as one
    whole and records none of its kernels.

    nsys appends ".nsys-rep" to `report_base` (see `report_path`). With the
    window, a program that never calls cudaProfilerStart gets no report ("No
    reports were generated") and nsys still exits 0: the backend then runs it
    again over the whole run (see sweep.profile, "Capture windows").
    """
    window = [] if whole_run else ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    return [nsys, "profile", *window, "-t", "cuda,nvtx", "--cuda-graph-trace=node", "--force-overwrite", "true",
            "-o", str(report_base), *program]


def report_path(report_base: Path) -> Path:
    """The file `profile_command(..., report_base)` writes."""
    return report_base.with_name(report_base.name + ".nsys-rep")


def export_command(report: Path, sqlite: Path, nsys: str = "nsys") -> list[str]:
    """nsys export of a .nsys-rep into the SQLite file `parse_sqlite` reads."""
    return [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite), str(report)]


# ---------------------------------------------------------------------------
# SQLite export
# ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Kernel:
    kernel: str
    kernel_full: str
    grid: Dim3
    block: Dim3
    start: int                  # GPU start and end, ns from the session's start
    end: int
    duration: int               # the time it adds to its stream (sweep.profile.overlap)
    overlap: int                # what of end - start an earlier kernel on its stream still ran in
    call_start: int | None      # CPU start of the launch call; None when it was not traced
    call_tid: int | None


@dataclass(frozen=True, slots=True)
class Export:
    """What the sweep reads from an nsys export: the launches of the timed iterations (each
    with its iteration), how many iterations, and when the GPU ran each one on the wall clock
    (None for an export without the session's start)."""

    launches: tuple[Launch, ...]
    iterations: int
    windows: tuple[Window, ...] | None

    @property
    def measurements(self) -> list[Measurement]:
        return aggregate(self.launches, self.iterations)


def parse_sqlite(path: Path, iteration_range: str = "iteration") -> list[Measurement]:
    """Measurements per kernel x launch shape from an `nsys export --type sqlite` file.

    Each Measurement's iter_total_ns has one entry per timed iteration found
    (one when the file has no `iteration_range` NVTX ranges; see the module
    docstring for how launches are attributed).
    """
    return read_export(path, iteration_range).measurements


def read_export(path: Path, iteration_range: str = "iteration") -> Export:
    """The timed iterations' launches and windows of an `nsys export --type sqlite` file (see parse_sqlite)."""
    path = Path(path)
    conn = _connect(path)
    try:
        kernels, ranges, session_start = _read(conn, path, iteration_range)
    except sqlite3.Error as e:
        raise SweepError(f"{path} could not be read as an nsys export ({e}); the file may be truncated: "
                         f"export it again with `nsys export --type sqlite --force-overwrite true`") from None
    finally:
        conn.close()
    if not ranges:
        timed, iterations = [(k, 0) for k in kernels], 1
    else:
        where, iterations = attribute([(k.call_start, k.call_tid) for k in kernels], ranges)
        timed = [(k, i) for k, i in zip(kernels, where) if i is not None]
        if not timed:
            raise SweepError(f"{path}: none of the {len(kernels)} kernel launches was issued inside one of the "
                             f"{len(ranges)} NVTX {iteration_range!r} ranges; open the ranges on the thread that "
                             f"launches the kernels, around the launches")
    windows = None if session_start is None else iteration_windows(
        ((i, k.start, k.end) for k, i in timed), lambda t: session_start + t)
    return Export(tuple(_launch(k, i) for k, i in timed), iterations, windows)


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


def _read(conn: sqlite3.Connection, path: Path, iteration_range: str) -> tuple[list[_Kernel], list[Range], int | None]:
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
    return kernels, complete, _session_start(conn, tables)


def _kernels(conn: sqlite3.Connection, tables: set[str]) -> list[_Kernel]:
    calls = _launch_calls(conn, tables)
    columns = {r[1] for r in conn.execute(f"PRAGMA table_info({KERNEL_TABLE})")}
    # The stream a kernel ran on (the last 3 columns); without a streamId column, its own rowid:
    # every kernel then keeps its whole span, as before the clip.
    stream = ", ".join(f"k.{c}" if c in columns else "NULL" for c in ("deviceId", "contextId")) + (
        ", k.streamId" if "streamId" in columns else ", k.rowid")
    rows = conn.execute(f"""
        SELECT k.start, k.end, k.correlationId, k.globalPid, d.value, s.value,
               k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, {stream}
        FROM {KERNEL_TABLE} k
        LEFT JOIN StringIds d ON d.id = k.demangledName
        LEFT JOIN StringIds s ON s.id = k.shortName
        ORDER BY k.start""").fetchall()
    clipped = clip((tuple(row[-3:]), row[0], row[1]) for row in rows)
    out = []
    for (start, end, corr, gpid, demangled, short, gx, gy, gz, bx, by, bz, *_), c in zip(rows, clipped):
        full = demangled or short or "?"
        call = calls.get((_pid(gpid), corr))
        out.append(_Kernel(kernel=short_name(full), kernel_full=full, grid=(gx, gy, gz), block=(bx, by, bz),
                           start=start, end=end, duration=c.duration_ns, overlap=c.overlap_ns,
                           call_start=call[0] if call else None, call_tid=call[1] if call else None))
    return out


def _launch_calls(conn: sqlite3.Connection, tables: set[str]) -> dict[tuple[int | None, int], tuple[int, int]]:
    """(pid, correlationId) -> (CPU start, globalTid) of every traced API call."""
    calls: dict[tuple[int | None, int], tuple[int, int]] = {}
    for table in reversed(LAUNCH_TABLES):  # runtime last: it wins if both share an id
        if table in tables:
            for start, tid, corr in conn.execute(f"SELECT start, globalTid, correlationId FROM {table}"):
                calls[(_pid(tid), corr)] = (start, tid)
    return calls


def _session_start(conn: sqlite3.Connection, tables: set[str]) -> int | None:
    """The session's start on the wall clock (ns since the epoch), None when the export does not say."""
    if SESSION_START_TABLE not in tables:
        return None
    columns = {r[1] for r in conn.execute(f"PRAGMA table_info({SESSION_START_TABLE})")}
    row = conn.execute(f"SELECT utcEpochNs FROM {SESSION_START_TABLE}").fetchone() if "utcEpochNs" in columns else None
    return int(row[0]) if row and row[0] is not None else None


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


def _launch(k: _Kernel, iteration: int) -> Launch:
    return Launch(kernel=k.kernel, grid=k.grid, block=k.block, duration_ns=float(k.duration),
                  iteration=iteration, kernel_full=k.kernel_full, overlap_ns=float(k.overlap))


CAPTURE_RANGE = "cudaProfilerApi"


def _invocation(req: Request) -> Invocation:
    base = req.job_dir / "profile"
    rep = report_path(base)
    post = (tuple(export_command(rep, rep.with_suffix(".sqlite"), req.tool)),)
    whole = Invocation(profile_command(req.program(), base, req.tool, whole_run=True), rep, post=post,
                       capture=WHOLE_RUN)
    return Invocation(profile_command(req.program(), base, req.tool), rep, post=post, capture=CAPTURE_RANGE,
                      fallback=whole)


def _parse(inv: Invocation, stdout: str) -> Parsed:
    export = read_export(inv.output.with_suffix(".sqlite"))
    return Parsed(export.measurements, forward_from_stdout(stdout), stdout,
                  env=note(launch.overlap_ns for launch in export.launches), timed_launches=export.launches,
                  windows=export.windows)


BACKEND = Backend("nsys", "Nsight Systems: every launch in the timed NVTX iterations, grouped by name, grid and block",
                  _invocation, _parse, tool="nsys")
