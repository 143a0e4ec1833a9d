"""The same sweep on 1, 2 and 4 GPUs, cold and warm: where the wall time goes, how busy each
GPU was while measuring, and how much faster more GPUs end it (issue 33).

    python bench/scaling.py [SPACE] [--gpus 1,2,4] [--work DIR] [--out scaling.json] [--warm-only] [--append]

SPACE defaults to examples/quick_check/space.yaml. Each GPU count runs on the first N GPUs
CUDA_VISIBLE_DEVICES (else nvidia-smi) shows; a count above what is visible is skipped, saying
so. Per count, two sweeps through the local executor, end to end (race and confirmation
included, no report): cold (the jobs folder's object cache emptied first) and then warm (the
same jobs folder: every object cached). Each reported run starts from an empty sweep folder
of its own, so a --work folder used before is measured again, never resumed. Each run's wall
time is split by the jobs' own intervals (sweep.node.job mark(): epoch seconds):

    build      union of the sweep jobs' build intervals (make through the object cache)
    measure    union of the sweep jobs' gpu intervals (verify + profile under the GPU's lock)
    race       union of the certification races' intervals and their entrants' jobs
    confirm    union of the default and best jobs' intervals (every stage)
    framework  wall time covered by none of them: planning, rendering, dispatch, parsing,
               collect and select

Categories overlap (builds run while GPUs measure), so they can sum past the wall time.
The measuring phase's GPU occupancy is the sweep jobs' GPU time (their gpu intervals) over
the measuring phase's wall time x GPUs (the phase: first job handed to a GPU to the last
one's end, sweep.json's runs[].gpu_occupancy), with each GPU's own share beside it. In overlap
mode (cupti) several jobs hold a GPU at once, so that figure says the GPU was claimed, not used:
"GPU work" is the jobs' programs' own GPU work (kernels, copies, memsets, context creation: the
cupti token's busy seconds) over the same phase x GPUs, what the GPUs could give more of.
--out is written after every run, so a command stopped at its time limit keeps what it measured,
with every job's intervals (its "timeline") for reading where the time went later.
Speedup: a count's wall time against one GPU's, cold with cold and warm with warm; "w/o race"
the same less the race's seconds (a group's race runs on one GPU whatever the count: with one
group it does not shrink, with several their races run side by side).
--warm-only skips the cold runs: a first run fills the object cache (not reported; skipped where
the first count's folder under --work already has one, from an earlier command) and the later
counts get a copy of it, of the backends' caches (the CUPTI library) and of the engine's exported
weights.
--variant NAME:VAR=VALUE[,VAR=VALUE...] (repeatable) runs every count once per variant, each with
those variables in the sweep's environment (a bare NAME: the environment as it is), e.g.
--variant default --variant gate:SWEEP_GPU_TOKEN_CONTEXT=gate: speedups are over one GPU of the
same variant, and each variant's per-launch medians and picks are set against the first
variant's at the same count (bench/agreement.py: within the larger of 1% and the noise).
--append keeps the runs already in --out (the same space on the same GPU model) beside the new
ones, so the counts can run as separate commands (each under a time limit) on one machine, and
the speedups are taken over all of them.
Targets (issue 33, H100s): occupancy >= 90% on one GPU warm; 2 GPUs >= 1.9x, 4 GPUs >= 3.6x.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from agreement import agreement  # noqa: E402  (bench/agreement.py)
from sweep_times import handover, handover_line, occupancy, race_line, races, split, timeline  # noqa: E402  (bench/sweep_times.py)
from sweep.core.errors import SweepError  # noqa: E402
from sweep.dispatch import visible_gpus, workers  # noqa: E402
from sweep.pipeline import driver as pipeline  # noqa: E402
from sweep.space import target  # noqa: E402

DEFAULT_SPACE = ROOT / "examples" / "quick_check" / "space.yaml"


def fresh(jobs_root: Path, name: str, cold: bool) -> None:
    """Forget what an earlier run under this name measured (a reused --work would otherwise resume it
    and measure nothing), and for a cold run the object cache too."""
    for folder in (jobs_root / "jobs" / name, jobs_root / "results" / name):
        shutil.rmtree(folder, ignore_errors=True)
    if cold:
        shutil.rmtree(jobs_root / "jobs" / pipeline.OBJECT_CACHE, ignore_errors=True)


def one(space: Path, jobs_root: Path, name: str, devices: list[str], cold: bool = False) -> dict[str, object]:
    workers.close_kept()      # each run starts its workers afresh, as a sweep of its own command would
    fresh(jobs_root, name, cold)
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    t0, lo = time.monotonic(), time.time()
    s = pipeline.run(space, pipeline.Options(executor="local", jobs_root=jobs_root / "jobs",
                                             results_root=jobs_root / "results", report=False), name=name)
    wall, hi = time.monotonic() - t0, time.time()
    handed = handover(s.sweep_dir, lo)
    return {"wall_s": round(wall, 3), "counts": s.counts, "split": split(s.sweep_dir, lo, hi),
            **occupancy(s.sweep_dir, len(devices)), "timeline": timeline(s.sweep_dir, lo, handed), "handover": handed,
            "races": races(s.sweep_dir)}


def gpu_name() -> str:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "unknown"
    r = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    names = sorted(set(r.stdout.split("\n")) - {""})
    return ", ".join(names) or "unknown"


def table(runs: list[dict[str, object]]) -> str:
    width = max([len(str(r.get("variant", ""))) for r in runs] + [0])

    def named(text: str, r: dict[str, object]) -> str:      # a variant column where variants ran
        return f"{str(r.get('variant', '')):<{max(width, 7)}} {text}" if width else text
    head = (f"{'GPUs':>4} {'cache':>5} {'wall s':>7} {'build':>6} {'measure':>7} {'race':>6} {'confirm':>7} "
            f"{'frame':>6} {'meas. phase':>11} {'occupancy':>9} {'GPU work':>8} {'speedup':>7} {'w/o race':>8}  per GPU")
    rows = [named(head, {"variant": "variant"})]
    for r in runs:
        sp, occ = r["split"], r["occupancy"]
        per = ", ".join(f"{g} {v:.0%}" for g, v in r["per_gpu"].items() if v is not None)
        occ_text = f"{occ:.0%}" if occ is not None else "unknown"
        work = f"{r['gpu_work']:.0%}" if r.get("gpu_work") is not None else "unknown"
        speedup = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        bare = f"{r['speedup_without_race']:.2f}x" if r.get("speedup_without_race") else "-"
        rows.append(named(f"{r['gpus']:>4} {r['cache']:>5} {r['wall_s']:>7.1f} {sp['build']:>6.1f} "
                          f"{sp['measure']:>7.1f} {sp['race']:>6.1f} {sp['confirm']:>7.1f} {sp['framework']:>6.1f} "
                          f"{r['measuring_s']:>11.1f} {occ_text:>9} {work:>8} {speedup:>7} {bare:>8}  {per}", r))
    return "\n".join(rows)


def _key(r: dict[str, object]) -> tuple[object, ...]:
    return r.get("variant", ""), r["gpus"], r["cache"]


def merged(before: list[dict[str, object]], runs: list[dict[str, object]]) -> list[dict[str, object]]:
    """`runs` with those of an earlier command (--append) that they do not replace, in GPU-count
    order, each with its speedups over one GPU's run of the same cache and variant: wall time, and
    wall time less the race's seconds (a group's race runs on one GPU whatever the count)."""
    new = {_key(r) for r in runs}
    out = sorted([r for r in before if _key(r) not in new] + runs,
                 key=lambda r: (r["gpus"], r["cache"] != "cold", str(r.get("variant", ""))))
    for r in out:
        first = next((x for x in out if _key(x) == (r.get("variant", ""), 1, r["cache"])), None)
        r["speedup"] = round(first["wall_s"] / r["wall_s"], 3) if first and r["wall_s"] else None
        rest, rest_1 = r["wall_s"] - r["split"]["race"], (first["wall_s"] - first["split"]["race"]) if first else 0
        r["speedup_without_race"] = round(rest_1 / rest, 3) if first and rest > 0 else None
    return out


# What --warm-only copies from the first count's jobs folder to the later counts': the jobs' caches
# (the object cache, and each backend's own: the CUPTI injection library, whose build, about 2.9 s of
# nvcc, every job's build stage waits for), and the engine's exported weights (gpt2_engine.model_dir:
# minutes of CPU to export again). Until the library was carried too, every job of the later counts
# reached its GPU 2.4-3.4 s after its build (four H200s, quick_check), the first count's 0.06 s; with it,
# 0.05 s on both counts (two H200s).
KEPT_BETWEEN_COUNTS = (str(Path(pipeline.OBJECT_CACHE).parent), "_models")


VARIANT = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?::(?P<env>[A-Z_][A-Z0-9_]*=[^,]*(?:,[A-Z_][A-Z0-9_]*=[^,]*)*))?$")


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """--variant NAME or NAME:VAR=VALUE[,VAR=VALUE...]: (NAME, the variables)."""
    m = VARIANT.match(text)
    if not m:
        raise ValueError(f"--variant {text!r}: give NAME or NAME:VAR=VALUE[,VAR=VALUE...], e.g. "
                         "gate:SWEEP_GPU_TOKEN_CONTEXT=gate")
    pairs = (m.group("env") or "").split(",") if m.group("env") else []
    return m.group("name"), dict(p.split("=", 1) for p in pairs)


def agreements(runs: list[dict[str, object]]) -> list[dict[str, object]]:
    """Each later variant's run against the first variant's at the same count and cache: its
    per-launch medians and picks (bench/agreement.py)."""
    names = list(dict.fromkeys(str(r.get("variant", "")) for r in runs))
    out = []
    for r in runs:
        if len(names) < 2 or r.get("variant", "") == names[0]:
            continue
        ref = next((x for x in runs if _key(x) == (names[0], r["gpus"], r["cache"])), None)
        if ref is None or not ref.get("results") or not r.get("results"):
            continue
        try:
            summary, _ = agreement(Path(str(r["results"])), Path(str(ref["results"])), (str(r["variant"]), names[0]))
        except (OSError, KeyError, ValueError) as e:
            summary = {"error": f"{type(e).__name__}: {e}"}
        out.append({"variant": r["variant"], "against": names[0], "gpus": r["gpus"], "cache": r["cache"], **summary})
    return out


def agreement_line(g: dict[str, object]) -> str:
    head = f"{g['variant']} against {g['against']}, {g['gpus']} GPU(s) {g['cache']}: "
    if "error" in g or not g.get("pairs"):
        return head + f"medians not compared ({g.get('error', 'no launch shape measured by both')})"
    picks = "the same" if isinstance(g.get("picks"), dict) and g["picks"]["same"] else "DIFFERENT"
    return (head + f"per-launch medians within max(1%, noise) {g['same']} of {g['pairs']} "
            f"(median {g['rel_median']:+.2%}, largest {g['rel_max_abs']:.2%}); picks {picks}")


def carry_warm(src: Path, dst: Path) -> None:
    """What a warm run of another GPU count may reuse, copied from jobs folder `src` to `dst`."""
    for kept in KEPT_BETWEEN_COUNTS:
        if (src / kept).is_dir():
            shutil.copytree(src / kept, dst / kept, dirs_exist_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("space", nargs="?", type=Path, default=DEFAULT_SPACE)
    ap.add_argument("--gpus", default="1,2,4", help="GPU counts to run, comma-separated (default 1,2,4)")
    ap.add_argument("--work", type=Path, default=None, help="folder for the jobs (default: a fresh one under /tmp)")
    ap.add_argument("--out", type=Path, default=None, help="write every figure as JSON here")
    ap.add_argument("--append", action="store_true", help="keep the runs already in --out (same space and GPU)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME[:VAR=VALUE,...]",
                    help="run every count once per variant, with these variables set (repeatable)")
    ap.add_argument("--warm-only", action="store_true", help="skip the cold runs (the cache is warmed by a first "
                    "run that is not reported, or reused from --work, and copied to the later counts)")
    a = ap.parse_args(argv)
    try:
        counts = sorted({int(x) for x in a.gpus.split(",") if x.strip()})
    except ValueError:
        print(f"bench/scaling.py: --gpus {a.gpus!r}: give GPU counts such as 1,2,4", file=sys.stderr)
        return 1
    try:
        variants = [parse_variant(v) for v in a.variant] or [("", {})]
    except ValueError as e:
        print(f"bench/scaling.py: {e}", file=sys.stderr)
        return 1
    visible = visible_gpus()
    if not visible:
        print("bench/scaling.py needs a GPU: nvidia-smi finds none here (or CUDA_VISIBLE_DEVICES is empty); run it "
              "on a GPU node", file=sys.stderr)
        return 1
    if shutil.which("nvcc") is None:
        print("bench/scaling.py needs nvcc on PATH to build the sweep's program", file=sys.stderr)
        return 1
    work = a.work or Path(f"/tmp/scaling-{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    base = target.load(a.space).name
    skipped = [n for n in counts if n > len(visible) or n < 1]
    for n in skipped:
        print(f"skipping {n} GPU(s): {len(visible)} visible ({','.join(visible)})", file=sys.stderr)
    gpu = gpu_name()
    before = json.loads(a.out.read_text()) if a.append and a.out and a.out.is_file() else {}
    if before.get("space") != str(a.space) or before.get("gpu") != gpu:
        before = {}
    runs: list[dict[str, object]] = []
    warmed: Path | None = None      # --warm-only: the object cache the first count's warm-up filled
    try:
        for n in [n for n in counts if n not in skipped]:
            devices, jobs = visible[:n], work / f"gpus{n}"
            if a.warm_only and warmed is None:
                if (jobs / "jobs" / pipeline.OBJECT_CACHE).is_dir():   # an earlier command's warm-up, same --work
                    print(f"--- {n} GPU(s): reusing the object cache under {jobs} (no warm-up run)", file=sys.stderr)
                else:
                    one(a.space, jobs, f"{base}-g{n}-warmup", devices)
                warmed = jobs / "jobs"
            elif a.warm_only:      # the objects and exported models do not depend on the GPU count: copied
                carry_warm(warmed, jobs / "jobs")
            for cache in (("warm",) if a.warm_only else ("cold", "warm")):
                for variant, extra in variants:
                    settings = ",".join(f"{k}={v}" for k, v in extra.items()) or "the environment as it is"
                    label = f" {variant} ({settings})" if variant else ""
                    print(f"--- {n} GPU(s) ({','.join(devices)}), {cache} cache{label}", file=sys.stderr)
                    name = f"{base}-g{n}-{cache}" + (f"-{variant}" if variant else "")
                    with mock.patch.dict(os.environ, extra):    # the sweep's workers and programs inherit it
                        r = one(a.space, jobs, name, devices, cold=cache == "cold")
                    runs.append({"variant": variant, "gpus": n, "cache": cache, "results": str(jobs / "results" / name),
                                 **r})
                    runs = merged(before.get("runs", []), runs)
                    if a.out:       # after every run: a command stopped by its time limit keeps the runs it made
                        a.out.write_text(json.dumps({"space": str(a.space), "gpu": gpu, "visible": visible,
                                                     "skipped": skipped, "runs": runs,
                                                     "agreement": agreements(runs)}, indent=2) + "\n")
    except SweepError as e:
        print(f"bench/scaling.py: {e}", file=sys.stderr)
        return 1
    finally:
        if visible:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(visible)
    print(f"\n{base} on {gpu} ({len(visible)} visible); jobs under {work}")
    print(table(runs))
    for r in runs:
        st = r.get("startup_s") or {}
        first, later = st.get("first", {}), st.get("next", {})
        print(f"{r['gpus']} GPU(s) {r['cache']}{' ' + str(r['variant']) if r.get('variant') else ''}: a job handed to "
              f"a worker was taken up in {later.get('median', 'unknown')} s (median; a fresh worker's first job: "
              f"{first.get('median', 'unknown')} s, its start-up)")
        print(f"  {handover_line(r)}")
        for race in r.get("races") or []:
            print(f"  {race_line(race)}")
    for g in agreements(runs):
        print(agreement_line(g))
    print("build/measure/race/confirm: seconds of the wall time each covered (they overlap); frame: covered by none; "
          "occupancy: the sweep jobs' GPU time / (measuring phase x GPUs); GPU work: their programs' own GPU work "
          "(cupti) / (measuring phase x GPUs)")
    if a.out:
        print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
