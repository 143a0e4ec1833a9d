"""Can a lockstep race be trusted on this GPU? Copies of one program, raced against each other.

    python bench/lockstep_copies.py JOB_DIR [JOB_DIR ...] [--copies 4] [--rounds 24] [--turns 3]
                                    [--processes 16] [--one-process] [--out FILE.json]

Copies of one job's own timing command (the same binary, the same arguments:
nothing tells them apart) race each other in lockstep (sweep.node.lockstep), as the
certification race runs its entrants: a round is a fresh process of each copy
taking TURNS timed iterations in turns with the others, the processes of several
rounds started at once (at most PROCESSES). Every certification among identical
programs is false, and the race's Bonferroni design allows at most alpha (5%) of
them. Per kernel (its launch shapes summed per iteration) it reports:

    us/iter     the median per-iteration time
    turns       relative spread of a process's turns ((max - min) / median, the median
                over processes): the noise inside one process
    processes   relative spread of one copy's round samples over its rounds (IQR /
                median, the median over copies): what a process adds
    false       races among the copies (all of them, and each pair) that certified one
                copy over another, with the rounds as recorded (sweep.stats.Race)

and the costs: each batch's start-up (until every process waited for its first
turn) and the seconds a turn takes beyond its kernels.

--one-process: each copy runs in ONE process for all ROUNDS turns, and a round is
one turn of each (what a race paired iteration by iteration would do). On an H100
(the engine's seed default build, 4 copies, 40 rounds) this certified one copy
over another in 7 of 7 residual_kernel races, 4 of 7 gelu_kernel and 3 of 7
encoder_kernel races: a process's own offset is not noise its iterations show.
A round a process (the default, as the race runs): 0 of 7 on every kernel of
two builds (24 rounds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from sweep.node import clocks, race  # noqa: E402
from sweep.node.job import Job  # noqa: E402
from sweep.node.lockstep import Lockstep, Program  # noqa: E402
from sweep.profile import Measurement, cupti  # noqa: E402
from sweep.node.race import RACE_WARMUP, rerun  # noqa: E402
from sweep.stats import Entrant, Race  # noqa: E402


def per_kernel(ms: list[Measurement]) -> dict[str, list[float]]:
    """Per kernel, its shapes' per-iteration totals summed, iteration by iteration."""
    out: dict[str, list[float]] = {}
    for m in ms:
        totals = out.setdefault(m.kernel, [0.0] * len(m.iter_total_ns))
        for i, x in enumerate(m.iter_total_ns):
            totals[i] += x
    return out


def copies_race(command, library: Path, a: argparse.Namespace, folder: Path, reader, facts,
                timeout_s: float) -> dict:
    """The copies' rounds: kernel -> copy -> [round sample], with each process's turns and the costs.
    command(n): the timing command asking for n iterations."""
    one = a.one_process
    turns = a.rounds if one else a.turns
    cmd = tuple(command(turns + 1))
    keys = [f"copy{i}" for i in range(a.copies)]
    progs = {k: Program(k, cmd, library, folder / k) for k in keys}
    samples: dict[str, dict[str, list[float]]] = {}
    spreads: list[float] = []
    t0 = time.monotonic()
    with Lockstep(progs, timeout_s=timeout_s, turns=turns, max_processes=a.processes, reader=reader,
                  facts=facts) as ls:
        taken = [ls.round(race.rotated(keys, r), (1 if one else a.rounds) - r) for r in range(1 if one else a.rounds)]
        took_s = time.monotonic() - t0
        for r in taken:
            for k, ts in r.items():
                if one:
                    per_turn = [per_kernel(ls.sample([t])) for t in ts]
                    for kernel in per_turn[0]:
                        samples.setdefault(kernel, {})[k] = [x[kernel][0] for x in per_turn]
                    continue
                for kernel, xs in per_kernel(ls.sample(ts)).items():
                    samples.setdefault(kernel, {}).setdefault(k, []).append(statistics.median(xs))
                    spreads.append((kernel, (max(xs) - min(xs)) / statistics.median(xs)))
        kernel_s = sum(x for kernel in samples.values() for xs in kernel.values() for x in xs) / 1e9
        turn_count = ls.turns
        summary = {"start_s": ls.start_s, "batches": ls.batches, "processes": ls.starts, "turns": turn_count,
                   "throttled_rounds": ls.throttled_rounds}
    # kernel_s counts a round's median turn once per process; the turns' own time is about that x turns
    beyond = (took_s - sum(ls.start_s) - kernel_s * (1 if one else turns)) / max(1, turn_count)
    return {"samples": samples, "turn_spreads": spreads, "took_s": took_s, "beyond_kernels_s": beyond, **summary}


def false_certifications(per_copy: dict[str, list[float]]) -> tuple[int, int]:
    """(certified, races): a race of all the copies on the recorded rounds, and one per pair."""
    keys = sorted(per_copy)
    n = min(len(v) for v in per_copy.values())
    groups = [keys] + [[a, b] for i, a in enumerate(keys) for b in keys[i + 1:]]
    certified = 0
    for group in groups:
        r = Race([Entrant(k, 32) for k in group], max_rounds=n, min_rounds=min(5, n))
        res = None
        for i in range(n):
            res = r.add_round({k: per_copy[k][i] for k in r.alive}, 0.0)
            if res is not None:
                break
        certified += res is not None and res.certified
    return certified, len(groups)


def iqr(values: list[float]) -> float:
    q1, q3 = np.percentile(values, [25, 75])
    return float((q3 - q1) / np.median(values))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("jobs", nargs="+", type=Path, help="job folders of a sweep (their built programs)")
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=24)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--processes", type=int, default=16)
    ap.add_argument("--one-process", action="store_true", help="each copy one process for all rounds")
    ap.add_argument("--min-us", type=float, default=0.5, help="kernels shorter than this per iteration are left out")
    ap.add_argument("--out", type=Path, default=Path("lockstep_copies.json"))
    a = ap.parse_args(argv)
    reader = clocks.reader()
    facts = clocks.fingerprint(reader)
    out = {"node": facts, **{k: getattr(a, k) for k in ("copies", "rounds", "turns", "processes", "one_process")},
           "jobs": {}}
    rows = []
    for job_dir in a.jobs:
        job = Job(job_dir)
        library = cupti.library(job.dir.parent.parent.joinpath(*cupti.CACHE))
        folder = job.dir.parent / "_lockstep_copies" / job.dir.name
        (m,) = rerun(job.dir, folder, job.tools, job.timeout_s)[:1]       # the timing command, unchecked
        got = copies_race(lambda n: m.program(iterations=n, warmup=min(m.spec.warmup, RACE_WARMUP)), library, a,
                          folder, reader, facts, job.timeout_s)
        kernels = {}
        for k, per_copy in sorted(got["samples"].items()):
            med = statistics.median(x for xs in per_copy.values() for x in xs)
            if med < a.min_us * 1000:
                continue
            certified, races = false_certifications(per_copy)
            own = [s for kernel, s in got["turn_spreads"] if kernel == k]
            kernels[k] = {"median_ns": med, "turns": statistics.median(own) if own else None,
                          "processes": statistics.median(iqr(xs) for xs in per_copy.values()),
                          "false": certified, "races": races}
            rows.append((job.dir.name, k, kernels[k]))
        out["jobs"][job.dir.name] = {"kernels": kernels, **{k: v for k, v in got.items() if k != "samples"}}
    a.out.write_text(json.dumps(out, indent=1))
    how = "one process a copy" if a.one_process else f"a fresh process a copy a round, {a.turns} turns each"
    print(f"{a.copies} copies x {a.rounds} rounds ({how}) on {facts.get('gpu_name') or facts.get('gpu') or '?'}")
    print(f"{'job':28} {'kernel':30} {'us/iter':>9} {'turns':>7} {'processes':>9} false")
    for job, k, v in rows:
        turns = f"{v['turns']:.2%}" if v["turns"] is not None else "-"
        print(f"{job[:28]:28} {k[:30]:30} {v['median_ns'] / 1000:9.1f} {turns:>7} {v['processes']:9.2%} "
              f"{v['false']}/{v['races']}")
    for job, j in out["jobs"].items():
        print(f"{job}: {j['processes']} processes in {j['batches']} batches, start-up "
              f"{', '.join(f'{s:.2f}' for s in j['start_s'])} s; {j['took_s']:.1f} s in all; beyond the kernels "
              f"{j['beyond_kernels_s'] * 1e3:.2f} ms a turn; throttled rounds {j['throttled_rounds']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
