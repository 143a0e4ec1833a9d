"""The last stage: a sweep's results as one self-contained page, and two sweeps side by side.

    write_report(results_dir)        results/<sweep>/report.html and report.md
    summary_json(results_dir)        the same summary as a dict (`report --format json`)
    write_compare(root, a, b)        results/compare-<a>-vs-<b>.html and .md
    compare_summary(root, a, b)      the comparison as a dict (`compare --format json`)

Everything is read from what collect and select wrote to results/<sweep>/
(configs and measurements tables, manifest.json, best.json, confirmation.json,
best/conf.cuh), so a report can be rebuilt at any time, also for a sweep that
is still running: what is missing is said, never guessed. report.html opens
offline: inline CSS, plots as inline SVG (matplotlib, Agg-free SVG backend),
no external fonts or scripts; a few lines of inline JS only sort tables. Every
string from the data goes through Jinja's autoescape (templates/*.html.j2).
"""

from __future__ import annotations

import io
import json
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator
from urllib.parse import quote

import jinja2
import matplotlib
import pandas as pd
from markupsafe import Markup
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, NullLocator

from sweep import atomic, collect, paths, select as select_mod, target
from sweep.errors import SweepError
from sweep.space import NAME_RE, Space

TEMPLATES = paths.TEMPLATES
NOT_FAILED = ("ok", "skipped", "pending", "running")   # every other status is a failure
MAX_LISTED = 12          # tags listed inline before "… and N more"
MAX_BARS = 30            # candidates drawn in a group's bar chart (the fastest)

BLUE, ORANGE, GREY, RED = "#3b6ea8", "#e07000", "#777777", "#c0392b"
STATUS_COLORS = {"skipped": "#999999", "pending": "#5dade2", "running": "#5dade2"}   # failures: RED


# ---------------------------------------------------------------------------
# Loading: what exists of a sweep's results, and what is missing
# ---------------------------------------------------------------------------


@dataclass
class SweepData:
    name: str
    results_dir: Path
    configs: pd.DataFrame
    measurements: pd.DataFrame
    manifest: dict
    best: dict | None                  # best.json (or provisional: selected here from a partial sweep)
    confirmation: dict | None
    conf_text: str | None
    space: Space | None
    jobs_dir: Path | None = None
    provisional: bool = False
    notes: list[str] = field(default_factory=list)   # degraded inputs, said at the top of the report


def load(results_dir: Path, *, space: Space | None = None, jobs_dir: Path | None = None) -> SweepData:
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise SweepError(f"no results in {results_dir}: run `python config_sweep.py collect {results_dir.name}` "
                         f"(or `python config_sweep.py run SPACE.yaml --name {results_dir.name}`) first")
    tables = collect.load_tables(results_dir)
    configs = tables.configs.copy()
    if "role" not in configs:
        configs["role"] = "sweep"
    notes: list[str] = []
    manifest = tables.manifest.to_dict() if tables.manifest else {}
    if not manifest:
        notes.append(f"no manifest.json in {results_dir}: space, strategy and executor are unknown")
    if space is None:
        space = _load_space(manifest, notes)
    best = _read_json(results_dir / "best.json", notes)
    provisional = False
    if best is None:
        best, provisional = _provisional_best(space, tables.measurements, notes)
    conf = _read_json(results_dir / "confirmation.json", notes)
    conf_path = results_dir / "best" / "conf.cuh"
    conf_text = conf_path.read_text() if conf_path.is_file() else None
    return SweepData(results_dir.name, results_dir, configs, tables.measurements, manifest, best, conf, conf_text,
                     space, Path(jobs_dir) if jobs_dir else None, provisional, notes)


def _read_json(path: Path, notes: list[str]) -> dict | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        notes.append(f"{path.name} is damaged ({e}): ignored; run `python config_sweep.py collect` again")
        return None


def resolve_space_path(recorded: str) -> Path | None:
    """The manifest's space file; if that absolute path is gone (another checkout), the same
    relative path inside this repository (e.g. /old/clone/tests/data/toy_space.yaml)."""
    p = Path(recorded)
    if p.is_file():
        return p
    parts = p.parts[1:] if p.is_absolute() else p.parts
    for i in range(len(parts)):
        candidate = paths.CHECKOUT.joinpath(*parts[i:])
        if candidate.is_file():
            return candidate
    return None


def _load_space(manifest: dict, notes: list[str]) -> Space | None:
    recorded = manifest.get("space")
    if not recorded:
        notes.append("the space file is unknown (no manifest): groups come from best.json and the tables' macro columns")
        return None
    path = resolve_space_path(recorded)
    if path is None:
        notes.append(f"space file {recorded} not found: groups come from best.json and the tables' macro columns; "
                     "parameter defaults are not shown")
        return None
    try:
        return target.load(path)
    except (SweepError, OSError, ValueError, KeyError) as e:
        notes.append(f"space file {path} could not be loaded ({e}): groups come from best.json and the tables' "
                     "macro columns; parameter defaults are not shown")
        return None


def _provisional_best(space: Space | None, measurements: pd.DataFrame, notes: list[str]) -> tuple[dict | None, bool]:
    ok = not measurements.empty and (measurements["status"] == "ok").any()
    if space is None or not ok:
        why = "nothing was measured yet" if not ok else "the space file is unavailable"
        notes.append(f"no best.json yet and no picks can be made here ({why})")
        return None, False
    try:
        best = select_mod.select(space, measurements).to_dict()
    except (SweepError, KeyError, ValueError) as e:
        notes.append(f"no best.json yet, and selecting from the measurements failed ({e})")
        return None, False
    notes.append("no best.json yet: the picks below are provisional, selected from the configurations measured so far")
    return best, True


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def _clean(v: Any) -> Any:
    """A JSON-able python value from a pandas/numpy one (NaN -> None)."""
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def fmt_ns(ns: float | None) -> str:
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "—"
    if abs(ns) < 1e4:
        return f"{ns:,.0f} ns"
    if abs(ns) < 1e6:
        return f"{ns / 1e3:,.2f} µs"
    return f"{ns / 1e6:,.3f} ms"


def fmt_ratio(r: float | None, suffix: str = "×") -> str:
    return "—" if r is None else f"{r:.3f}{suffix}"


def fmt_pct(r: float | None) -> str:
    return "—" if r is None else f"+{100 * r:.1f}%"


def fmt_values(values: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def time_unit(max_ns: float) -> tuple[float, str]:
    """Scale and unit for a plot axis whose largest time is max_ns."""
    if max_ns < 1e4:
        return 1.0, "ns"
    if max_ns < 1e6:
        return 1e3, "µs"
    return 1e6, "ms"


def _listed(items: list[str], limit: int = MAX_LISTED) -> str:
    return ", ".join(items[:limit]) + (f" … and {len(items) - limit} more" if len(items) > limit else "")


def _uniq(series: pd.Series | None) -> list[str]:
    if series is None:
        return []
    return sorted({str(v) for v in series.dropna() if str(v).strip() and str(v) != "nan"})


def _sweep_rows(configs: pd.DataFrame) -> pd.DataFrame:
    return configs[configs["role"].fillna("sweep") == "sweep"] if not configs.empty else configs


def _col(df: pd.DataFrame, name: str) -> pd.Series | None:
    return df[name] if name in df else None


def macro_columns(configs: pd.DataFrame) -> list[str]:
    """Macro columns of the tables (collect writes every other column in lower case)."""
    return [c for c in configs.columns if re.fullmatch(r"[A-Z_][A-Z0-9_]*", str(c))]


# ---------------------------------------------------------------------------
# Sections (each returns plain data for the templates and the markdown)
# ---------------------------------------------------------------------------


def header(sw: SweepData) -> list[tuple[str, str]]:
    """Label/value rows: where and how the sweep ran."""
    c, m = sw.configs, sw.manifest
    done = c[c["status"] == "ok"] if not c.empty else c

    def env(col: str) -> str:
        return ", ".join(_uniq(_col(done, col))) or "not recorded"

    commits = _uniq(_col(done, "commit")) or ([m["commit"]] if m.get("commit") else [])
    finished = _uniq(_col(c, "finished_at"))
    tables = sw.results_dir / "configs.parquet"
    collected = datetime.fromtimestamp(tables.stat().st_mtime, timezone.utc).isoformat(timespec="seconds") \
        if tables.is_file() else "—"
    space = str(sw.space.path) if sw.space is not None else (m.get("space") or "unknown")
    strategy = m.get("strategy") or (sw.space.strategy.name if sw.space else "unknown")
    rows = [
        ("Sweep", sw.name), ("GPU", env("gpu")), ("Driver", env("driver")), ("CUDA runtime", env("cuda_runtime")),
        ("Commit", ", ".join(commits) or "unknown"), ("Host(s)", env("host")), ("Space file", space),
        ("Strategy", strategy + (f" ({m['note']})" if m.get("note") else "")),
        ("Backend", ", ".join(_uniq(_col(done, "backend"))) or m.get("backend") or "unknown"),
        ("Executor", m.get("executor") or "unknown"),
        ("Started", m.get("created") or "—"), ("Last result", finished[-1] if finished else "—"),
        ("Collected", collected), ("Results", str(sw.results_dir)),
    ]
    if sw.jobs_dir is not None:
        rows.append(("Jobs", str(sw.jobs_dir)))
    return rows


def counts(sw: SweepData) -> dict[str, Any]:
    """How many of the sweep's configurations are done, failed, skipped, still to come."""
    s = _sweep_rows(sw.configs)
    by = s["status"].value_counts().to_dict() if not s.empty else {}
    failed = {k: int(v) for k, v in by.items() if k not in NOT_FAILED}
    extra = sw.configs[sw.configs["role"].isin(["baseline", "best"])] if not sw.configs.empty else sw.configs
    return {
        "planned": int(len(s)), "ok": int(by.get("ok", 0)), "failed": sum(failed.values()), "failed_by_status": failed,
        "skipped": int(by.get("skipped", 0)), "pending": int(by.get("pending", 0)), "running": int(by.get("running", 0)),
        "confirmation_jobs": {str(r["tag"]): str(r["status"]) for _, r in extra.iterrows()},
        "grid_size": sw.manifest.get("grid_size"),
    }


def counts_line(n: dict[str, Any]) -> str:
    failed = ", ".join(f"{v} {k}" for k, v in sorted(n["failed_by_status"].items()))
    parts = [f"{n['ok']} ok", f"{n['failed']} failed" + (f" ({failed})" if failed else ""), f"{n['skipped']} skipped",
             f"{n['pending']} pending", f"{n['running']} running"]
    line = f"{n['planned']} configurations: " + ", ".join(parts)
    if n["confirmation_jobs"]:
        line += "; confirmation jobs: " + ", ".join(f"{t} {s}" for t, s in n["confirmation_jobs"].items())
    return line


def missing(sw: SweepData) -> list[str]:
    """What this report cannot show yet, and why; empty for a finished sweep."""
    out = list(sw.notes)
    s = _sweep_rows(sw.configs)
    for st in ("pending", "running"):
        tags = sorted(s[s["status"] == st]["tag"].astype(str)) if not s.empty else []
        if tags:
            verb = "still pending" if st == "pending" else "still running"
            out.append(f"{len(tags)} of {len(s)} configurations {verb}: {_listed(tags)}")
    if sw.best is not None and sw.confirmation is None:
        out.append("no confirmation.json: the combined best was not confirmed end to end")
    if sw.conf_text is None:
        out.append("no best/conf.cuh yet")
    roles = set(sw.configs["role"]) if not sw.configs.empty else set()
    if sw.best is not None and "baseline" not in roles:
        out.append("no baseline job (the target's default launch sizes): no speed-ups against the defaults")
    return out


def _group_failures(sw: SweepData, macros: tuple[str, ...], measured: set[tuple]) -> dict[tuple, dict[str, Any]]:
    """Values of a group (over its first two macros) that no ok job measured, with why:
    {values: {"statuses": {status: count}, "reasons": {status: first reason}}}."""
    keys = [m for m in macros[:2] if m in sw.configs]
    s = _sweep_rows(sw.configs)
    if len(keys) < min(2, len(macros)) or s.empty:
        return {}
    out: dict[tuple, dict[str, Any]] = {}
    bad = s[(s["status"] != "ok")].dropna(subset=keys)
    for _, r in bad.iterrows():
        v = tuple(int(r[k]) for k in keys)
        if v in measured:
            continue
        e = out.setdefault(v, {"statuses": {}, "reasons": {}})
        e["statuses"][r["status"]] = e["statuses"].get(r["status"], 0) + 1
        if isinstance(r.get("reason"), str) and r["reason"]:
            e["reasons"].setdefault(r["status"], r["reason"])
    return dict(sorted(out.items()))


def _by_weight(statuses: dict[str, int]) -> list[str]:
    """Statuses, failures first, then the most frequent."""
    return sorted(statuses, key=lambda k: (k in NOT_FAILED, -statuses[k], k))


def _main_status(statuses: dict[str, int]) -> str:
    return _by_weight(statuses)[0]


def groups(sw: SweepData) -> list[dict[str, Any]]:
    """Per parameter group (a Choice of best.json): its plot, candidates and unmeasured values."""
    if not sw.best:
        return []
    out = []
    for i, ch in enumerate(sw.best.get("choices", [])):
        macros = tuple(ch["macros"])
        cands = ch.get("candidates") or [ch["best"]]
        measured = {tuple(int(c["values"][m]) for m in macros[:2]) for c in cands}
        fails = _group_failures(sw, macros, measured)
        default = _defaults(sw.space, macros)
        salt = f"{sw.name}-group-{i}"
        with _plot_style():
            fig = plot_1d(ch, fails) if len(macros) == 1 else plot_2d(ch, fails, default)
            svg = svg_of(fig, salt)
        not_measured = [{"label": ", ".join(f"{m}={v}" for m, v in zip(macros, vals)),
                         "statuses": ", ".join(f"{k} ×{e['statuses'][k]}" for k in _by_weight(e["statuses"])),
                         "reason": e["reasons"].get(_main_status(e["statuses"]), "")}
                        for vals, e in fails.items()]
        best_ns = ch["best"]["ns"]
        out.append({
            "title": ", ".join(macros), "macros": macros, "kernels": ", ".join(ch.get("kernels", [])) or "—",
            "svg": Markup(svg), "chosen": fmt_values(ch["values"]), "note": ch.get("note", ""),
            "not_measured": not_measured,
            "candidates": [{"label": fmt_values(c["values"]), "ns": fmt_ns(c["ns"]), "std": fmt_ns(c["std_ns"]),
                            "jobs": c.get("jobs", ""), "vs_best": fmt_pct((c["ns"] - best_ns) / best_ns) if best_ns else "—",
                            "chosen": c["values"] == ch["values"], "tag": c.get("tag", "")} for c in cands],
            "more_than_two": len(macros) > 2,
        })
    return out


def _defaults(space: Space | None, macros: tuple[str, ...]) -> dict[str, int] | None:
    if space is None:
        return None
    try:
        d = {m: space.parameter(m).default for m in macros}
    except KeyError:
        return None
    return d if all(v is not None for v in d.values()) else None


def best_rows(sw: SweepData) -> list[dict[str, str]]:
    """The best table: one row per parameter group."""
    rows = []
    for ch in (sw.best or {}).get("choices", []):
        ru = ch.get("runner_up")
        beyond = "—" if ru is None else ("yes" if ch.get("beyond_noise") else "no")
        noise = f"noise {fmt_ns(ch['noise_ns'])}" if ru is not None and ch.get("noise_ns") is not None else ""
        rows.append({
            "kernels": ", ".join(ch.get("kernels", [])) or "—", "chosen": fmt_values(ch["values"]),
            "kernel_list": list(ch.get("kernels", [])) or ["—"], "chosen_list": _value_list(ch["values"]),
            "runner_up_list": _value_list(ru["values"]) if ru else ["—"], "noise": noise,
            "time": f"{fmt_ns(ch['best']['ns'])} ± {fmt_ns(ch['best']['std_ns'])}",
            "ns": fmt_ns(ch["best"]["ns"]), "std": fmt_ns(ch["best"]["std_ns"]),
            "runner_up": fmt_values(ru["values"]) if ru else "—", "runner_up_time": fmt_ns(ru["ns"]) if ru else "—",
            "margin": fmt_pct(ch.get("margin")), "beyond_noise": beyond, "default": fmt_ns(ch.get("default_ns")),
            "speedup": fmt_ratio(ch.get("speedup_vs_default")), "note": ch.get("note", ""),
        })
    return rows


def _value_list(values: dict) -> list[str]:
    return [f"{k}={v}" for k, v in values.items()]


def confirmation_rows(sw: SweepData) -> list[tuple[str, str, str]]:
    """(what, value, ratio/explanation) rows of the end-to-end confirmation."""
    c = sw.confirmation
    if not c:
        return []
    rows = [
        ("Sum of per-group bests (each measured in its own jobs)", fmt_ns(c.get("sum_of_group_bests_ns")), ""),
        ("Combined best (job 'best', every pick at once)", fmt_ns(c.get("best_total_ns")),
         f"{fmt_ratio(c.get('best_vs_sum_of_bests'))} the sum of bests" if c.get("best_vs_sum_of_bests") else
         "not run: no job 'best'" if not c.get("best_total_ns") else ""),
        ("Default launch sizes (job 'default')", fmt_ns(c.get("default_total_ns")),
         f"combined best is {fmt_ratio(c.get('speedup_vs_default'))} faster" if c.get("speedup_vs_default") else
         "no baseline measured" if not c.get("default_total_ns") else ""),
    ]
    if c.get("best_forward_ms") is not None or c.get("default_forward_ms") is not None:
        def ms(v: float | None) -> str:
            return "—" if v is None else f"{v:.4g} ms"
        rows.append(("Forward pass, combined best", ms(c.get("best_forward_ms")), ""))
        rows.append(("Forward pass, default launch sizes", ms(c.get("default_forward_ms")),
                     f"combined best is {fmt_ratio(c.get('forward_speedup_vs_default'))} faster"
                     if c.get("forward_speedup_vs_default") else ""))
    return rows


def failure_rows(sw: SweepData, jobs_dir: Path | None = None) -> tuple[list[dict], list[dict]]:
    """(failed, skipped) jobs: tag, role, status, stage, reason, log and its file:// link."""
    c = sw.configs
    if c.empty:
        return [], []
    bad = c[~c["status"].isin(["ok", "pending", "running"])].sort_values(["status", "tag"])
    failed, skipped = [], []
    for _, r in bad.iterrows():
        log = str(r.get("log") or "") if _clean(r.get("log")) is not None else ""
        row = {"tag": str(r["tag"]), "role": str(r.get("role") or "sweep"), "status": str(r["status"]),
               "stage": str(_clean(r.get("stage")) or ""), "reason": str(_clean(r.get("reason")) or ""),
               "log": log, "href": _log_href(log, jobs_dir or sw.jobs_dir),
               "log_found": bool(log) and _log_path(log, jobs_dir or sw.jobs_dir).is_file()}
        (skipped if row["status"] == "skipped" else failed).append(row)
    return failed, skipped


def _log_path(log: str, jobs_dir: Path | None) -> Path:
    p = Path(log)
    return p if p.is_absolute() or jobs_dir is None else jobs_dir / p


def _log_href(log: str, jobs_dir: Path | None) -> str:
    if not log:
        return ""
    p = _log_path(log, jobs_dir)
    return p.as_uri() if p.is_absolute() else quote(log)


def measured_rows(sw: SweepData) -> tuple[list[str], list[dict[str, Any]]]:
    """Every ok job's per-iteration time per kernel (the raw material of the picks)."""
    m = sw.measurements
    if m.empty:
        return [], []
    m = m[m["status"] == "ok"]
    per = m.groupby(["tag", "kernel"])["total_median_ns"].sum().unstack("kernel")
    kernels = [str(k) for k in per.columns]
    macros = [c for c in macro_columns(sw.configs)]
    info = sw.configs.set_index("tag")
    rows = []
    for tag, r in per.iterrows():
        total = float(r.sum())
        vals = {m: _clean(info.at[tag, m]) if tag in info.index and m in info else None for m in macros}
        rows.append({"tag": str(tag), "role": str(info.at[tag, "role"]) if tag in info.index else "",
                     "label": " ".join(f"{m}={int(v)}" for m, v in vals.items() if v is not None),
                     "kernels": [fmt_ns(_clean(r[k])) for k in per.columns], "total": fmt_ns(total), "total_ns": total})
    rows.sort(key=lambda x: x["total_ns"])
    return kernels, rows


# ---------------------------------------------------------------------------
# Plots (matplotlib Figure objects, no pyplot state; SVG text stays text)
# ---------------------------------------------------------------------------


@contextmanager
def _plot_style() -> Iterator[None]:
    with matplotlib.rc_context({"svg.fonttype": "none", "text.parse_math": False, "font.size": 9,
                                "axes.spines.top": False, "axes.spines.right": False, "axes.titlesize": 10,
                                "legend.fontsize": 8, "legend.frameon": False}):
        yield


def svg_of(fig: Figure, salt: str) -> str:
    """The figure as an inline <svg> element (no XML prolog; ids unique per salt, deterministic)."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    svg = text[text.index("<svg"):]
    # matplotlib numbers its ids per figure (figure_1, axes_1, ...): prefix them, and the
    # references to them, so that several plots in one page keep their ids unique
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", salt) + "-"
    svg = re.sub(r'(\sid=")|(href="#)|(url\(#)', lambda m: m.group(0) + prefix, svg)
    return svg.replace("<svg ", '<svg role="img" ', 1)


def _is_pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _x_axis(ax: Any, values: list[int]) -> None:
    """log2 x when the values are powers of two (or span 8x and more), else linear; a tick per value."""
    values = sorted(set(values))
    positive = all(v > 0 for v in values)
    if positive and len(values) > 1 and (all(_is_pow2(v) for v in values) or values[-1] / values[0] >= 8):
        ax.set_xscale("log", base=2)
        lo, hi = values[0] / 1.4, values[-1] * 1.4
        ax.set_xlim(lo, hi)
    elif len(values) > 1:
        pad = (values[-1] - values[0]) * 0.08
        ax.set_xlim(values[0] - pad, values[-1] + pad)
    ax.xaxis.set_major_locator(FixedLocator(values))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(v) for v in values], rotation=45 if len(values) > 10 else 0)


def _status_color(status: str) -> str:
    return STATUS_COLORS.get(status, RED)


def plot_1d(ch: dict, fails: dict[tuple, dict]) -> Figure:
    """Time per iteration against the one macro: measured values with error bars, the pick, the default."""
    m = ch["macros"][0]
    cands = sorted(ch.get("candidates") or [ch["best"]], key=lambda c: c["values"][m])
    default_ns = ch.get("default_ns")
    top = max([c["ns"] + c["std_ns"] for c in cands] + [default_ns or 0])
    scale, unit = time_unit(top)
    xs = [c["values"][m] for c in cands]
    fig = Figure(figsize=(7.2, 3.3))
    ax = fig.add_subplot()
    ax.errorbar(xs, [c["ns"] / scale for c in cands], yerr=[c["std_ns"] / scale for c in cands], fmt="o-",
                color=BLUE, ms=5, capsize=3, lw=1.4, label="median time (± std over iterations)")
    b = ch["best"]
    bx = ch["values"][m]
    ax.errorbar([bx], [b["ns"] / scale], yerr=[b["std_ns"] / scale], fmt="o", color=ORANGE, ms=10, capsize=4,
                zorder=4, label=f"chosen {m}={bx}")
    # the pick is the lowest point: its label goes below it, where no line runs
    ax.annotate(f"chosen {bx}: {fmt_ns(b['ns'])}", xy=(bx, b["ns"] / scale), xytext=(0, -14), textcoords="offset points",
                ha="center", va="top", color=ORANGE, fontweight="bold", fontsize=8.5)
    if default_ns:
        ax.axhline(default_ns / scale, ls="--", color=GREY, lw=1.2, label=f"default launch sizes: {fmt_ns(default_ns)}")
    seen = set()
    for (v,), e in fails.items():
        st = _main_status(e["statuses"])
        ax.plot([v], [0], marker="X", ms=9, ls="", color=_status_color(st), clip_on=False, zorder=5,
                transform=ax.get_xaxis_transform(), label=None if st in seen else f"not measured: {st}")
        seen.add(st)
    _x_axis(ax, xs + [v for (v,) in fails])
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo - (hi - lo) * 0.3, hi)   # room for the pick's label and the × of unmeasured values
    ax.set_xlabel(m)
    ax.set_ylabel(f"time per iteration ({unit})")
    ax.set_title(", ".join(ch.get("kernels", [])) or m, loc="left")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_2d(ch: dict, fails: dict[tuple, dict], default: dict[str, int] | None) -> Figure:
    """A heatmap over the first two macros (best over any others) beside every candidate's time with its spread."""
    macros = ch["macros"]
    mx, my = macros[0], macros[1]
    cands = ch.get("candidates") or [ch["best"]]
    cell: dict[tuple[int, int], float] = {}
    for c in cands:
        k = (c["values"][mx], c["values"][my])
        cell[k] = min(cell.get(k, math.inf), c["ns"])
    xs = sorted({k[0] for k in cell} | {k[0] for k in fails})
    ys = sorted({k[1] for k in cell} | {k[1] for k in fails})
    default_ns = ch.get("default_ns")
    scale, unit = time_unit(max([c["ns"] + c["std_ns"] for c in cands] + [default_ns or 0]))
    grid = [[cell.get((x, y), math.nan) / scale for x in xs] for y in ys]

    ordered = sorted(cands, key=lambda c: c["ns"])[:MAX_BARS]
    height = max(3.2, 0.45 * len(ys) + 1.8, 0.16 * len(ordered) + 1.4)
    fig = Figure(figsize=(10.5, height))
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.1, 1], "wspace": 0.45})
    cmap = matplotlib.colormaps["viridis_r"].with_extremes(bad="#eeeeee")
    im = ax.imshow(grid, origin="lower", cmap=cmap, aspect="auto")
    ax.set_xticks(range(len(xs)), [str(x) for x in xs])
    ax.set_yticks(range(len(ys)), [str(y) for y in ys])
    ax.set_xlabel(mx)
    ax.set_ylabel(my)
    for side in ("top", "right"):
        ax.spines[side].set_visible(True)
    small = len(xs) * len(ys) <= 64
    finite = [v for row in grid for v in row if not math.isnan(v)]
    mid = (min(finite) + max(finite)) / 2 if finite else 0
    for j, y in enumerate(ys):
        for i, x in enumerate(xs):
            v = grid[j][i]
            if not math.isnan(v):
                if small:
                    ax.text(i, j, f"{v:,.0f}" if v >= 100 else f"{v:.3g}", ha="center", va="center", fontsize=8,
                            color="white" if v > mid else "black")
            elif (x, y) in fails:
                st = _main_status(fails[(x, y)]["statuses"])
                ax.text(i, j, f"×\n{st}", ha="center", va="center", fontsize=7, color=_status_color(st))
    chosen = (ch["values"][mx], ch["values"][my])
    ax.add_patch(Rectangle((xs.index(chosen[0]) - 0.45, ys.index(chosen[1]) - 0.45), 0.9, 0.9, fill=False, ec=ORANGE,
                           lw=3))
    handles = [Rectangle((0, 0), 1, 1, fill=False, ec=ORANGE, lw=3, label="chosen")]
    if default and (default[mx], default[my]) in {(x, y) for x in xs for y in ys}:
        i, j = xs.index(default[mx]), ys.index(default[my])
        dark = not math.isnan(grid[j][i]) and grid[j][i] > mid
        ax.add_patch(Rectangle((i - 0.42, j - 0.42), 0.84, 0.84, fill=False, ec="white" if dark else "black", lw=1.5,
                               ls="--"))
        handles.append(Rectangle((0, 0), 1, 1, fill=False, ec="black", lw=1.5, ls="--", label="default"))
    rest = f" (best over {', '.join(macros[2:])})" if len(macros) > 2 else ""
    ax.set_title(f"time per iteration ({unit}){rest}", loc="left")
    below = -0.75 / height    # legends just under the x label, whatever the figure's height
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, below), ncol=2)
    fig.colorbar(im, ax=ax, label=unit, fraction=0.05, pad=0.03)

    labels = ["×".join(str(c["values"][m]) for m in macros) for c in ordered]
    colors = [ORANGE if c["values"] == ch["values"] else BLUE for c in ordered]
    pos = list(range(len(ordered)))[::-1]   # fastest on top
    # points, not bars from zero: close candidates stay apart, each with its spread
    for p, c, color in zip(pos, ordered, colors):
        bx.errorbar([c["ns"] / scale], [p], xerr=[c["std_ns"] / scale], fmt="o", color=color, capsize=2,
                    ms=7 if color == ORANGE else 4.5, lw=1)
    bx.set_ylim(-0.7, len(ordered) - 0.3)
    bx.set_yticks(pos, labels)
    bx.set_ylabel("×".join(macros))
    bx.set_xlabel(f"time per iteration ({unit}), ± std over iterations")
    if default_ns:
        bx.axvline(default_ns / scale, ls="--", color=GREY, lw=1.2, label=f"default: {fmt_ns(default_ns)}")
        bx.legend(loc="upper left", bbox_to_anchor=(0.0, below))
    shown = f"the {len(ordered)} fastest of {len(cands)}" if len(cands) > len(ordered) else "every candidate"
    bx.set_title(f"{shown}; chosen in orange", loc="left")
    bx.grid(alpha=0.3)
    return fig


# ---------------------------------------------------------------------------
# Writing: report.html (Jinja, autoescaped), report.md, summary_json
# ---------------------------------------------------------------------------


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def write_report(results_dir: Path, *, space: Space | None = None, jobs_dir: Path | None = None) -> Path:
    """results_dir/report.html (self-contained) and results_dir/report.md; returns the HTML's path."""
    sw = load(results_dir, space=space, jobs_dir=jobs_dir)
    failed, skipped = failure_rows(sw)
    kernels, measured = measured_rows(sw)
    n = counts(sw)
    ctx = {
        "name": sw.name, "header": header(sw), "counts": counts_line(n), "n": n, "missing": missing(sw),
        "provisional": sw.provisional, "groups": groups(sw), "best_rows": best_rows(sw),
        "best_notes": list((sw.best or {}).get("notes", [])), "unmeasured": list((sw.best or {}).get("unmeasured", [])),
        "confirmation": confirmation_rows(sw), "failed": failed, "skipped": skipped, "conf_text": sw.conf_text,
        "measured_kernels": kernels, "measured": measured,
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    html_text = _env().get_template("report.html.j2").render(**ctx)
    out = Path(results_dir) / "report.html"
    atomic.write_text(out, html_text)
    atomic.write_text(Path(results_dir) / "report.md", markdown(sw, ctx))
    return out


def _md_cell(v: Any) -> str:
    """A markdown table cell: pipes and newlines escaped, and '<' where it could open an HTML tag."""
    text = str(v).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text)


def _md_table(headers: list[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(_md_cell(v) for v in r) + " |" for r in rows]
    return out


def markdown(sw: SweepData, ctx: dict[str, Any]) -> str:
    lines = [f"# Sweep {sw.name}", ""]
    lines += [f"- **{k}**: {_md_cell(v)}" for k, v in ctx["header"] if k not in ("Results", "Jobs")]
    lines += [f"- **Counts**: {ctx['counts']}", ""]
    if ctx["missing"]:
        lines += ["**Incomplete:**", ""] + [f"- {_md_cell(m)}" for m in ctx["missing"]] + [""]
    lines += ["## Best launch sizes" + (" (provisional)" if sw.provisional else ""), ""]
    if ctx["best_rows"]:
        lines += _md_table(["kernel(s)", "chosen", "time/iter", "runner-up", "runner-up time", "margin", "beyond noise",
                            "default time", "speed-up vs default"],
                           [[r["kernels"], r["chosen"], r["time"], r["runner_up"], r["runner_up_time"], r["margin"],
                             r["beyond_noise"] + (f" ({r['noise']})" if r["noise"] else ""), r["default"], r["speedup"]]
                            for r in ctx["best_rows"]])
    else:
        lines.append("No picks yet.")
    lines += [""] + [f"- note: {_md_cell(n)}" for n in ctx["best_notes"]]
    lines += ["", "## End-to-end confirmation", ""]
    lines += _md_table(["", "per iteration", ""], ctx["confirmation"]) if ctx["confirmation"] else \
        ["Not run yet (no confirmation.json)."]
    lines += ["", f"## Failures ({len(ctx['failed'])})", ""]
    lines += _md_table(["tag", "role", "status", "stage", "reason", "log"],
                       [[f["tag"], f["role"], f["status"], f["stage"], f["reason"], f["log"]] for f in ctx["failed"]]) \
        if ctx["failed"] else ["None."]
    lines += ["", f"## Skipped ({len(ctx['skipped'])})", ""]
    lines += _md_table(["tag", "stage", "reason"], [[f["tag"], f["stage"], f["reason"]] for f in ctx["skipped"]]) \
        if ctx["skipped"] else ["None."]
    if sw.conf_text:
        lines += ["", "## best/conf.cuh", "", "```c", sw.conf_text.rstrip(), "```"]
    lines += ["", f"Full report: {sw.results_dir / 'report.html'}", ""]
    return "\n".join(lines)


def summary_json(results_dir: Path) -> dict[str, Any]:
    """The report's content as plain data: picks, confirmation, counts, failures, what is missing."""
    sw = load(results_dir)
    failed, skipped = failure_rows(sw)
    choices = []
    for ch in (sw.best or {}).get("choices", []):
        ru = ch.get("runner_up")
        choices.append({
            "macros": list(ch["macros"]), "kernels": list(ch.get("kernels", [])), "values": ch["values"],
            "ns": ch["best"]["ns"], "std_ns": ch["best"]["std_ns"], "tag": ch["best"].get("tag"),
            "runner_up": {"values": ru["values"], "ns": ru["ns"]} if ru else None, "margin": ch.get("margin"),
            "noise_ns": ch.get("noise_ns"), "beyond_noise": ch.get("beyond_noise"), "default_ns": ch.get("default_ns"),
            "speedup_vs_default": ch.get("speedup_vs_default"), "note": ch.get("note", ""),
        })
    s = _sweep_rows(sw.configs)
    pending = sorted(s[s["status"].isin(["pending", "running"])]["tag"].astype(str)) if not s.empty else []
    return {
        "schema": "sweep-report/1", "sweep": sw.name, "results_dir": str(sw.results_dir),
        "report_html": str(sw.results_dir / "report.html"), "report_md": str(sw.results_dir / "report.md"),
        "header": {k: v for k, v in header(sw)}, "counts": counts(sw), "missing": missing(sw),
        "provisional": sw.provisional, "config": (sw.best or {}).get("config"), "choices": choices,
        "unmeasured": list((sw.best or {}).get("unmeasured", [])), "notes": list((sw.best or {}).get("notes", [])),
        "confirmation": sw.confirmation, "failures": failed, "skipped": skipped, "pending": pending,
    }


# ---------------------------------------------------------------------------
# Two sweeps side by side
# ---------------------------------------------------------------------------


def _load_for_compare(results_root: Path, name: str) -> SweepData:
    if not NAME_RE.match(name):
        raise SweepError(f"{name!r} is not a sweep name (letters, digits, '.', '_' or '-')")
    d = Path(results_root) / name
    if not (d / "configs.parquet").is_file():
        raise SweepError(f"no collected results for sweep {name!r} in {d}: run `python config_sweep.py report {name}` "
                         f"(or `python config_sweep.py collect {name}`) first")
    sw = load(d)
    if not sw.best:
        raise SweepError(f"sweep {name!r} has no picks yet ({d / 'best.json'} is missing and none can be selected): "
                         f"run `python config_sweep.py collect {name}` once it has measurements")
    return sw


def _identity(sw: SweepData) -> dict[str, str]:
    h = dict(header(sw))
    return {k: h[k] for k in ("GPU", "Driver", "CUDA runtime", "Commit", "Host(s)", "Backend", "Strategy")} | \
        {"Counts": counts_line(counts(sw))}


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None else None


def compare_summary(results_root: Path, a: str, b: str) -> dict[str, Any]:
    """Groups present in both sweeps: picks, best times and the ratio b/a; common candidates
    side by side; groups and kernels present in only one."""
    sa, sb = _load_for_compare(results_root, a), _load_for_compare(results_root, b)
    ca = {tuple(c["macros"]): c for c in sa.best["choices"]}
    cb = {tuple(c["macros"]): c for c in sb.best["choices"]}
    common = []
    for macros, x in ca.items():
        y = cb.get(macros)
        if y is None:
            continue
        cx = {tuple(c["values"][m] for m in macros): c for c in x.get("candidates", [])}
        cy = {tuple(c["values"][m] for m in macros): c for c in y.get("candidates", [])}
        shared = [{"values": dict(zip(macros, k)), "ns_a": cx[k]["ns"], "ns_b": cy[k]["ns"],
                   "std_a": cx[k]["std_ns"], "std_b": cy[k]["std_ns"], "ratio": _ratio(cx[k]["ns"], cy[k]["ns"])}
                  for k in sorted(set(cx) & set(cy))]
        common.append({"macros": list(macros), "kernels_a": list(x.get("kernels", [])),
                       "kernels_b": list(y.get("kernels", [])), "values_a": x["values"], "values_b": y["values"],
                       "ns_a": x["best"]["ns"], "ns_b": y["best"]["ns"], "ratio": _ratio(x["best"]["ns"], y["best"]["ns"]),
                       "same_pick": x["values"] == y["values"], "candidates": shared})

    def kernels(sw: SweepData) -> set[str]:
        return set(sw.measurements["kernel"].astype(str)) if not sw.measurements.empty else set()

    ka, kb = kernels(sa), kernels(sb)
    conf = {}
    for key in ("best_total_ns", "default_total_ns", "sum_of_group_bests_ns", "best_forward_ms", "default_forward_ms"):
        va, vb = (sa.confirmation or {}).get(key), (sb.confirmation or {}).get(key)
        if va is not None or vb is not None:
            conf[key] = {"a": va, "b": vb, "ratio": _ratio(va, vb)}
    return {
        "schema": "sweep-compare/1", "a": a, "b": b, "identity": {"a": _identity(sa), "b": _identity(sb)},
        "groups": common,
        "groups_only_a": [{"macros": list(k), "kernels": list(c.get("kernels", []))} for k, c in ca.items() if k not in cb],
        "groups_only_b": [{"macros": list(k), "kernels": list(c.get("kernels", []))} for k, c in cb.items() if k not in ca],
        "kernels_only_a": sorted(ka - kb), "kernels_only_b": sorted(kb - ka), "confirmation": conf,
        "notes": [f"{a}: {n}" for n in sa.notes] + [f"{b}: {n}" for n in sb.notes],
    }


def plot_compare(s: dict[str, Any]) -> Figure:
    """Grouped bars: each common group's best time in both sweeps, the ratio b/a above."""
    gs = s["groups"]
    scale, unit = time_unit(max([max(g["ns_a"], g["ns_b"]) for g in gs] + [1]))
    fig = Figure(figsize=(max(6.0, 1.1 * len(gs) + 2.5), 3.6))
    ax = fig.add_subplot()
    w = 0.38
    pos = range(len(gs))
    ax.bar([p - w / 2 for p in pos], [g["ns_a"] / scale for g in gs], w, color=BLUE, label=s["a"])
    ax.bar([p + w / 2 for p in pos], [g["ns_b"] / scale for g in gs], w, color=ORANGE, label=s["b"])
    for p, g in zip(pos, gs):
        ax.annotate(fmt_ratio(g["ratio"]), xy=(p, max(g["ns_a"], g["ns_b"]) / scale), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8)
    labels = [_short(", ".join(g["kernels_a"]) or ", ".join(g["macros"])) for g in gs]
    ax.set_xticks(list(pos), labels, rotation=25 if len(gs) > 4 else 0, ha="right" if len(gs) > 4 else "center")
    ax.set_ylabel(f"best time per iteration ({unit})")
    ax.set_title(f"best pick per group; label: time ratio {s['b']}/{s['a']}", loc="left")
    times = [t for g in gs for t in (g["ns_a"], g["ns_b"]) if t > 0]
    if times and max(times) / min(times) > 100:  # microsecond kernels beside a millisecond matmul
        from matplotlib.ticker import FuncFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # plain text: SVG keeps labels as text
        ax.set_ylabel(f"best time per iteration ({unit}, log scale)")
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi * 2.0)
    else:
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi * 1.12)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def _short(text: str, n: int = 32) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def write_compare(results_root: Path, a: str, b: str) -> Path:
    """results_root/compare-<a>-vs-<b>.html (self-contained) and .md; returns the HTML's path."""
    s = compare_summary(results_root, a, b)
    with _plot_style():
        svg = Markup(svg_of(plot_compare(s), f"compare-{a}-{b}")) if s["groups"] else None
    groups = [{
        "title": ", ".join(g["macros"]), "kernels": ", ".join(sorted(set(g["kernels_a"]) | set(g["kernels_b"]))),
        "pick_a": fmt_values(g["values_a"]), "pick_b": fmt_values(g["values_b"]), "same_pick": g["same_pick"],
        "ns_a": fmt_ns(g["ns_a"]), "ns_b": fmt_ns(g["ns_b"]), "ratio": fmt_ratio(g["ratio"]),
        "candidates": [{"label": fmt_values(c["values"]), "ns_a": fmt_ns(c["ns_a"]), "ns_b": fmt_ns(c["ns_b"]),
                        "ratio": fmt_ratio(c["ratio"])} for c in g["candidates"]],
    } for g in s["groups"]]
    conf = [(CONF_LABELS.get(k, k), _fmt_conf(k, v["a"]), _fmt_conf(k, v["b"]), fmt_ratio(v["ratio"]))
            for k, v in s["confirmation"].items()]
    keys = list(s["identity"]["a"])
    ctx = {"a": a, "b": b, "identity": [(k, s["identity"]["a"][k], s["identity"]["b"][k]) for k in keys],
           "svg": svg, "groups": groups, "conf": conf, "only_a": s["groups_only_a"], "only_b": s["groups_only_b"],
           "kernels_only_a": s["kernels_only_a"], "kernels_only_b": s["kernels_only_b"], "notes": s["notes"],
           "generated": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    root = Path(results_root)
    out = root / f"compare-{a}-vs-{b}.html"
    atomic.write_text(out, _env().get_template("compare.html.j2").render(**ctx))
    atomic.write_text(root / f"compare-{a}-vs-{b}.md", compare_markdown(ctx))
    return out


CONF_LABELS = {"best_total_ns": "combined best (swept kernels per iteration)",
               "default_total_ns": "default launch sizes (swept kernels per iteration)",
               "sum_of_group_bests_ns": "sum of per-group bests", "best_forward_ms": "forward pass, combined best",
               "default_forward_ms": "forward pass, default launch sizes"}


def _fmt_conf(key: str, v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.4g} ms" if key.endswith("_ms") else fmt_ns(v)


def compare_markdown(ctx: dict[str, Any]) -> str:
    a, b = ctx["a"], ctx["b"]
    lines = [f"# {a} vs {b}", ""] + _md_table(["", a, b], ctx["identity"]) + [""]
    lines += ["## Best pick per parameter group", ""]
    lines += _md_table(["group", "kernel(s)", f"{a} pick", f"{a} time", f"{b} pick", f"{b} time", f"time {b}/{a}"],
                       [[g["title"], g["kernels"], g["pick_a"], g["ns_a"], g["pick_b"], g["ns_b"], g["ratio"]]
                        for g in ctx["groups"]]) if ctx["groups"] else ["No parameter group is in both sweeps."]
    for g in ctx["groups"]:
        lines += ["", f"### {g['title']} ({g['kernels']}): common candidates", ""]
        lines += _md_table(["values", a, b, f"{b}/{a}"], [[c["label"], c["ns_a"], c["ns_b"], c["ratio"]]
                                                         for c in g["candidates"]]) if g["candidates"] else ["None."]
    if ctx["conf"]:
        lines += ["", "## End to end", ""] + _md_table(["", a, b, f"{b}/{a}"], ctx["conf"])
    for label, items in ((f"only in {a}", ctx["only_a"]), (f"only in {b}", ctx["only_b"])):
        if items:
            lines += ["", f"Groups {label}: " + _md_cell("; ".join(f"{', '.join(g['macros'])} ({', '.join(g['kernels'])})"
                                                                 for g in items))]
    for label, items in ((f"only in {a}", ctx["kernels_only_a"]), (f"only in {b}", ctx["kernels_only_b"])):
        if items:
            lines += ["", f"Kernels measured {label}: {_md_cell(', '.join(items))}"]
    lines += [""] + [f"- note: {_md_cell(n)}" for n in ctx["notes"]]
    return "\n".join(lines) + "\n"
