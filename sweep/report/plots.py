"""The report's figures: matplotlib Figure objects (no pyplot state) and their inline SVG.

    plot_1d(choice, fails)            time against a group's one macro, the pick and the default
    plot_2d(choice, fails, default)   heatmap over a group's first two macros beside every candidate
    plot_compare(summary)             each common group's best time in two sweeps, the ratio above
    svg_of(fig, salt)                 a figure as an <svg> element, ids unique per salt, deterministic

Draw inside `with plot_style():`; SVG text stays text (no embedded fonts).
"""

from __future__ import annotations

import io
import math
import re
from contextlib import contextmanager
from typing import Any, Iterator

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from sweep.records import OWN_SIZES
from sweep.report.fmt import fmt_ns, fmt_ratio, main_status, time_unit

MAX_BARS = 30            # candidates drawn in a group's bar chart (the fastest)

BLUE, ORANGE, GREY, RED = "#3b6ea8", "#e07000", "#777777", "#c0392b"
STATUS_COLORS = {"skipped": "#999999", "pending": "#5dade2", "running": "#5dade2"}   # failures: RED


@contextmanager
def plot_style() -> Iterator[None]:
    """The report's matplotlib settings: small fonts, no top/right spines, SVG text kept as text."""
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


def time_label(ch: dict) -> str:
    """What a group's times are: per iteration, or (with workloads) the weighted objective."""
    return "Σ weight × time per iteration" if ch.get("workloads") else "time per iteration"


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
    own = not ch["values"]     # the race kept the program's own launch sizes: no value of the axis
    if not own:
        bx = ch["values"][m]
        ax.errorbar([bx], [b["ns"] / scale], yerr=[b["std_ns"] / scale], fmt="o", color=ORANGE, ms=10, capsize=4,
                    zorder=4, label=f"chosen {m}={bx}")
        # the pick is the lowest point: its label goes below it, where no line runs
        ax.annotate(f"chosen {bx}: {fmt_ns(b['ns'])}", xy=(bx, b["ns"] / scale), xytext=(0, -14),
                    textcoords="offset points", ha="center", va="top", color=ORANGE, fontweight="bold", fontsize=8.5)
    if default_ns:
        ax.axhline(default_ns / scale, ls="--", color=ORANGE if own else GREY, lw=2 if own else 1.2,
                   label=f"{_default_label(own)}: {fmt_ns(default_ns)}")
    seen = set()
    for (v,), e in fails.items():
        st = main_status(e["statuses"])
        ax.plot([v], [0], marker="X", ms=9, ls="", color=_status_color(st), clip_on=False, zorder=5,
                transform=ax.get_xaxis_transform(), label=None if st in seen else f"not measured: {st}")
        seen.add(st)
    _x_axis(ax, xs + [v for (v,) in fails])
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo - (hi - lo) * 0.3, hi)   # room for the pick's label and the × of unmeasured values
    ax.set_xlabel(m)
    ax.set_ylabel(f"{time_label(ch)} ({unit})")
    ax.set_title(", ".join(ch.get("kernels", [])) or m, loc="left")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def _default_label(own: bool, plain: str = "default launch sizes") -> str:
    """The default's line: the pick itself where the race kept the program's own launch sizes."""
    return f"chosen: {OWN_SIZES}" if own else plain


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
                st = main_status(fails[(x, y)]["statuses"])
                ax.text(i, j, f"×\n{st}", ha="center", va="center", fontsize=7, color=_status_color(st))
    own = not ch["values"]     # the race kept the program's own launch sizes: no cell of the map
    handles = []
    if not own:
        chosen = (ch["values"][mx], ch["values"][my])
        ax.add_patch(Rectangle((xs.index(chosen[0]) - 0.45, ys.index(chosen[1]) - 0.45), 0.9, 0.9, fill=False,
                               ec=ORANGE, lw=3))
        handles.append(Rectangle((0, 0), 1, 1, fill=False, ec=ORANGE, lw=3, label="chosen"))
    if default and (default[mx], default[my]) in {(x, y) for x in xs for y in ys}:
        i, j = xs.index(default[mx]), ys.index(default[my])
        dark = not math.isnan(grid[j][i]) and grid[j][i] > mid
        ax.add_patch(Rectangle((i - 0.42, j - 0.42), 0.84, 0.84, fill=False, ec="white" if dark else "black", lw=1.5,
                               ls="--"))
        handles.append(Rectangle((0, 0), 1, 1, fill=False, ec="black", lw=1.5, ls="--", label="default"))
    rest = f" (best over {', '.join(macros[2:])})" if len(macros) > 2 else ""
    ax.set_title(f"{time_label(ch)} ({unit}){rest}", loc="left")
    below = -0.75 / height    # legends just under the x label, whatever the figure's height
    if handles:
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
        bx.axvline(default_ns / scale, ls="--", color=ORANGE if own else GREY, lw=2 if own else 1.2,
                   label=f"{_default_label(own, 'default')}: {fmt_ns(default_ns)}")
        bx.legend(loc="upper left", bbox_to_anchor=(0.0, below))
    shown = f"the {len(ordered)} fastest of {len(cands)}" if len(cands) > len(ordered) else "every candidate"
    bx.set_title(f"{shown}; chosen in orange", loc="left")
    bx.grid(alpha=0.3)
    return fig


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
