"""Where a sweep's wall time goes, what a one-value change rebuilds, and how long
each configuration holds the GPU against the program's own run time.

    python bench/sweep_overhead.py [SPACE] [--backend nsys] [--jobs-dir DIR]
    python bench/sweep_overhead.py SPACE --held cupti,nsys,ncu,events [--configs 6]
    python bench/sweep_overhead.py SPACE --cold-warm [--backend cupti]

Default: runs SPACE (default spaces/seed.yaml) on the local executor from an
empty jobs folder, then splits its wall time using every job's stage intervals:

    nvcc            union of the build intervals (make through the object cache)
    GPU run         union of verify + profile intervals (the programs on the GPU,
                    under the profiler)
    post-processing union of parse intervals (nsys export, parsing)
    model export    the one-time export of the engine's weights and transformers'
                    reference outputs (cached afterwards), run alongside the builds;
                    reported apart, with the part the builds did not hide
    framework       wall time covered by none of the above: planning, rendering,
                    dispatch, polling gaps, collect/select/report

Stages of different jobs overlap (builds run while the GPU measures), so each
category is a union of intervals, and the categories can sum to more than the
wall time. Then it changes one value in one row and runs again: only that
configuration runs, and only the objects whose macros changed recompile.
Targets (issue): framework share <= 5%, seed sweep <= 5 minutes.

--held: the same configurations (the first N rows of a tuples space, else N
drawn from the legal set with a fixed seed) swept once per backend; for each
configuration, the seconds its job held the GPU (the job's "gpu" interval: the
verify and profile runs, what the GPU lock serialises) against the program's own
run time, measured in the same bench run right after each sweep by running the
job's timing command with no profiler; then how far the backends' per-launch
medians lie apart for each kernel and launch shape. Target (issue 13): cupti
holds the GPU at most 1.3x the program's own time + 0.3 s. "cupti:overlap" and
"cupti:exclusive" sweep with profile.overlap on and off (issue 34): each also gets the
measuring phase's wall time per configuration (the union of the jobs' "gpu" intervals
over the number of configurations) against its GPU-busy time (kernels, copies, memsets and
context creation from the captures, x the job's runs); target for examples/host_heavy in
overlap mode: at most 1.5x. Overlap only shows where the executor gives a GPU several
measuring slots (sweep.node.gpus.measuring_slots); bench/overlap_check.py runs the
measuring phases itself, whatever the executor does.

--cold-warm: the whole sweep twice with one backend (default cupti), end to end
(confirmation included): first with no object cache and no cupti library (the
exported model is kept if one is there), then again with both. Targets: at
most 60 s cold and 30 s warm for spaces/seed.yaml with cupti.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from sweep.core.spans import covered  # noqa: E402
from sweep.pipeline import driver as pipeline
from sweep.space import target  # noqa: E402


def stage_intervals(sweep_dir: Path) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {"build": [], "gpu": [], "parse": []}
    for f in sweep_dir.glob("*/result.json"):
        r = json.loads(f.read_text())
        iv = r.get("intervals", {})
        if "build" in iv:
            out["build"].append(tuple(iv["build"]))
        for k in ("verify", "profile"):
            if k in iv:
                out["gpu"].append(tuple(iv[k]))
        if "parse" in iv:
            out["parse"].append(tuple(iv["parse"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("space", nargs="?", type=Path, default=ROOT / "spaces" / "seed.yaml")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--executor", default="local")
    ap.add_argument("--jobs-dir", type=Path, default=ROOT / "build" / "overhead" / "jobs")
    ap.add_argument("--results-dir", type=Path, default=ROOT / "build" / "overhead" / "results")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "sweep-overhead.json")
    ap.add_argument("--analyze", action="store_true",
                    help="analyze the sweep already in --jobs-dir (its last run) instead of running it first")
    ap.add_argument("--held", metavar="BACKENDS", help="GPU-held time per configuration for each backend "
                    "(comma-separated), against the program's own run time, and the backends' agreement")
    ap.add_argument("--configs", type=int, default=6, help="configurations per backend for --held")
    ap.add_argument("--cold-warm", action="store_true", help="the sweep end to end, cold then warm caches")
    a = ap.parse_args()
    if a.held or a.cold_warm:
        from held import cold_warm, held  # bench/held.py

        out = held(a.space, a.held.split(","), a.configs, a.jobs_dir, a.results_dir) if a.held else \
            cold_warm(a.space, a.backend or "cupti", a.jobs_dir, a.results_dir)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(out, indent=2))
        print(f"written: {a.out}")
        return 0

    space = target.load(a.space)
    sweep_dir = a.jobs_dir / space.name
    export_s = float("nan")
    if not a.analyze:
        if sweep_dir.exists():
            shutil.rmtree(sweep_dir)
        # As a fresh clone sees it: no object cache (everything compiles), no exported model
        shutil.rmtree(a.jobs_dir / "_cache", ignore_errors=True)
        shutil.rmtree(a.jobs_dir / "_models", ignore_errors=True)
        pipeline.run(a.space, pipeline.Options(executor=a.executor, jobs_root=a.jobs_dir, results_root=a.results_dir),
                     backend=a.backend)
    manifest = json.loads((sweep_dir / "sweep.json").read_text())
    last = next((r for r in reversed(manifest.get("runs", [])) if not r.get("dry_run")), None)
    if last is None:
        raise SystemExit(f"{sweep_dir} has no recorded run; run the sweep (without --analyze) first")
    start, end, driver_cpu = last["started"], last["finished"], last["driver_cpu_s"]
    if export_s != export_s:  # not timed here: the run exported (or reused) the model alongside its builds
        export_s = last.get("model_export_s", float("nan"))
    s1_counts = last["counts"]
    wall = end - start
    iv = stage_intervals(sweep_dir)
    export_iv = [tuple(last["model_export_interval"])] if last.get("model_export_interval") else []
    nvcc, gpu, post = (covered(iv[k], start, end) for k in ("build", "gpu", "parse"))
    stages = iv["build"] + iv["gpu"] + iv["parse"]
    busy = covered(stages + export_iv, start, end)
    export_exposed = busy - covered(stages, start, end)  # the export's time not hidden behind the stages
    framework = wall - busy

    # One value changed in one configuration: only it runs, and only its changed objects compile.
    raw = yaml.safe_load(a.space.read_text())
    changed_macro = None
    if raw.get("tuples", {}).get("rows"):
        row = raw["tuples"]["rows"][0]
        col = raw["tuples"]["columns"][0]
        row[0] = row[0] * 2 if row[0] * 2 not in [r[0] for r in raw["tuples"]["rows"]] else row[0] + 1
        changed_macro = col
    tmp_space = a.jobs_dir / f"{space.name}-one-change.yaml"
    raw["name"] = space.name
    tmp_space.write_text(yaml.safe_dump(raw, sort_keys=False))
    before = {p.parent.name for p in sweep_dir.glob("*/result.json")}
    t1 = time.time()
    s2 = pipeline.run(tmp_space, pipeline.Options(executor=a.executor, jobs_root=a.jobs_dir, results_root=a.results_dir,
                                                  confirm=False), backend=a.backend)
    second_wall = time.time() - t1
    new_tags = sorted({p.parent.name for p in sweep_dir.glob("*/result.json")} - before)
    rebuilt = {}
    for t in new_tags:
        r = json.loads((sweep_dir / t / "result.json").read_text())
        rebuilt[t] = {"compiled": [Path(x).name for x in r["build"].get("compiled", [])],
                      "cached": len(r["build"].get("cached", []))}

    rows = [
        ("seed sweep wall time", f"{wall:.1f} s", f"{len(list(sweep_dir.glob('*/result.json')))} jobs incl. confirmation"),
        ("nvcc (union of builds)", f"{nvcc:.1f} s", f"{100 * nvcc / wall:.1f}% of wall"),
        ("GPU run (verify + profile)", f"{gpu:.1f} s", f"{100 * gpu / wall:.1f}% of wall"),
        ("profiler post-processing", f"{post:.1f} s", f"{100 * post / wall:.1f}% of wall"),
        ("framework's own (wall - busy)", f"{framework:.1f} s", f"{100 * framework / wall:.1f}% of wall (target <= 5%)"),
        ("driver process CPU", f"{driver_cpu:.1f} s", "user + system, this process only"),
        ("model export (one-time, cached)", f"{export_s:.1f} s" if export_s == export_s else "-",
         f"alongside the builds, {export_exposed:.1f} s of it not hidden; reused by later sweeps"),
        ("second run, one value changed", f"{second_wall:.1f} s", f"new jobs: {', '.join(new_tags) or 'none'}"),
    ]
    for t, r in rebuilt.items():
        rows.append((f"  {t}", f"compiled {', '.join(r['compiled']) or 'nothing'}", f"{r['cached']} objects from the cache"))
    w0, w1 = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    print(f"\nsweep overhead: {a.space.name} ({last['executor']}, backend {last['backend']})")
    for r in rows:
        print(f"  {r[0]:<{w0}}  {r[1]:<{w1}}  {r[2]}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"wall_s": wall, "nvcc_s": nvcc, "gpu_s": gpu, "post_s": post, "framework_s": framework,
                                 "framework_share": framework / wall, "driver_cpu_s": driver_cpu, "export_s": export_s,
                                 "export_exposed_s": export_exposed,
                                 "second_run_s": second_wall, "changed_macro": changed_macro, "rebuilt": rebuilt,
                                 "counts": s1_counts, "second_counts": s2.counts}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
