"""Writing a sweep's report: report.html (Jinja, autoescaped), report.md, and summary_json.

    write_report(results_dir)   results_dir/report.html (self-contained) and report.md
    summary_json(results_dir)   the same content as plain data (`report --format json`)

TEMPLATES is the one place that locates templates/; jinja_env() loads from it.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import jinja2

from sweep.core import atomic, paths
from sweep.report.loading import SweepData, load
from sweep.report.per_workload import declared, describe
from sweep.report.tables import (best_rows, confirmation_rows, counts, counts_line, failure_rows, groups, header,
                                 measured_rows, missing, sweep_rows)
from sweep.space import Space

TEMPLATES = paths.TEMPLATES


def jinja_env() -> jinja2.Environment:
    """The templates under TEMPLATES, autoescaped: every string from the data is escaped."""
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
        "measured_kernels": kernels, "measured": measured, "built": built_rows(sw), "workloads": [describe(w) for w in declared(sw)],
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    html_text = jinja_env().get_template("report.html.j2").render(**ctx)
    out = Path(results_dir) / "report.html"
    atomic.write_text(out, html_text)
    atomic.write_text(Path(results_dir) / "report.md", markdown(sw, ctx))
    return out


def md_cell(v: Any) -> str:
    """A markdown table cell: pipes and newlines escaped, and '<' where it could open an HTML tag."""
    text = str(v).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text)


def md_table(headers: list[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(md_cell(v) for v in r) + " |" for r in rows]
    return out


def built_rows(sw: SweepData) -> list[tuple[str, str]]:
    """(tag, its kernels' registers, spills and shared memory) of the configurations a dry run built."""
    c = sw.configs
    if c.empty or "resources" not in c:
        return []
    built = c[c["status"] == "built"].sort_values("tag")
    return [(str(r["tag"]), str(r["resources"] or "no ptxas lines in its build.log")) for _, r in built.iterrows()]


def markdown(sw: SweepData, ctx: dict[str, Any]) -> str:
    lines = [f"# Sweep {sw.name}", ""]
    lines += [f"- **{k}**: {md_cell(v)}" for k, v in ctx["header"] if k not in ("Results", "Jobs")]
    lines += [f"- **Counts**: {ctx['counts']}", ""]
    if ctx["missing"]:
        lines += ["**Incomplete:**", ""] + [f"- {md_cell(m)}" for m in ctx["missing"]] + [""]
    if ctx["built"]:
        lines += ["## Built by a dry run: each kernel as the compiler sized it", ""]
        lines += md_table(["configuration", "kernels (registers, spills, shared memory)"], ctx["built"]) + [""]
    lines += ["## Best launch sizes" + (" (provisional)" if sw.provisional else ""), ""]
    if ctx["best_rows"]:
        lines += md_table(["kernel(s)", "chosen", "time/iter", "runner-up", "runner-up time", "margin", "beyond noise",
                            "certified", "default time", "speed-up vs default"],
                           [[r["kernels"], r["chosen"], r["time"], r["runner_up"], r["runner_up_time"], r["margin"],
                             r["beyond_noise"] + "".join(f" ({x})" for x in (r["noise"], r["evidence"]) if x),
                             r["certified"] + (f" ({r['regret']})" if r["regret"] else ""), r["default"], r["speedup"]]
                            for r in ctx["best_rows"]])
    else:
        lines.append("No picks yet.")
    if ctx["workloads"]:
        lines += ["", "Workloads: " + md_cell("; ".join(ctx["workloads"])) + ". Times above are Σ weight × per-iteration "
                  "time over them; per group, each workload's own pick and the overall pick's regret there:"]
        for g in ctx["groups"]:
            if g["workloads"]:
                lines += ["", f"**{md_cell(g['title'])}** (overall: {md_cell(g['chosen'])})", ""]
                lines += md_table(["workload", "weight", "its own pick", "its time", "evidence there",
                                   "overall pick's time", "regret"],
                                  [[w["workload"], w["weight"], w["pick"], w["ns"], w["evidence"], w["overall_ns"],
                                    w["regret"]] for w in g["workloads"]])
    lines += [""] + [f"- note: {md_cell(n)}" for n in ctx["best_notes"]]
    lines += ["", "## End-to-end confirmation", ""]
    lines += md_table(["", "per iteration", ""], ctx["confirmation"]) if ctx["confirmation"] else \
        ["Not run yet (no confirmation.json)."]
    lines += ["", f"## Failures ({len(ctx['failed'])})", ""]
    lines += md_table(["tag", "role", "status", "stage", "reason", "log"],
                       [[f["tag"], f["role"], f["status"], f["stage"], f["reason"], f["log"]] for f in ctx["failed"]]) \
        if ctx["failed"] else ["None."]
    lines += ["", f"## Skipped ({len(ctx['skipped'])})", ""]
    lines += md_table(["tag", "stage", "reason"], [[f["tag"], f["stage"], f["reason"]] for f in ctx["skipped"]]) \
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
            "speedup_vs_default": ch.get("speedup_vs_default"), "is_default": ch.get("is_default", False),
            "default_verdict": ch.get("default_verdict", ""), "note": ch.get("note", ""),
            "verdict": ch.get("verdict"), "noise_source": ch.get("noise_source"),
            "margin_ci": [ch.get("margin_ci_low"), ch.get("margin_ci_high")], "confidence": ch.get("confidence"),
            "certification": ch.get("certification"), "shapes": ch.get("shapes", []), "nodes": ch.get("nodes", []),
            "workloads": ch.get("workloads", []),
        })
    s = sweep_rows(sw.configs)
    pending = sorted(s[s["status"].isin(["pending", "running", "built"])]["tag"].astype(str)) if not s.empty else []
    return {
        "schema": "sweep-report/1", "sweep": sw.name, "results_dir": str(sw.results_dir),
        "report_html": str(sw.results_dir / "report.html"), "report_md": str(sw.results_dir / "report.md"),
        "header": {k: v for k, v in header(sw)}, "counts": counts(sw), "missing": missing(sw),
        "provisional": sw.provisional, "config": (sw.best or {}).get("config"), "choices": choices,
        "workloads": declared(sw),
        "unmeasured": list((sw.best or {}).get("unmeasured", [])), "notes": list((sw.best or {}).get("notes", [])),
        "confirmation": sw.confirmation, "failures": failed, "skipped": skipped, "pending": pending,
    }
