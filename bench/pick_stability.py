"""How often a sweep's picks repeat when it is run again, certified picks and the others apart.

    python bench/pick_stability.py [SPACE] [-k 3] [--backend events] [--certify cap_s=120 ...]
    python bench/pick_stability.py examples/host_heavy/space.yaml -k 5     # a program without NVTX ranges
    CUDA_VISIBLE_DEVICES=0 TOY_BENCH_ITERATIONS=1 python bench/pick_stability.py tests/data/toy_space.yaml --quick
    python bench/pick_stability.py --analyze NAME [NAME ...]
    python bench/pick_stability.py --combine OUT.json [OUT.json ...]

Runs SPACE (default spaces/seed.yaml) K times, each a fresh `config_sweep.py run`
process under its own sweep name (<space>-stab-<i>) sharing one jobs folder, so
the object cache is shared; a dry run first fills that cache (--no-warm skips
it), so every rerun is warm. For every parameter group it then reports:

    picks           the pick of each rerun, and whether the race certified it
    repeat rate     the share of picks equal to the group's most common pick over
                    the K reruns, for certified and uncertified picks apart
                    (target: certified picks repeat in >= 95% of reruns)
    ties            a race that ended in a tie picks by the tie rule: those picks'
                    repeat rate apart, and whether each raced rerun's pick lies
                    inside every other rerun's verdict (its certified pick or its
                    tied set): verdicts that contradict one another show there
    leaders         each certified pick against every other rerun's race leader
                    (the fastest median of its race, whatever the tie rule picked):
                    a certified pick the measurements of another rerun contradict

and, per rerun, the race's GPU seconds (race.json's gpu_s: the race job holding
the GPU, plus the verify and profile of combined entrant configurations built for
it) as a share of the sweep's (verify + profile of its other jobs, the end-to-end
confirmation jobs included) (target: < 20%). --certify KEY=VALUE (repeatable)
sets the space's certify: settings for the reruns (a copy of the space is run),
e.g. cap_s=120 to let each race cost up to that many seconds. SPACE may live
anywhere (its target's dir is read relative to it; the reruns are named after its
`name:`). Per rerun it also prints how the sweep sampled its configurations (runs
per configuration, the noise's source, and why, for a program that showed fewer
timed iterations than its space said: no NVTX ranges) and each group's race
verdict (certified, tie, or why not raced). --quick: 2 reruns by default, no warm-up
dry run, no end-to-end confirmation (the race still runs): the CPU toy target end
to end in a few minutes (TOY_BENCH_ITERATIONS=1 makes it a one-iteration program). --first N numbers the
reruns from N; --combine analyzes the reruns of earlier --out files together (two
GPU sessions, say: each rerun's entry names its node). Writes everything to
--out (JSON) and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from sweep.decide.certify import ENTRANT_ROLE, latest_outcome  # noqa: E402


def space_copy(space: Path, certify: dict[str, Any], where: Path) -> Path:
    """SPACE with its certify: settings updated (a custom target's dir made absolute, so the copy loads anywhere)."""
    data = yaml.safe_load(space.read_text())
    data.setdefault("certify", {}).update(certify)
    if isinstance(data.get("target"), dict) and "dir" in data["target"]:
        data["target"]["dir"] = str((space.parent / data["target"]["dir"]).resolve())
    out = where / f"{space.stem}-stability.yaml"
    where.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def run_sweep(space: Path, name: str, args: argparse.Namespace, extra: list[str] = ()) -> float:
    cmd = [sys.executable, str(ROOT / "config_sweep.py"), "run", str(space), "--name", name, "--executor",
           args.executor, "--jobs-dir", str(args.jobs_dir), "--results-dir", str(args.results_dir), *extra]
    if args.backend:
        cmd += ["--backend", args.backend]
    t0 = time.monotonic()
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True)
    return time.monotonic() - t0


def gpu_seconds(configs: pd.DataFrame, race: bool = False) -> float:
    """The ok jobs' GPU-seconds: the sweep's own (race=False: its configurations, baseline and
    confirmation), or those run only for the race (race=True: combined entrant configurations).
    collect's `gpu_s` (each job's share of its GPU's measuring phase: in overlap mode several jobs
    measure at once, and adding up their verify + profile seconds would count the GPU several
    times over); verify + profile seconds for tables collected before it existed."""
    ok = configs[(configs["status"] == "ok") & ((configs["role"] == ENTRANT_ROLE) == race)]
    if "gpu_s" in ok:
        return float(ok["gpu_s"].fillna(0).sum())
    return float(sum(ok[c].fillna(0).sum() for c in ("verify_s", "profile_s") if c in ok))


def one(name: str, jobs_dir: Path, results_dir: Path) -> dict[str, Any]:
    """What one rerun picked, and its GPU seconds (sweep, race)."""
    best = json.loads((results_dir / name / "best.json").read_text())
    tables = results_dir / name
    configs = (pd.read_parquet(tables / "configs.parquet") if (tables / "configs.parquet").is_file()
               else pd.read_csv(tables / "configs.csv"))
    race = latest_outcome(jobs_dir / name) or {}
    groups = {}
    for ch in best["choices"]:
        cert = ch.get("certification") or {}
        groups[",".join(ch["macros"])] = {"pick": ch["values"], "certified": cert.get("status") == "certified",
                                          "raced": bool(cert), "rounds": cert.get("rounds"),
                                          "tied": cert.get("tied", []), "rule": cert.get("rule"),
                                          "verdict": ch.get("verdict"), "not_raced": ch.get("not_raced", "")}
    sweep_s = gpu_seconds(configs)
    race_s = float(race.get("gpu_s", 0.0)) + gpu_seconds(configs, race=True)
    return {"name": name, "groups": groups, "sweep_gpu_s": sweep_s, "race_gpu_s": race_s,
            "sampling": sampling_of(configs, jobs_dir / name),
            "race_share": race_s / sweep_s if sweep_s else None, "race_rounds": race.get("rounds"),
            "race_mode": race.get("mode", "runs"), "race_processes": race.get("runs"),
            "race_throttled_runs": race.get("throttled_runs"), "node": race.get("node", {})}


def sampling_of(configs: pd.DataFrame, sweep_dir: Path) -> dict[str, Any]:
    """How a rerun's sweep jobs sampled their programs: runs per configuration (median, max), the
    noise's sources, and the first reason a job gave for its runs (result.json's sampling.reason)."""
    ok = configs[(configs["status"] == "ok") & (configs["role"] == "sweep")]
    runs = ok["runs"] if "runs" in ok else pd.Series(dtype=float)
    reason = ""
    for f in sorted(sweep_dir.glob("*/result.json")):
        reason = (json.loads(f.read_text()).get("sampling") or {}).get("reason", "")
        if reason:
            break
    return {"configurations": len(ok), "runs_median": float(runs.median()) if len(runs) else None,
            "runs_max": int(runs.max()) if len(runs) else None,
            "sources": dict(Counter(ok["noise_source"])) if "noise_source" in ok else {}, "reason": reason}


def analyze(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per group: picks, the most common one, and repeat rates of certified and uncertified picks."""
    groups: dict[str, Any] = {}
    counts = {True: [0, 0], False: [0, 0]}        # certified? -> [repeated, all]
    for g in runs[0]["groups"]:
        picks = [r["groups"][g] for r in runs if g in r["groups"]]
        key = [json.dumps(p["pick"], sort_keys=True) for p in picks]
        mode = Counter(key).most_common(1)[0][0]
        per = {True: [0, 0], False: [0, 0]}
        for p, k in zip(picks, key):
            for bucket in (per, counts):
                bucket[p["certified"]][0] += k == mode
                bucket[p["certified"]][1] += 1
        groups[g] = {"picks": [p["pick"] for p in picks], "certified": [p["certified"] for p in picks],
                     "rounds": [p["rounds"] for p in picks], "most_common": json.loads(mode),
                     "certified_repeat": _rate(per[True]), "uncertified_repeat": _rate(per[False])}
    shares = [r["race_share"] for r in runs if r["race_share"] is not None]
    agree = [0, 0]       # a certified pick against every other rerun's race leader (its tied set's first)
    for g in runs[0]["groups"]:
        entries = [r["groups"][g] for r in runs if g in r["groups"]]
        for i, a in enumerate(entries):
            if not a["certified"]:
                continue
            for j, b in enumerate(entries):
                if j != i and b.get("raced") and b.get("tied"):
                    agree[0] += b["tied"][0] == a["pick"]
                    agree[1] += 1
    ties, within = tie_evidence(runs)
    return {"groups": groups, "leader_agreement": _rate(agree), "leader_pairs": agree[1], "certified_picks": counts[True][1], "certified_repeat": _rate(counts[True]),
            "uncertified_picks": counts[False][1], "uncertified_repeat": _rate(counts[False]),
            "tie_picks": ties[1], "tie_repeat": _rate(ties), "verdict_agreement": _rate(within), "verdict_pairs": within[1],
            "race_share_mean": sum(shares) / len(shares) if shares else None, "race_share_max": max(shares, default=None),
            "reruns": len(runs)}


def _verdict_set(entry: dict[str, Any]) -> list[Any]:
    """The configurations a raced rerun's verdict names: its certified pick, or its tied set."""
    return [entry["pick"]] if entry["certified"] else list(entry.get("tied") or [])


def tie_evidence(runs: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """What the reruns whose races ended in a tie say, as [repeated, all] counts:
    - the tie picks (a tied set's pick follows the tie rule) equal to their group's most common tie pick;
    - for every ordered pair of raced reruns of a group, whether the first's pick lies inside the
      second's verdict (its certified pick, or its tied set): verdicts that do not contradict."""
    ties, within = [0, 0], [0, 0]
    for g in runs[0]["groups"]:
        entries = [r["groups"][g] for r in runs if g in r["groups"]]
        tie_keys = [json.dumps(e["pick"], sort_keys=True) for e in entries if e.get("raced") and not e["certified"]
                    and e.get("tied")]
        if tie_keys:
            mode = Counter(tie_keys).most_common(1)[0][0]
            ties[0] += sum(k == mode for k in tie_keys)
            ties[1] += len(tie_keys)
        raced = [e for e in entries if e.get("raced") and _verdict_set(e)]
        for i, a in enumerate(raced):
            for j, b in enumerate(raced):
                if i != j:
                    within[0] += a["pick"] in _verdict_set(b)
                    within[1] += 1
    return ties, within


def _rate(c: list[int]) -> float | None:
    return c[0] / c[1] if c[1] else None


def report(summary: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{100 * v:.0f}%"

    lines = [f"{summary['reruns']} reruns"]
    for r in runs:
        lines.append(f"  {r['name']}: sweep GPU {r['sweep_gpu_s']:.1f} s, race {r['race_gpu_s']:.1f} s "
                     f"({pct(r['race_share'])}), {r['race_rounds']} rounds, {r.get('race_mode', 'runs')} "
                     f"({r.get('race_processes')} processes)")
        sm = r.get("sampling") or {}
        if sm.get("configurations"):
            lines.append(f"    sampling: {sm['configurations']} configurations, runs each median {sm['runs_median']:g} "
                         f"(max {sm['runs_max']}), noise from {sm['sources']}"
                         + (f"; {sm['reason']}" if sm.get("reason") else ""))
        for g, x in r["groups"].items():
            word = (f"certified ({x['rounds']} rounds)" if x["certified"] else
                    f"tie {x['tied']} ({x['rule']})" if x["raced"] else f"not raced: {x.get('not_raced') or '?'}")
            lines.append(f"    {g}: {word}")
    for g, x in summary["groups"].items():
        picks = "; ".join(f"{','.join(str(v) for v in p.values())}{'*' if c else ''}"
                          for p, c in zip(x["picks"], x["certified"]))
        lines.append(f"  {g}: {picks}  (* certified) certified repeat {pct(x['certified_repeat'])}, "
                     f"uncertified repeat {pct(x['uncertified_repeat'])}")
    lines.append(f"certified picks: {summary['certified_picks']}, repeat {pct(summary['certified_repeat'])} "
                 f"(target >= 95%); uncertified: {summary['uncertified_picks']}, repeat "
                 f"{pct(summary['uncertified_repeat'])}")
    lines.append(f"tie picks (the tie rule's pick of a tied set): {summary.get('tie_picks', 0)}, repeat "
                 f"{pct(summary.get('tie_repeat'))}; each raced pick inside every other rerun's verdict (its "
                 f"certified pick or tied set): {pct(summary.get('verdict_agreement'))} of "
                 f"{summary.get('verdict_pairs', 0)} pairs")
    lines.append(f"certified picks against the other reruns' race leaders: {pct(summary.get('leader_agreement'))} "
                 f"agree ({summary.get('leader_pairs', 0)} pairs; a tie's pick follows the tie rule, its leader the "
                 "measurements)")
    lines.append(f"race GPU time / sweep GPU time: mean {pct(summary['race_share_mean'])}, max "
                 f"{pct(summary['race_share_max'])} (target < 20%)")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("space", nargs="?", type=Path, default=ROOT / "spaces" / "seed.yaml")
    ap.add_argument("-k", type=int, default=None, help="reruns (default 3; 2 with --quick)")
    ap.add_argument("--quick", action="store_true",
                    help="a quick end-to-end check (the CPU toy): 2 reruns, no warm-up dry run, no confirmation")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--executor", default="local")
    ap.add_argument("--certify", action="append", default=[], metavar="KEY=VALUE",
                    help="a certify: setting for the reruns, e.g. cap_s=120, top=2, max_rounds=12")
    ap.add_argument("--first", type=int, default=0, help="number the reruns from this one")
    ap.add_argument("--no-warm", action="store_true", help="skip the dry run that fills the object cache")
    ap.add_argument("--no-confirm", action="store_true", help="skip the end-to-end confirmation jobs of each rerun")
    ap.add_argument("--jobs-dir", type=Path, default=ROOT / "build" / "stability" / "jobs")
    ap.add_argument("--results-dir", type=Path, default=ROOT / "build" / "stability" / "results")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "pick-stability.json")
    ap.add_argument("--analyze", nargs="+", metavar="NAME", help="only analyze these sweeps (already run)")
    ap.add_argument("--combine", nargs="+", type=Path, metavar="OUT", help="analyze the reruns of these --out files")
    args = ap.parse_args()
    if args.k is None:
        args.k = 2 if args.quick else 3
    if args.quick:
        args.no_warm = args.no_confirm = True
    space = args.space.resolve()
    if args.combine:
        runs = [r for f in args.combine for r in json.loads(f.read_text())["runs"]]
        summary = analyze(runs)
        print(report(summary, runs))
        args.out.write_text(json.dumps({"combined": [str(f) for f in args.combine], "summary": summary, "runs": runs},
                                       indent=2, default=str))
        return 0
    if args.analyze:
        names = args.analyze
    else:
        if args.certify:
            settings = {k: yaml.safe_load(v) for k, _, v in (x.partition("=") for x in args.certify)}
            space = space_copy(space, settings, args.results_dir)
        base = str((yaml.safe_load(args.space.read_text()) or {}).get("name") or args.space.stem)
        if not args.no_warm:
            run_sweep(space, f"{base}-stab-warm", args, ["--dry-run"])
        names = []
        for i in range(args.first, args.first + args.k):
            names.append(f"{base}-stab-{i}")
            run_sweep(space, names[-1], args, ["--no-confirm", "--certify"] if args.no_confirm else [])
            write(args, space, [one(n, args.jobs_dir, args.results_dir) for n in names])   # after each rerun
    runs = [one(n, args.jobs_dir, args.results_dir) for n in names]
    summary = write(args, space, runs)
    print(report(summary, runs))
    print(f"written: {args.out}")
    return 0


def write(args: argparse.Namespace, space: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    summary = analyze(runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"space": str(space), "backend": args.backend, "summary": summary, "runs": runs},
                                   indent=2, default=str))
    return summary


if __name__ == "__main__":
    sys.exit(main())
