"""Two sweeps side by side: results/compare-<a>-vs-<b>.html and .md.

    compare_summary(root, a, b)   groups in both sweeps (picks, best times, the ratio b/a, common
                                  candidates), groups and kernels in only one (`compare --format json`)
    write_compare(root, a, b)     the comparison as a self-contained page and markdown
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from markupsafe import Markup

from sweep.core import atomic
from sweep.core.errors import SweepError
from sweep.report.fmt import fmt_ns, fmt_ratio, fmt_values
from sweep.report.loading import SweepData, load
from sweep.report.plots import plot_compare, plot_style, svg_of
from sweep.report.tables import counts, counts_line, header
from sweep.report.writers import jinja_env, md_cell, md_table
from sweep.space import NAME_RE
from sweep.core.paths import COMMAND

CONF_LABELS = {"best_total_ns": "combined best (swept kernels per iteration)",
               "default_total_ns": "default launch sizes (swept kernels per iteration)",
               "sum_of_group_bests_ns": "sum of per-group bests", "best_forward_ms": "forward pass, combined best",
               "default_forward_ms": "forward pass, default launch sizes"}


def _load_for_compare(results_root: Path, name: str) -> SweepData:
    if not NAME_RE.match(name):
        raise SweepError(f"{name!r} is not a sweep name (letters, digits, '.', '_' or '-')")
    d = Path(results_root) / name
    if not (d / "configs.parquet").is_file():
        raise SweepError(f"no collected results for sweep {name!r} in {d}: run `{COMMAND} report {name}` "
                         f"(or `{COMMAND} collect {name}`) first")
    sw = load(d)
    if not sw.best:
        raise SweepError(f"sweep {name!r} has no picks yet ({d / 'best.json'} is missing and none can be selected): "
                         f"run `{COMMAND} collect {name}` once it has measurements")
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


def write_compare(results_root: Path, a: str, b: str) -> Path:
    """results_root/compare-<a>-vs-<b>.html (self-contained) and .md; returns the HTML's path."""
    s = compare_summary(results_root, a, b)
    with plot_style():
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
    atomic.write_text(out, jinja_env().get_template("compare.html.j2").render(**ctx))
    atomic.write_text(root / f"compare-{a}-vs-{b}.md", compare_markdown(ctx))
    return out


def _fmt_conf(key: str, v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.4g} ms" if key.endswith("_ms") else fmt_ns(v)


def compare_markdown(ctx: dict[str, Any]) -> str:
    a, b = ctx["a"], ctx["b"]
    lines = [f"# {a} vs {b}", ""] + md_table(["", a, b], ctx["identity"]) + [""]
    lines += ["## Best pick per parameter group", ""]
    lines += md_table(["group", "kernel(s)", f"{a} pick", f"{a} time", f"{b} pick", f"{b} time", f"time {b}/{a}"],
                       [[g["title"], g["kernels"], g["pick_a"], g["ns_a"], g["pick_b"], g["ns_b"], g["ratio"]]
                        for g in ctx["groups"]]) if ctx["groups"] else ["No parameter group is in both sweeps."]
    for g in ctx["groups"]:
        lines += ["", f"### {g['title']} ({g['kernels']}): common candidates", ""]
        lines += md_table(["values", a, b, f"{b}/{a}"], [[c["label"], c["ns_a"], c["ns_b"], c["ratio"]]
                                                         for c in g["candidates"]]) if g["candidates"] else ["None."]
    if ctx["conf"]:
        lines += ["", "## End to end", ""] + md_table(["", a, b, f"{b}/{a}"], ctx["conf"])
    for label, items in ((f"only in {a}", ctx["only_a"]), (f"only in {b}", ctx["only_b"])):
        if items:
            lines += ["", f"Groups {label}: " + md_cell("; ".join(f"{', '.join(g['macros'])} ({', '.join(g['kernels'])})"
                                                                 for g in items))]
    for label, items in ((f"only in {a}", ctx["kernels_only_a"]), (f"only in {b}", ctx["kernels_only_b"])):
        if items:
            lines += ["", f"Kernels measured {label}: {md_cell(', '.join(items))}"]
    lines += [""] + [f"- note: {md_cell(n)}" for n in ctx["notes"]]
    return "\n".join(lines) + "\n"
