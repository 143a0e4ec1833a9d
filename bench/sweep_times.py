"""Where a finished sweep's wall time went, read from its own files (bench/scaling.py's readers):

    results(sweep_dir)          each readable result.json under the sweep folder
    split(sweep_dir, lo, hi)    seconds of [lo, hi] covered by builds, measurements, races and
                                confirmations, and "framework": what none covers
    gpu_work_s(sweep_dir)       the sweep jobs' own GPU work (cupti's busy seconds x runs)
    handover(sweep_dir, lo)     the local executor's hand-over log: workers' start, each job's wait
                                for the driver and for its worker
    timeline(sweep_dir, lo)     every job's intervals, from the run's start
    occupancy(sweep_dir, n)     the measuring phase: wall time, GPU time and GPU work over it x GPUs

Times are epoch seconds in the files (sweep.node.job mark(), sweep.dispatch.local's log); lo is
the run's start."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sweep.core.spans import covered
from sweep.dispatch.local import HANDOVER_LOG
from sweep.node import race as race_files

CONFIRM_TAGS = ("default", "best")
CATEGORIES = ("build", "measure", "race", "confirm")


def results(sweep_dir: Path, pattern: str = "**/result.json") -> Iterator[tuple[Path, dict[str, Any]]]:
    """Each readable result.json under the sweep folder matching `pattern`: (its path, its JSON)."""
    for f in sorted(sweep_dir.glob(pattern)):
        try:
            yield f, json.loads(f.read_text())
        except (OSError, ValueError):
            continue


def split(sweep_dir: Path, lo: float, hi: float) -> dict[str, float]:
    """Seconds of [lo, hi] in each category (module docstring), and framework: what none covers."""
    spans: dict[str, list[tuple[float, float]]] = {c: [] for c in CATEGORIES}
    for f, r in results(sweep_dir):
        iv = {k: v for k, v in (r.get("intervals") or {}).items() if isinstance(v, list) and len(v) == 2}
        role = (r.get("role") or "")
        if f.parent.parent.name == "_races" or role == "entrant":
            spans["race"] += [tuple(v) for v in iv.values()]
        elif f.parent.name in CONFIRM_TAGS:
            spans["confirm"] += [tuple(v) for v in iv.values()]
        else:
            spans["build"] += [tuple(iv["build"])] if "build" in iv else []
            spans["measure"] += [tuple(iv["gpu"])] if "gpu" in iv else []
    out = {c: round(covered(spans[c], lo, hi), 3) for c in CATEGORIES}
    in_any = covered([s for c in CATEGORIES for s in spans[c]], lo, hi)
    out["framework"] = round(max(0.0, (hi - lo) - in_any), 3)
    return out


def gpu_work_s(sweep_dir: Path) -> float | None:
    """The sweep jobs' own GPU work (cupti's token: kernels, copies, memsets and context creation,
    result.json's env["gpu_use"]["busy_s"] a run, times the job's runs); None when no job says."""
    total, known = 0.0, False
    for _, r in results(sweep_dir, "*/result.json"):
        busy = ((r.get("env") or {}).get("gpu_use") or {}).get("busy_s")
        if (r.get("role") or "sweep") != "sweep" or not isinstance(busy, (int, float)):
            continue
        total, known = total + float(busy) * max(1, int((r.get("sampling") or {}).get("runs") or 1)), True
    return round(total, 3) if known else None


def handover(sweep_dir: Path, lo: float) -> dict[str, Any]:
    """The local executor's hand-over log (sweep.dispatch.local.HANDOVER_LOG), in seconds from the
    run's start: when its workers were started ("workers": [from, to]), and per sweep job "waiting"
    (its build done in the driver to its hand-over to a worker) and "handover" (to the worker taking
    it up: the worker's start-up too, for its first job)."""
    out: dict[str, Any] = {"workers": None, "jobs": {}}
    try:
        lines = [json.loads(x) for x in (sweep_dir / "_dispatch" / HANDOVER_LOG).read_text().splitlines() if x.strip()]
    except (OSError, ValueError):
        return out
    for x in lines:
        if x.get("event") == "workers" and out["workers"] is None:
            out["workers"] = [round(x["from"] - lo, 3), round(x["to"] - lo, 3)]
        elif x.get("tag") and all(isinstance(x.get(k), (int, float)) for k in ("ready", "sent", "received")):
            out["jobs"][x["tag"]] = {"waiting": [round(x["ready"] - lo, 3), round(x["sent"] - lo, 3)],
                                     "handover": [round(x["sent"] - lo, 3), round(x["received"] - lo, 3)],
                                     "first_of_worker": x.get("worker_jobs_before") == 0}
    return out


def handover_line(r: dict[str, Any]) -> str:
    """How long built jobs waited for the driver to hand them over, and for a worker to take them up."""
    jobs = (r.get("handover") or {}).get("jobs") or {}
    if not jobs:
        return "hand-over: unknown (no hand-over log)"
    wait = sorted(j["waiting"][1] - j["waiting"][0] for j in jobs.values())
    take = sorted(j["handover"][1] - j["handover"][0] for j in jobs.values())
    spawn = (r.get("handover") or {}).get("workers")
    spawned = f"; workers started from {spawn[0]:.1f} s to {spawn[1]:.1f} s" if spawn else ""
    count = f"{len(jobs)} job{'s' * (len(jobs) != 1)}"
    return (f"built to handed over: median {wait[len(wait) // 2]:.2f} s, max {wait[-1]:.2f} s; handed over to taken "
            f"up: median {take[len(take) // 2]:.2f} s, max {take[-1]:.2f} s ({count}){spawned}")


def timeline(sweep_dir: Path, lo: float, handed: dict[str, Any] | None = None) -> list[dict[str, object]]:
    """Every job of the run (sweep jobs, races, confirmations): its tag, role, status, GPU-busy
    seconds a run and runs, and its intervals in seconds from the run's start (with the hand-over
    log's "waiting" and "handover" for the sweep's jobs: `handed`, handover()'s, read here when not
    given), so that where the wall time went can be read again later from --out alone."""
    out = []
    jobs = (handover(sweep_dir, lo) if handed is None else handed)["jobs"]
    for f, r in results(sweep_dir):
        iv = {k: [round(v[0] - lo, 3), round(v[1] - lo, 3)] for k, v in (r.get("intervals") or {}).items()
              if isinstance(v, list) and len(v) == 2}
        if f.parent.parent == sweep_dir and r.get("tag") in jobs:
            iv.update({k: v for k, v in jobs[r["tag"]].items() if k != "first_of_worker"})
        env = r.get("env") or {}
        out.append({"tag": r.get("tag"), "role": r.get("role") or "sweep", "status": r.get("status"),
                    "gpu": env.get("gpu_uuid"), "busy_s": (env.get("gpu_use") or {}).get("busy_s"),
                    "runs": (r.get("sampling") or {}).get("runs"), "intervals": iv})
    return out


def occupancy(sweep_dir: Path, n_gpus: int) -> dict[str, object]:
    """The measuring phase: its wall time, the sweep jobs' GPU time over it x GPUs, each GPU's share,
    and the jobs' own GPU work over it x GPUs (in overlap mode several jobs hold a GPU at once, each
    taking the GPU only for its GPU work: then the held time says the GPU was claimed, the work how
    much of it was used)."""
    manifest = json.loads((sweep_dir / "sweep.json").read_text())
    occ = (manifest.get("runs") or [{}])[-1].get("gpu_occupancy") or {}
    wall = float(occ.get("measuring_s") or 0.0)
    per = occ.get("gpus") or {}
    busy = sum(float(g.get("busy_s", 0.0)) for g in per.values())
    work = gpu_work_s(sweep_dir)
    return {"measuring_s": wall, "gpu_s": round(busy, 3),
            "occupancy": round(busy / (wall * n_gpus), 4) if wall > 0 else None,
            "gpu_work_s": work, "gpu_work": round(work / (wall * n_gpus), 4) if wall > 0 and work is not None else None,
            "per_gpu": {k: v.get("share") for k, v in per.items()}, "startup_s": occ.get("startup_s") or {}}


def races(sweep_dir: Path) -> list[dict[str, Any]]:
    """Each certification race of the sweep (one per part where the groups were split over GPUs),
    in the order they started: its groups, jobs a round, budget, rounds, seconds, and why each
    group's race stopped ("separated", "budget", "max_rounds"): a race that ran to its budget
    where another decided shows in these, not in the wall time."""
    out = []
    for path, r in results(sweep_dir, "_races/*/result.json"):
        folder = path.parent
        done = race_files.read_outcome(folder)
        if done is None:
            continue
        try:
            plan = json.loads((folder / race_files.PLAN).read_text())
        except (OSError, ValueError):
            continue
        start = (r.get("intervals") or {}).get("race", [None])[0]
        out.append({"race": folder.name, "start": start, "groups": len(plan.get("lanes", [])),
                    "jobs": len(plan.get("jobs", {})), "budget_s": plan.get("budget_s"),
                    "lockstep": bool(plan.get("lockstep")), "rounds": done.get("rounds"),
                    "elapsed_s": done.get("elapsed_s"),
                    "stopped": [lane.get("result", {}).get("stopped") for lane in done.get("lanes", [])]})
    return sorted(out, key=lambda x: (x["start"] is None, x["start"] or 0.0))


def race_line(r: dict[str, Any]) -> str:
    """One race of `races`, in a line."""
    def secs(x: object) -> str:
        return f"{x:.1f} s" if isinstance(x, (int, float)) else "unknown"
    return (f"race {r['race'][:8]}: {r['groups']} group(s), {r['jobs']} jobs a round"
            f"{' in lockstep' if r['lockstep'] else ''}, budget {secs(r['budget_s'])}, {r['rounds']} rounds in "
            f"{secs(r['elapsed_s'])}; stopped: {', '.join(str(s) for s in r['stopped']) or 'unknown'}")
