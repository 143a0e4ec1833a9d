"""The report's sections as plain data, for the HTML template, the markdown and the JSON summary.

    header(sw)             where and how the sweep ran (label, value) rows
    counts(sw)             ok, failed by status, skipped, pending, running; counts_line(n) as one line
    missing(sw)            what the report cannot show yet, and why
    groups(sw)             per parameter group: its plot (SVG), candidates, never-measured values
                           and, with workloads, each workload's pick and regret (report.per_workload)
    best_rows(sw)          the best table, one row per group: pick, evidence (verdict, noise
                           source, the margin's interval), certification, worst shape regret
    shape_rows(choice)     per kernel x launch shape: its best value and the pick's regret
    race_rows(choice)      a raced group's entrants with their race medians
    confirmation_rows(sw)  the end-to-end confirmation
    failure_rows(sw)       (failed, skipped) jobs with their reasons and logs
    measured_rows(sw)      every ok job's per-iteration time per kernel
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd
from markupsafe import Markup

from sweep.decide.select import end_to_end_words, verdict_in_brackets
from sweep.records.evidence import VERDICTS, verdict_words
from sweep.report.fmt import (NOT_FAILED, by_weight, clean_value, fmt_ci, fmt_ms, fmt_ns, fmt_pct, fmt_ratio,
                              fmt_values, listed, main_status, value_list)
from sweep.report import gpu_held
from sweep.report.loading import SweepData
from sweep.report.per_workload import declared, describe, workload_rows, worst_workload
from sweep.report.plots import plot_1d, plot_2d, plot_style, svg_of
from sweep.space import Space


def _uniq(series: pd.Series | None) -> list[str]:
    if series is None:
        return []
    return sorted({str(v) for v in series.dropna() if str(v).strip() and str(v) != "nan"})


def sweep_rows(configs: pd.DataFrame) -> pd.DataFrame:
    return configs[configs["role"].fillna("sweep") == "sweep"] if not configs.empty else configs


def _col(df: pd.DataFrame, name: str) -> pd.Series | None:
    return df[name] if name in df else None


def macro_columns(configs: pd.DataFrame) -> list[str]:
    """Macro columns of the tables (collect writes every other column in lower case)."""
    return [c for c in configs.columns if re.fullmatch(r"[A-Z_][A-Z0-9_]*", str(c))]


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
        ("Strategy", strategy + (f" ({m['note']})" if m.get("note") else "")
         + (f"; {stopped}" if (stopped := (m.get("runs") or [{}])[-1].get("stopped")) else "")),   # why it stopped
        ("Backend", (", ".join(_uniq(_col(done, "backend"))) or m.get("backend") or "unknown")
         + (f" (capture: {', '.join(_uniq(_col(done, 'capture')))})" if _uniq(_col(done, "capture")) else "")),
        ("Executor", m.get("executor") or "unknown"),
        ("Started", m.get("created") or "—"), ("Last result", finished[-1] if finished else "—"),
        ("Collected", collected), ("Results", str(sw.results_dir)),
    ]
    if sw.jobs_dir is not None:
        rows.append(("Jobs", str(sw.jobs_dir)))
    workloads = declared(sw)
    if workloads:
        rows.insert(rows.index(("Executor", m.get("executor") or "unknown")),
                    ("Workloads", "; ".join(describe(w) for w in workloads)))
    held = gpu_held.row(done)
    if held:
        rows.insert(rows.index(("Executor", m.get("executor") or "unknown")), held)
    uuids = _uniq(_col(done, "gpu_uuid"))
    if uuids:
        rows.insert(2, ("GPU UUID(s)", ", ".join(uuids)))
    runs, samples = (int(done[col].fillna(0).sum()) if col in done else 0
                     for col in ("throttled_runs", "throttled_samples"))
    if runs or samples:    # samples: timed iterations dropped alone, and every sample of a run measured again
        rows.append(("Throttled", f"{samples} sample(s) taken under 75% of the default SM clock dropped; "
                                  f"{runs} run(s) measured again"))
    return rows


def counts(sw: SweepData) -> dict[str, Any]:
    """How many of the sweep's configurations are done, failed, skipped, still to come."""
    s = sweep_rows(sw.configs)
    by = s["status"].value_counts().to_dict() if not s.empty else {}
    failed = {k: int(v) for k, v in by.items() if k not in NOT_FAILED}
    extra = sw.configs[sw.configs["role"].isin(["baseline", "best"])] if not sw.configs.empty else sw.configs
    return {
        "planned": int(len(s)), "ok": int(by.get("ok", 0)), "failed": sum(failed.values()), "failed_by_status": failed,
        "skipped": int(by.get("skipped", 0)), "pending": int(by.get("pending", 0)), "running": int(by.get("running", 0)),
        "built": int(by.get("built", 0)),
        "confirmation_jobs": {str(r["tag"]): str(r["status"]) for _, r in extra.iterrows()},
        "grid_size": sw.manifest.get("grid_size"),
    }


def counts_line(n: dict[str, Any]) -> str:
    failed = ", ".join(f"{v} {k}" for k, v in sorted(n["failed_by_status"].items()))
    parts = [f"{n['ok']} ok", f"{n['failed']} failed" + (f" ({failed})" if failed else ""), f"{n['skipped']} skipped",
             f"{n['pending']} pending", f"{n['running']} running"] + \
        ([f"{n['built']} built by a dry run (not measured)"] if n.get("built") else [])
    line = f"{n['planned']} configurations: " + ", ".join(parts)
    if n["confirmation_jobs"]:
        line += "; confirmation jobs: " + ", ".join(f"{t} {s}" for t, s in n["confirmation_jobs"].items())
    return line


def missing(sw: SweepData) -> list[str]:
    """What this report cannot show yet, and why; empty for a finished sweep."""
    out = list(sw.notes)
    s = sweep_rows(sw.configs)
    for st in ("pending", "running", "built"):
        tags = sorted(s[s["status"] == st]["tag"].astype(str)) if not s.empty else []
        if tags:
            verb = {"pending": "still pending", "running": "still running",
                    "built": "built by a dry run, not measured yet"}[st]
            out.append(f"{len(tags)} of {len(s)} configurations {verb}: {listed(tags)}")
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
    s = sweep_rows(sw.configs)
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


def groups(sw: SweepData) -> list[dict[str, Any]]:
    """Per parameter group (a Choice of best.json): its plot, candidates and unmeasured values."""
    if not sw.best:
        return []
    out = []
    workloads = declared(sw)
    for i, ch in enumerate(sw.best.get("choices", [])):
        macros = tuple(ch["macros"])
        cands = ch.get("candidates") or [ch["best"]]
        measured = {tuple(int(c["values"][m]) for m in macros[:2]) for c in cands}
        fails = _group_failures(sw, macros, measured)
        default = _defaults(sw.space, macros)
        salt = f"{sw.name}-group-{i}"
        with plot_style():
            fig = plot_1d(ch, fails) if len(macros) == 1 else plot_2d(ch, fails, default)
            svg = svg_of(fig, salt)
        not_measured = [{"label": ", ".join(f"{m}={v}" for m, v in zip(macros, vals)),
                         "statuses": ", ".join(f"{k} ×{e['statuses'][k]}" for k in by_weight(e["statuses"])),
                         "reason": e["reasons"].get(main_status(e["statuses"]), "")}
                        for vals, e in fails.items()]
        best_ns = ch["best"]["ns"]
        out.append({
            "title": ", ".join(macros), "macros": macros, "kernels": ", ".join(ch.get("kernels", [])) or "—",
            "svg": Markup(svg), "chosen": fmt_values(ch["values"]), "note": ch.get("note", ""),
            "not_measured": not_measured,
            "shapes": shape_rows(ch), "race": race_rows(ch), "certification": ch.get("certification"),
            "workloads": workload_rows(ch, workloads),
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
        return space.declared_defaults(macros)
    except KeyError:     # a recorded sweep's macro the space file no longer has
        return None


# The "beyond noise" column: evidence.verdict_words, in a cell's words.
BEYOND_NOISE_CELL = {"beyond noise": "yes", "beyond one run's noise": "yes, one run's", "within noise": "no",
                     "noise unknown": "unknown"}


def beyond_noise(ch: dict) -> str:
    """A pick's "beyond noise" cell, worded as its verdict is everywhere else (verdict_words);
    a record without a verdict falls back to its beyond_noise flag."""
    verdict = ch.get("verdict")
    if verdict not in VERDICTS:
        verdict = "faster" if ch.get("beyond_noise") else "tie"
    return BEYOND_NOISE_CELL[verdict_words(verdict, ch.get("noise_source"))]


def evidence(ch: dict) -> str:
    """Where the noise came from and the margin's interval, e.g. 'runs; 95% CI +0.3% … +1.2%'."""
    source = ch.get("noise_source") or ""
    ci = fmt_ci(ch.get("margin_ci_low"), ch.get("margin_ci_high"), ch.get("confidence"))
    return "; ".join(x for x in (source and f"noise from {source}", ci) if x)


def certified(ch: dict) -> str:
    """The race's word on a pick: 'certified (9 rounds)', 'tie (3 tied; default in tied set)', 'no evidence
    (1 round(s)): the sweep's pick stands' or 'not raced'."""
    c = ch.get("certification")
    if not c:
        return "not raced"
    if c["status"] == "certified":
        return f"certified ({c['rounds']} rounds)"
    if c["rounds"] < 3:   # Certification.verdict "unknown": the rule was not applied, the sweep's pick stands
        return f"no evidence ({c['rounds']} round(s)): the sweep's pick stands"
    return f"tie ({len(c.get('tied', []))} tied after {c['rounds']} rounds; {c['rule']})"


def shape_rows(ch: dict) -> list[dict[str, str]]:
    """Per kernel x launch shape of a group: its best value next to the pick, and the pick's regret."""
    return [{"kernel": s["kernel"], "shape": s["shape"], "best": fmt_values(s["best"]), "best_ns": fmt_ns(s["best_ns"]),
             "pick_ns": fmt_ns(s["pick_ns"]), "regret": fmt_pct(s["regret"]), "is_pick": s["best"] == ch["values"],
             "workload": s.get("workload", "")} for s in ch.get("shapes") or []]


def race_rows(ch: dict) -> list[dict[str, Any]]:
    """A raced group's entrants: values, threads, default or not, race median and the verdict against the leader."""
    c = ch.get("certification")
    if not c:
        return []
    comps = c.get("comparisons") or {}
    return [{"label": fmt_values(e["values"]), "tag": e["tag"], "threads": e["threads"],
             "default": "yes" if e["is_default"] else "", "median": fmt_ns(e.get("median_ns")),
             "verdict": _against(comps.get(e["tag"])), "chosen": e["values"] == ch["values"],
             "tied": c["status"] == "tie" and e["values"] in c.get("tied", [])} for e in c.get("entrants", [])]


def _against(comp: dict | None) -> str:
    """The leader against one entrant: 'faster, +3.4% (CI +1.1% … +5.9%)', or 'leader'."""
    if not comp:
        return "leader"
    ci = fmt_ci(comp.get("ci_low"), comp.get("ci_high"), 1.0).replace("100% CI ", "")
    return f"{comp['verdict']}, {fmt_pct(comp.get('margin'))}" + (f" ({ci})" if ci else "")


def worst_regret(ch: dict) -> str:
    shapes = ch.get("shapes") or []
    if not shapes:
        return ""
    w = max(shapes, key=lambda s: s["regret"])
    where = f" ({w['workload']})" if w.get("workload") else ""
    return f"worst shape: {fmt_pct(w['regret'])} at {w['kernel']} {w['shape']}{where}" if w["regret"] > 0 else \
        f"best at all {len(shapes)} shapes"


def best_rows(sw: SweepData) -> list[dict[str, str]]:
    """The best table: one row per parameter group."""
    rows = []
    for ch in (sw.best or {}).get("choices", []):
        ru = ch.get("runner_up")
        beyond = "—" if ru is None else beyond_noise(ch)
        noise = f"noise {fmt_ns(ch['noise_ns'])}" if ru is not None and ch.get("noise_ns") is not None else ""
        rows.append({
            "evidence": evidence(ch) if ru is not None else "", "certified": certified(ch),
            "regret": "; ".join(x for x in (worst_workload(ch), worst_regret(ch)) if x),
            "kernels": ", ".join(ch.get("kernels", [])) or "—", "chosen": fmt_values(ch["values"]),
            "kernel_list": list(ch.get("kernels", [])) or ["—"], "chosen_list": value_list(ch["values"]),
            "runner_up_list": value_list(ru["values"]) if ru else ["—"], "noise": noise,
            "time": f"{fmt_ns(ch['best']['ns'])} ± {fmt_ns(ch['best']['std_ns'])}",
            "ns": fmt_ns(ch["best"]["ns"]), "std": fmt_ns(ch["best"]["std_ns"]),
            "runner_up": fmt_values(ru["values"]) if ru else "—", "runner_up_time": fmt_ns(ru["ns"]) if ru else "—",
            "margin": fmt_pct(ch.get("margin")), "beyond_noise": beyond, "default": fmt_ns(ch.get("default_ns")),
            "speedup": "the default" if ch.get("is_default")
            else fmt_ratio(ch.get("speedup_vs_default")) + verdict_in_brackets(ch.get("default_verdict")),
            "note": ch.get("note", ""),
        })
    return rows


def confirmation_rows(sw: SweepData) -> list[tuple[str, str, str]]:
    """(what, value, ratio/explanation) rows of the end-to-end confirmation."""
    c = sw.confirmation
    if not c:
        return []
    words = ", " + w if (w := end_to_end_words(c.get("vs_default"))) else ""
    rows = [
        ("Sum of per-group bests (each measured in its own jobs)", fmt_ns(c.get("sum_of_group_bests_ns")), ""),
        ("Combined best (job 'best', every pick at once)", fmt_ns(c.get("best_total_ns")),
         f"{fmt_ratio(c.get('best_vs_sum_of_bests'))} the sum of bests" if c.get("best_vs_sum_of_bests") else
         "not run: no job 'best'" if not c.get("best_total_ns") else ""),
        ("Default launch sizes (job 'default')", fmt_ns(c.get("default_total_ns")),
         f"combined best is {fmt_ratio(c.get('speedup_vs_default'))} the defaults' speed{words}"
         if c.get("speedup_vs_default") else "no baseline measured" if not c.get("default_total_ns") else ""),
    ]
    if c.get("best_forward_ms") is not None or c.get("default_forward_ms") is not None:
        rows.append(("Forward pass, combined best", fmt_ms(c.get("best_forward_ms")), ""))
        rows.append(("Forward pass, default launch sizes", fmt_ms(c.get("default_forward_ms")),
                     f"combined best is {fmt_ratio(c.get('forward_speedup_vs_default'))} the defaults' speed"
                     if c.get("forward_speedup_vs_default") else ""))
    for name, w in (c.get("workloads") or {}).items():
        rows.append((f"Workload {name}: combined best / default launch sizes",
                     f"{fmt_ns(w.get('best_ns'))} / {fmt_ns(w.get('default_ns'))}",
                     f"combined best is {fmt_ratio(w.get('speedup_vs_default'))} the defaults' speed here"
                     if w.get("speedup_vs_default") else "not measured in both jobs"))
    return rows


def failure_rows(sw: SweepData, jobs_dir: Path | None = None) -> tuple[list[dict], list[dict]]:
    """(failed, skipped) jobs: tag, role, status, stage, reason, log and its file:// link."""
    c = sw.configs
    if c.empty:
        return [], []
    bad = c[~c["status"].isin(["ok", "pending", "running", "built"])].sort_values(["status", "tag"])
    failed, skipped = [], []
    for _, r in bad.iterrows():
        log = str(r.get("log") or "") if clean_value(r.get("log")) is not None else ""
        row = {"tag": str(r["tag"]), "role": str(r.get("role") or "sweep"), "status": str(r["status"]),
               "stage": str(clean_value(r.get("stage")) or ""), "reason": str(clean_value(r.get("reason")) or ""),
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


SAMPLING = ("runs", "samples", "noise", "noise_source", "stop_reason", "throttled_runs")


def _sampling(job: dict[str, Any] | None) -> dict[str, str]:
    """How a job (its configs row) sampled its program, for the measured table ("—" for tables from before it was recorded)."""
    def get(col: str) -> Any:
        return clean_value(job[col]) if job is not None and col in job else None
    noise = get("noise")
    return {"runs": str(get("runs") or "—"), "samples": str(get("samples") or "—"),
            "noise": "—" if noise is None else f"{100 * noise:.2f}%", "source": get("noise_source") or "—",
            "stopped": get("stop_reason") or "—", "throttled": str(get("throttled_runs") or 0)}


def measured_rows(sw: SweepData) -> tuple[list[str], list[dict[str, Any]]]:
    """Every ok job's per-iteration time per kernel (the raw material of the picks), and how it was sampled."""
    m = sw.measurements
    if m.empty:
        return [], []
    m = m[m["status"] == "ok"]
    m = m.assign(workload=m["workload"].fillna("").astype(str) if "workload" in m else "")
    per = m.groupby(["tag", "workload", "kernel"])["total_median_ns"].sum().unstack("kernel")  # a row per job x workload
    kernels = [str(k) for k in per.columns]
    macros = [c for c in macro_columns(sw.configs)]
    jobs = dict(zip(sw.configs["tag"], sw.configs.to_dict("records")))   # read once: a cell lookup a job took minutes
    rows = []
    for (tag, workload), r in zip(per.index, np.ascontiguousarray(per.to_numpy(dtype=float))):
        total, job = float(np.nansum(r)), jobs.get(tag)
        vals = {m: clean_value(job[m]) if job is not None and m in job else None for m in macros}
        rows.append({"tag": str(tag), "workload": str(workload), "role": str(job["role"]) if job is not None else "",
                     "label": " ".join(f"{m}={int(v)}" for m, v in vals.items() if v is not None),
                     "kernels": [fmt_ns(clean_value(x)) for x in r], "total": fmt_ns(total), "total_ns": total,
                     "sampling": _sampling(job)})
    rows.sort(key=lambda x: x["total_ns"])
    return kernels, rows
