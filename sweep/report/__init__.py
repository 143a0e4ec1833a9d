"""The last stage: a sweep's results as one self-contained page, and two sweeps side by side.

    write_report(results_dir)        results/<sweep>/report.html and report.md
    summary_json(results_dir)        the same summary as a dict (`report --format json`)
    write_compare(root, a, b)        results/compare-<a>-vs-<b>.html and .md
    compare_summary(root, a, b)      the comparison as a dict (`compare --format json`)

Everything is read from what collect and select wrote to results/<sweep>/
(configs and measurements tables, manifest.json, best.json, confirmation.json,
best/conf.cuh), so a report can be rebuilt at any time, also for a sweep that
is still running or where nothing was measured: what is missing is said, never
guessed. report.html opens offline: inline CSS, plots as inline SVG
(matplotlib, Agg-free SVG backend), no external fonts or scripts; a few lines
of inline JS only sort tables. Every string from the data goes through Jinja's
autoescape (templates/*.html.j2).

Modules, each importing only those above it:

    loading   SweepData, load: what exists of results/<sweep>/ (read_best reads best.json)
    fmt       times, ratios, values and statuses as shown everywhere
    plots     matplotlib figures and their inline SVG
    tables    the report's sections as plain data
    writers   report.html, report.md, summary_json; TEMPLATES
    compare   two sweeps side by side
"""

from __future__ import annotations

from sweep.report.compare import CONF_LABELS, compare_markdown, compare_summary, write_compare
from sweep.report.fmt import NOT_FAILED, fmt_ns, fmt_pct, fmt_ratio, fmt_values, time_unit
from sweep.report.loading import SweepData, load, read_best, resolve_space_path
from sweep.report.plots import plot_1d, plot_2d, plot_compare, svg_of
from sweep.report.tables import (best_rows, confirmation_rows, counts, counts_line, failure_rows, groups, header,
                                 macro_columns, measured_rows, missing)
from sweep.report.writers import TEMPLATES, markdown, summary_json, write_report

__all__ = [
    "CONF_LABELS", "NOT_FAILED", "TEMPLATES", "SweepData", "best_rows", "compare_markdown", "compare_summary",
    "confirmation_rows", "counts", "counts_line", "failure_rows", "fmt_ns", "fmt_pct", "fmt_ratio", "fmt_values",
    "groups", "header", "load", "macro_columns", "markdown", "measured_rows", "missing", "plot_1d", "plot_2d",
    "plot_compare", "read_best", "resolve_space_path", "summary_json", "svg_of", "time_unit", "write_compare",
    "write_report",
]
