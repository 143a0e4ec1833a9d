"""What a certification race costs on the GPU, estimated before it runs from the sweep's own tables.

sweep.decide.certify asks of a RacePlan what certifying costs (`cost_s`: the
rounds up to its first decisive look, stats.Race.decisive_looks, with the jobs a
round really runs): at most the race's cap it runs, above it it races nothing and
the sweep says what cap would. `affordable_rounds` (what a budget buys) and
`needed_s` (the rounds up to that look at a run of every entrant) say the same
for bench and notes.

In lockstep (certify.lockstep, where every entrant's job measured
per-iteration samples: its program has timed NVTX iterations) a round is a fresh
process of each entrant's own job taking certify.turns timed iterations in
turns, and the processes of several rounds start at once (sweep.node.lockstep): a
start-up a batch of rounds, plus the turns. Otherwise a round runs every needed
program once, start-up and profiler included (about 1.5 s for the engine with
cupti, 5 s with nsys): top + 1 programs when the groups race together on
combined configurations (sweep.decide.race_combined.combined), else one per entrant of every
group. No pick can be certified before the first look at which a leader that
won every round would be (9 rounds with two to four entrants, at the default 30
rounds and alpha 0.05).

In overlap mode (RacePlan.overlap: the cupti backend on one GPU; sweep.node.race_runs) the
runs of every round up to the race's next look start together, at most MAX_OVERLAP_SLOTS
at once, each program holding the GPU only for its GPU work: those rounds then take the
longer of their runs' waves (a run's wall time each) and their runs' GPU work one after
another (each job's GPU-busy seconds per run, result.json's env["gpu_use"]["busy_s"]:
kernels, copies, memsets and context creation).

Every constant below is measured, and says where: they set the estimate only,
never what a race measures or decides.
"""

from __future__ import annotations

import math

import pandas as pd

from sweep.decide.collect import Collected
from sweep.node.gpus import MAX_OVERLAP_SLOTS
from sweep.node.race import RacePlan
from sweep.stats import Entrant, Race

ALPHA = 0.05
# A lockstep turn beyond its kernels' own time: the launch gaps inside the iteration, two context syncs and
# the pipe's words (the engine at batch 4 x 64 on an H100: 5.2-5.6 ms a turn, bench/lockstep_copies.py).
TURN_OVERHEAD_S = 0.005
# A lockstep batch of n processes starts in about (1 + PROCESS_START_SHARE x (n - 1)) times one process's
# start-up: each starts on its own CPU, but the GPU takes their contexts, uploads and warm-ups one at a time
# (the engine on an H100: 16 processes in 4.4-4.8 s against 1.3 s for one, bench/lockstep_copies.py).
PROCESS_START_SHARE = 0.16
# The program's own share of a profiled run, by backend (the rest is the profiler's start-up, export or
# replay): the engine's seed configurations on an H100, run alone against profiled (bench/sweep_overhead.py
# --held): cupti 1.35 of 1.49 s, nsys 1.31 of 5.30 s, ncu 1.25 of 8.80 s, events 1.48 of 2.32 s.
PROGRAM_SHARE = {"cupti": 0.9, "nsys": 0.25, "ncu": 0.14, "events": 0.64}



def first_certifiable_round(entrants: int, max_rounds: int, alpha: float = ALPHA) -> int:
    """The first look at which a race of `entrants` could certify at all: one whose leader won every round."""
    r = Race([Entrant(str(i), 1) for i in range(entrants)], alpha=alpha, max_rounds=max_rounds, budget_s=1.0)
    return r.decisive_looks[0]


def plan_first_round(p: RacePlan) -> int:
    """The first look at which a plan could certify every group: that of its largest group's race."""
    return first_certifiable_round(max(len(x.entrants) for x in p.lanes), p.max_rounds, p.alpha)


def seconds_per_run(configs: pd.DataFrame) -> pd.Series:
    """Each job's profile seconds per profiled run (its runs count every workload's), by row."""
    runs = configs["runs"].fillna(1).clip(lower=1) if "runs" in configs else 1
    return configs["profile_s"].fillna(0) / runs


def own_seconds_per_run(configs: pd.DataFrame) -> pd.Series:
    """seconds_per_run less what the run waited for the GPU's token and the node's context gate
    (overlap mode: up to 15 other programs' GPU work and contexts, gpu_wait_s): about what the
    run takes without them. A race's runs queue
    only behind each other, which the estimates count apart (their GPU work in a row). Without a
    recorded wait (exclusive mode, older tables), seconds_per_run itself. Measured: quick_check's
    16 jobs started at once on one H200 took 10-14 s each for a run of about a second, and the
    race planned from them was estimated at 66 s where it ran in 32 s."""
    per_run = seconds_per_run(configs)
    if "gpu_wait_s" not in configs:
        return per_run
    return (per_run - configs["gpu_wait_s"].astype(float).fillna(0.0)).clip(lower=0.0)


def round_s(configs: pd.DataFrame, tags: list[str], workloads: int = 1) -> float:
    """Seconds one round should take: each job's profiled run of every workload, from the sweep's own
    profile time per run (a job's runs count every workload's, so a round takes `workloads` of them)."""
    if configs.empty or "profile_s" not in configs:
        return 0.0
    per_run = seconds_per_run(configs.drop_duplicates("tag").set_index("tag")).to_dict()
    return float(sum(per_run.get(t, 0.0) for t in tags)) * max(1, workloads)


def lockstep_costs(p: RacePlan, c: Collected) -> tuple[float, float]:
    """A lockstep race's (start-up, round) seconds: the start-up of one process, bounded by the
    quickest profiled run among the entrants, less its waits for the token (own_seconds_per_run)
    and its profiler's share (PROGRAM_SHARE: a lockstep
    process runs under the CUPTI library, whatever the sweep's backend); a round `turns` timed
    iterations of each entrant's every workload, from the sweep's own kernel times per iteration,
    plus TURN_OVERHEAD_S a turn."""
    cf = c.configs
    runs = cf[cf["tag"].isin(p.tags())] if not cf.empty and "profile_s" in cf else cf.iloc[0:0]
    own = runs["backend"].map(PROGRAM_SHARE).fillna(1.0) if "backend" in runs else 1.0
    start_s = float((own_seconds_per_run(runs) * own).min()) if not runs.empty else 0.0
    m = c.measurements
    if m.empty or "total_median_ns" not in m:
        return start_s, 0.0
    mine = m[m["tag"].isin(p.tags())]
    per_turn = mine.groupby(["tag", "workload"])["total_median_ns"].sum() / 1e9 + TURN_OVERHEAD_S
    return start_s, float(per_turn.sum()) * p.turns


def lockstep_seconds(p: RacePlan, c: Collected, rounds: int, beside: float = 1.0) -> float:
    """About how long `rounds` lockstep rounds take: each batch (as many rounds as plan.processes
    holds) one process's start-up plus PROCESS_START_SHARE of it for each other process (the
    start-up work the node serialises), and the rounds' turns. beside: the node's processes
    starting for each of this race's (other races at once on other GPUs start theirs too)."""
    start_s, per_round = lockstep_costs(p, c)
    programs = len(p.tags()) * max(1, len(p.weights))
    per_batch = max(1, p.processes // programs)
    full, last = divmod(rounds, per_batch)
    batch_s = [start_s * (1 + PROCESS_START_SHARE * (n * programs * beside - 1))
               for n in [per_batch] * full + [last] if n]
    return sum(batch_s) + rounds * per_round


def side_by_side_s(plans: list[RacePlan], c: Collected) -> float | None:
    """Seconds until the last of these lockstep races, run at once on GPUs of their own, reaches its
    first decisive look; None unless every one is in lockstep (what a round of whole runs costs beside
    other races is not modelled). Each race's rounds take their turns on its own GPU, but the node
    creates one process's CUDA context at a time whatever its GPUs, so every batch's start-up counts
    the processes of all the races: on four H200s (driver 580, bench/context_startup/run.sh), 16
    programs started at once took 4.9 s spread over four GPUs and 4.1 s on one, about 0.3 s each."""
    if not plans or not all(p.lockstep for p in plans):
        return None
    programs = [len(p.tags()) * max(1, len(p.weights)) for p in plans]
    node = sum(programs)
    return max(lockstep_seconds(p, c, plan_first_round(p), beside=node / n) for p, n in zip(plans, programs))


def affordable_rounds(p: RacePlan, c: Collected, jobs_per_round: int) -> float:
    """Rounds the budget buys (inf when unknown): in lockstep, at lockstep_seconds (a start-up a
    batch, `turns` iterations of each entrant a round); else at runs_rounds_s, a job's round
    running each of its workloads once."""
    if p.lockstep:
        return next((n - 1 for n in range(1, p.max_rounds + 1) if lockstep_seconds(p, c, n) > p.budget_s),
                    p.max_rounds)
    one = runs_rounds_s(p, c, jobs_per_round, 1)
    if not one:             # the tables cannot say (None), or a round costs nothing measurable
        return math.inf
    if not p.overlap:
        return p.budget_s / one
    return next((n - 1 for n in range(1, p.max_rounds + 1)
                 if (runs_rounds_s(p, c, jobs_per_round, n) or 0.0) > p.budget_s), p.max_rounds)


def runs_rounds_s(p: RacePlan, c: Collected, jobs_per_round: int, rounds: int) -> float | None:
    """`rounds` rounds of whole runs, `jobs_per_round` jobs each running every workload once, at the
    sweep's median seconds per profiled run (less its waits for the token, own_seconds_per_run):
    one after another; or in overlap mode, where the
    rounds up to a look run together (sweep.node.race_runs.ConcurrentRuns), the longer of their
    runs' waves (at most plan.processes, and MAX_OVERLAP_SLOTS, at once) and their GPU-busy
    seconds in a row. None: the tables cannot say."""
    configs = c.configs
    ok = configs[(configs["status"] == "ok") & (configs["role"] == "sweep")] if not configs.empty else configs
    if ok.empty or "profile_s" not in ok:
        return None
    per_run = float(own_seconds_per_run(ok).median())
    runs = rounds * jobs_per_round * max(1, len(p.weights))
    busy = ok["gpu_busy_s"].dropna() if "gpu_busy_s" in ok else ok.iloc[0:0]
    if not p.overlap or busy.empty:
        return per_run * runs
    waves = math.ceil(runs / min(p.processes, MAX_OVERLAP_SLOTS))
    return max(waves * per_run, runs * float(busy.median()))


def cost_s(p: RacePlan, c: Collected, jobs_per_round: int) -> float:
    """What certifying costs, the estimate the race is planned by (at most the cap: it runs): the
    rounds up to the first look that could certify every group, at lockstep_seconds (lockstep) or
    at runs_rounds_s (else: `jobs_per_round` jobs a round running each workload once, the rounds
    together in overlap mode). 0 when the sweep's tables cannot say."""
    first = plan_first_round(p)
    if p.lockstep:
        return lockstep_seconds(p, c, first)
    return runs_rounds_s(p, c, jobs_per_round, first) or 0.0


def needed_s(p: RacePlan, c: Collected) -> float:
    """About how long the race must run before it could certify anything: the rounds up to the
    first look that could, at lockstep_seconds (lockstep) or one profiled run of every entrant a
    round (else)."""
    first = plan_first_round(p)
    if p.lockstep:
        return lockstep_seconds(p, c, first)
    return first * round_s(c.configs, p.tags(), max(1, len(p.weights)))
