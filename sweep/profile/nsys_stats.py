"""nsys stats' kernel summary: the command and the parser of its CSV.

For cross-checks and for users who only have that file: it merges launch
shapes (see parse_stats_csv), so the sweep reads the SQLite export instead
(sweep/profile/nsys.py).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from sweep.core.errors import SweepError
from sweep.profile.base import Dim3, Measurement, short_name


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
