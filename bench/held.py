"""GPU-held time per configuration, backend by backend, against the program's own run
time; the backends' agreement per launch shape; a sweep end to end, cold and warm.
Run through bench/sweep_overhead.py (--held, --cold-warm), whose docstring says
what each measures.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from itertools import combinations
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from sweep.pipeline import driver as pipeline  # noqa: E402
from sweep.node.job import Job  # noqa: E402

CUPTI_RATIO, CUPTI_EXTRA_S = 1.3, 0.3      # issue 13: held <= 1.3 x own + 0.3 s
AGREE = 0.05                               # medians within 5%


def space_for(space: Path, backend: str, configs: int, folder: Path) -> Path:
    """The space with this backend and at most `configs` configurations, the same for every backend.
    "cupti:overlap" and "cupti:exclusive" set profile.overlap too (sweep.node.overlap)."""
    raw = yaml.safe_load(Path(space).read_text())
    backend, _, mode = backend.partition(":")
    raw["name"] = f"{raw.get('name', Path(space).stem)}-{backend}" + (f"-{mode}" if mode else "")
    raw["profile"] = {**raw.get("profile", {}), "backend": backend, **({"overlap": mode == "overlap"} if mode else {})}
    target = raw.get("target")
    if isinstance(target, dict):    # relative to the original file
        target["dir"] = str((Path(space).parent / target["dir"]).resolve())
    if raw.get("strategy") == "tuples" and "tuples" in raw:
        raw["tuples"]["rows"] = raw["tuples"]["rows"][:configs]
    else:
        raw["strategy"] = {"name": "random", "samples": configs, "seed": 0}
    out = folder / f"{raw['name']}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out


def own_run_s(job_dir: Path) -> tuple[float, int]:
    """Wall seconds of the job's timing command with no profiler (as many iterations as
    the profiled run had: ncu runs ncu_iterations), and its exit code."""
    job = Job(job_dir)
    ncu = job.cfg.profile["backend"] == "ncu"
    cmd = job.program(iterations=job.cfg.profile["ncu_iterations"] if ncu else None)
    t0 = time.monotonic()
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return time.monotonic() - t0, rc


def held_rows(sweep_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for f in sorted(sweep_dir.glob("*/result.json")):
        r = json.loads(f.read_text())
        gpu = r.get("intervals", {}).get("gpu")
        if r["status"] != "ok" or not gpu or r.get("role") != "sweep":
            continue
        own, rc = own_run_s(f.parent)
        held = gpu[1] - gpu[0]
        runs = (r.get("sampling") or {}).get("runs") or 1
        busy = (r["env"].get("gpu_use") or {}).get("busy_s")
        rows.append({"tag": r["tag"], "held_s": held, "own_s": own, "own_exit": rc, "ratio": held / own,
                     "within_target": held <= CUPTI_RATIO * own + CUPTI_EXTRA_S, "capture": r["env"].get("capture"),
                     "gpu_mode": r["env"].get("gpu_mode", "exclusive"), "interval": gpu,
                     "busy_s": busy * runs if busy is not None else None})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    if not rows:
        return {"configs": 0}
    med = statistics.median
    return {"configs": len(rows), "held_s_median": med(r["held_s"] for r in rows),
            "own_s_median": med(r["own_s"] for r in rows), "ratio_median": med(r["ratio"] for r in rows),
            "ratio_max": max(r["ratio"] for r in rows), "held_minus_own_s_median": med(r["held_s"] - r["own_s"] for r in rows),
            "within_1.3x+0.3s": sum(r["within_target"] for r in rows), **measuring_phase(rows)}


def measuring_phase(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue 34: the measuring phase's wall time (the union of the jobs' "gpu" intervals) per
    configuration, against the GPU-busy time per configuration (kernels, copies, memsets and
    context creation from each capture, x the job's runs); target for a host-heavy program in
    overlap mode: at most 1.5x. None where the captures do not say (backends other than cupti)."""
    spans = sorted(tuple(r["interval"]) for r in rows)
    wall, end = 0.0, None
    for a, b in spans:
        wall += max(0.0, b - max(a, end if end is not None else a))
        end = b if end is None else max(end, b)
    busy = [r["busy_s"] for r in rows if r.get("busy_s") is not None]
    per_config = wall / len(rows)
    busy_per = sum(busy) / len(busy) if busy else None
    return {"gpu_modes": sorted({r["gpu_mode"] for r in rows}), "measuring_wall_per_config_s": per_config,
            "gpu_busy_per_config_s": busy_per, "wall_over_busy": per_config / busy_per if busy_per else None}


def agreement(tables: dict[str, pd.DataFrame], macros: list[str]) -> dict[str, Any]:
    """Per pair of backends: the per-launch medians of each configuration x kernel x launch shape both measured."""
    key = [*macros, "kernel", "grid", "block"]
    out: dict[str, Any] = {}
    for a, b in combinations(sorted(tables), 2):
        j = tables[a][key + ["median_ns"]].merge(tables[b][key + ["median_ns"]], on=key, suffixes=(f"_{a}", f"_{b}"))
        if j.empty:
            continue
        j["rel"] = j[f"median_ns_{a}"] / j[f"median_ns_{b}"] - 1
        shapes = j.groupby(["kernel", "grid", "block"])["rel"]
        out[f"{a}/{b}"] = {
            "pairs": len(j), "within_5%": int((j["rel"].abs() <= AGREE).sum()),
            "within_1%": int((j["rel"].abs() <= 0.01).sum()),
            "rel_median": float(j["rel"].median()), "rel_min": float(j["rel"].min()), "rel_max": float(j["rel"].max()),
            "per_shape_median_rel": {f"{k} grid {g} block {bl}": float(v) for (k, g, bl), v in shapes.median().items()}}
    return out


def held(space: Path, backends: list[str], configs: int, jobs: Path, results: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"space": str(space), "backends": {}}
    tables, macros = {}, []
    for backend in backends:
        path = space_for(space, backend, configs, jobs / "_spaces")
        shutil.rmtree(jobs / path.stem, ignore_errors=True)
        t0 = time.monotonic()
        try:
            s = pipeline.run(path, pipeline.Options(executor="local", jobs_root=jobs, results_root=results,
                                                    confirm=False, report=False))
        except Exception as e:  # one backend's failure leaves the others' figures
            out["backends"][backend] = {"error": f"{type(e).__name__}: {e}", "counts": {}}
            print(f"{backend}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        wall = time.monotonic() - t0
        rows = held_rows(s.sweep_dir)
        out["backends"][backend] = {"wall_s": wall, "counts": s.counts, **summary(rows), "configs_detail": rows}
        m = results / path.stem / "measurements.csv"
        if m.is_file():
            t = pd.read_csv(m)
            tables[backend] = t[(t["status"] == "ok") & (t["role"] == "sweep")]
            macros = [c for c in t.columns if c.isupper()]
    out["agreement"] = agreement(tables, macros)
    print_held(out)
    return out


def print_held(out: dict[str, Any]) -> None:
    print(f"\nGPU held per configuration vs the program's own run time: {out['space']}")
    print(f"  {'backend':<8} {'configs':>7} {'held s':>8} {'own s':>7} {'ratio':>6} {'max':>6} {'held-own':>9} "
          f"{'<=1.3x+0.3s':>12}  wall s")
    for b, r in out["backends"].items():
        if not r.get("configs"):
            print(f"  {b:<8} nothing measured: {r.get('error') or r['counts']}")
            continue
        print(f"  {b:<8} {r['configs']:>7} {r['held_s_median']:>8.3f} {r['own_s_median']:>7.3f} {r['ratio_median']:>6.2f} "
              f"{r['ratio_max']:>6.2f} {r['held_minus_own_s_median']:>9.3f} {r['within_1.3x+0.3s']:>8}/{r['configs']:<3}"
              f"  {r['wall_s']:.1f}")
    print("measuring wall per configuration / GPU-busy per configuration (kernels, copies, memsets, context "
          "creation; issue 34's target for a host-heavy program in overlap mode: <= 1.5x):")
    for b, r in out["backends"].items():
        if r.get("configs"):
            ratio = f"{r['wall_over_busy']:.2f}x" if r.get("wall_over_busy") else "unknown"
            busy = f"{r['gpu_busy_per_config_s']:.3f} s" if r.get("gpu_busy_per_config_s") is not None else "unknown"
            print(f"  {b:<16} {', '.join(r['gpu_modes'])}: {r['measuring_wall_per_config_s']:.3f} s / {busy} = {ratio}")
    print("per-launch medians, backend a / backend b - 1, over configuration x launch shape pairs:")
    for pair, a in out["agreement"].items():
        print(f"  {pair:<14} {a['within_1%']}/{a['pairs']} within 1%, {a['within_5%']} within 5%, median {a['rel_median']:+.1%}, "
              f"range {a['rel_min']:+.1%} .. {a['rel_max']:+.1%}")
        for shape, rel in a["per_shape_median_rel"].items():
            print(f"      {shape}: median {rel:+.1%}")


def cold_warm(space: Path, backend: str, jobs: Path, results: Path) -> dict[str, Any]:
    raw = yaml.safe_load(Path(space).read_text())
    name = raw.get("name", Path(space).stem)
    out: dict[str, Any] = {"space": str(space), "backend": backend}
    for phase in ("cold", "warm"):
        shutil.rmtree(jobs / name, ignore_errors=True)
        shutil.rmtree(results / name, ignore_errors=True)
        if phase == "cold":
            shutil.rmtree(jobs / "_cache", ignore_errors=True)   # objects and the cupti library; the model stays
        models = sorted(p.name for p in (jobs / "_models").glob("*")) if (jobs / "_models").is_dir() else []
        t0 = time.monotonic()
        s = pipeline.run(space, pipeline.Options(executor="local", jobs_root=jobs, results_root=results), backend=backend)
        wall = time.monotonic() - t0
        manifest = json.loads((s.sweep_dir / "sweep.json").read_text())
        last = manifest["runs"][-1]
        rows = [json.loads(f.read_text()) for f in s.sweep_dir.glob("*/result.json")]
        held_s = [r["intervals"]["gpu"][1] - r["intervals"]["gpu"][0] for r in rows if r["intervals"].get("gpu")]
        out[phase] = {"wall_s": wall, "counts": s.counts, "jobs": len(rows), "models_before": models,
                      "model_export_s": last.get("model_export_s"), "gpu_held_s_total": sum(held_s),
                      "gpu_held_s_median": statistics.median(held_s) if held_s else None,
                      "objects_compiled": sum(len(r["build"].get("compiled", [])) for r in rows)}
        print(f"{name} with {backend}, {phase}: {wall:.1f} s end to end, {s.counts}, {len(rows)} jobs, GPU held "
              f"{sum(held_s):.1f} s in all (median {out[phase]['gpu_held_s_median'] or 0:.2f} s a job), "
              f"{out[phase]['objects_compiled']} objects compiled, model export {last.get('model_export_s') or 0:.1f} s"
              f" (models there before: {', '.join(models) or 'none'})")
    return out
