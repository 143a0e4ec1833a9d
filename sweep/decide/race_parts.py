"""Races side by side: the groups' races split over the GPUs when the executor has several.

A plan whose groups race on jobs of their own (the sweep's jobs, not combined configurations,
which serve every group in one run) splits into at most one plan a GPU (`parts`). A round of a
race runs each of its jobs once for every group it serves, so a round's wall time goes with the
jobs it runs, and groups whose entrants share jobs cost less together: the seed space's five
groups share four jobs, and five races at once on two GPUs took 62 s where the one race took
46 s on one GPU (two H200s, bench/scaling.py). Groups go, largest first, to the part that then runs
the fewest jobs (an empty one too; of equals, the part they add fewest jobs to); the split is
taken when its largest part runs fewer jobs a round than the whole plan, and all parts together
at most SPLIT_WORK times as many, and, where the race's cost can be estimated (`side_by_side_s`,
lockstep races on one node's GPUs), when the parts run at once reach their first decisive looks
sooner than the whole: the node creates one process's CUDA context at a time whatever its GPUs
(16 programs started at once took 4.9 s spread over four H200s, 4.1 s on one), so parts whose
rounds are mostly start-ups gain nothing from their own GPUs (the seed space's race split into two
parts on two H200s ran 1.23 s a round against 0.84 s as one race). The parts are dispatched
together, so the local executor runs them on different GPUs at once and Slurm as tasks of one
array; each part is one job, so one group's entrants always run on one GPU. A part's budget is the whole plan's times its share of
the plan's jobs a round (at least an even share among the parts, and at least FIRST_LOOK_MARGIN
times what reaching its own first decisive look costs, `first_look_s`, since start-ups do not
shrink with the jobs; never more than the whole): a round's time goes with the jobs it runs, so
each group gets about the rounds the one race would have given it, and the race's wall time
shrinks to its largest part's share. (With the whole budget each, two parts of
the seed space's race on two H200s ran 59 s against 50 s for the one race on one GPU: parts that
do not separate their entrants run to their cap.) Outcomes are read back in the plan's group order,
whatever order the races ended in.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, Callable

from sweep import dispatch as executors
from sweep.core import atomic
from sweep.dispatch.progress import Progress
from sweep.node import render
from sweep.node.race import OUTCOME, PLAN, ROLE, RacePlan, read_outcome
from sweep.records import read_result
from sweep.space import Space


SPLIT_WORK = 1.5     # a split's job runs a round, at most, over the whole plan's (GPU time for wall time)
FIRST_LOOK_MARGIN = 1.5     # a part's budget, at least, over its estimated cost to its first decisive look
FirstLook = Callable[[RacePlan], float]     # a plan's estimated seconds to its first decisive look (race_cost.cost_s)
# races run at once on GPUs of their own: seconds until the last reaches its first decisive look, None when
# the tables cannot say (race_cost.side_by_side_s)
SideBySide = Callable[[list[RacePlan]], "float | None"]


def _part(p: RacePlan, lanes: list[int], n_parts: int, first_look_s: FirstLook | None) -> RacePlan:
    part = dataclasses.replace(p, lanes=tuple(p.lanes[i] for i in sorted(lanes)))
    tags = part.tags()
    part = dataclasses.replace(part, jobs={t: p.jobs[t] for t in tags}, hashes={t: p.hashes[t] for t in tags})
    budget = p.budget_s * max(len(tags) / len(p.tags()), 1 / n_parts)
    if first_look_s is not None:
        budget = max(budget, FIRST_LOOK_MARGIN * first_look_s(part))
    return dataclasses.replace(part, budget_s=round(min(budget, p.budget_s), 1))


def parts(p: RacePlan, gpus_at_once: int, combined: bool, first_look_s: FirstLook | None = None,
          side_by_side_s: SideBySide | None = None) -> list[RacePlan]:
    """The races to run: the plan's groups in at most `gpus_at_once` parts when that shortens a
    round, and the parts' race where it can be estimated (see the module's text), each part's budget
    its share; else the plan itself, as when one GPU takes it or the groups race combined
    configurations."""
    if gpus_at_once < 2 or len(p.lanes) < 2 or combined:
        return [p]
    jobs = [{e.id for e in lane.entrants} for lane in p.lanes]
    bins: list[tuple[set[str], list[int]]] = [(set(), []) for _ in range(min(gpus_at_once, len(p.lanes)))]
    for i in sorted(range(len(jobs)), key=lambda i: -len(jobs[i])):
        tags, members = min(bins, key=lambda b: (len(b[0] | jobs[i]), len(jobs[i] - b[0])))
        tags |= jobs[i]
        members.append(i)
    used = [b for b in bins if b[1]]
    whole = len(set().union(*jobs))
    if len(used) < 2 or max(len(t) for t, _ in used) >= whole or sum(len(t) for t, _ in used) > SPLIT_WORK * whole:
        return [p]
    split = [_part(p, members, len(used), first_look_s) for _, members in sorted(used, key=lambda b: min(b[1]))]
    if side_by_side_s is not None:
        whole_s, split_s = side_by_side_s([p]), side_by_side_s(split)
        if whole_s is not None and split_s is not None and split_s >= whole_s:
            return [p]
    return split


def recorded_parts(p: RacePlan, race_dir: Callable[[RacePlan], Path],
                   first_look_s: FirstLook | None = None) -> list[tuple[RacePlan, dict[str, Any]]]:
    """The races already run for this plan: the whole plan's, else those of the split (into as many
    parts as the run that made them had GPUs, budgets as `parts` gives them) whose outcomes cover
    the most groups."""
    whole = read_outcome(race_dir(p))
    if whole is not None and whole.get("plan_digest") == p.digest():
        return [(p, whole)]
    best: list[tuple[RacePlan, dict[str, Any]]] = []
    for gpus in range(len(p.lanes), 1, -1):
        found = []
        # (a split the estimate vetoed ran as the whole plan, found above: the parts are the job count's)
        for part in parts(p, gpus, combined=False, first_look_s=first_look_s):
            out = read_outcome(race_dir(part))
            if out is not None and out.get("plan_digest") == part.digest():
                found.append((part, out))
        if sum(len(x.lanes) for x, _ in found) > sum(len(x.lanes) for x, _ in best):
            best = found
    return best


def run_parts(space: Space, sw: Any, races: list[RacePlan], race_dir: Callable[[RacePlan], Path], cost: float,
              partition: str) -> list[tuple[RacePlan, dict[str, Any] | None, str]]:
    """Render each race's job, dispatch those without an outcome together, and read every outcome back
    in order: (plan, outcome or None, why there is none)."""
    jobs, todo = [], []
    for p in races:
        d = race_dir(p)
        d.mkdir(parents=True, exist_ok=True)
        digest = p.digest()
        jc = render.job_config(space, None, f"race_{digest}", digest, sw.commit, sw.values, role=ROLE,
                               settings=sw.settings())
        atomic.write_json(d / PLAN, p.to_dict())
        atomic.write_json(d / "config.json", jc.to_dict())
        jobs.append(executors.PendingJob(jc.tag, d, digest, partition))
        out = read_outcome(d)
        if out is None or out.get("plan_digest") != digest or executors.should_run(d, digest, True)[0]:
            (d / OUTCOME).unlink(missing_ok=True)
            todo.append(jobs[-1])
    if todo:
        whole = races[0] if len(races) == 1 else None
        entrants = sum(len(x.entrants) for p in races for x in p.lanes)
        n = len(whole.tags()) if whole else 0
        how = ((f"in lockstep, a process of each of {n} jobs a round, {whole.turns} turns each" if whole.lockstep
                else f"{n} jobs a round") if whole else f"{len(races)} races at once, each on a GPU of its own")
        budget = max(p.budget_s for p in races)
        print(f"certifying: racing {entrants} entrants of {sum(len(p.lanes) for p in races)} group(s) ({how}), "
              f"about {cost:.0f} s to its first decisive round, for up to {budget:.0f} s "
              f"{'on one GPU' if whole else 'a race'}", file=sys.stderr)
        progress = Progress(space.name + ":certify")
        progress.add(len(todo))
        sw.dispatch(todo, progress, progress.finished)
        progress.close()
    out = []
    for p, j in zip(races, jobs):
        got = read_outcome(j.dir)
        if got is None or got.get("plan_digest") != p.digest():
            r = read_result(j.dir)
            out.append((p, None, f"{r.status}: {r.reason}" if r is not None else "it left no outcome"))
        else:
            out.append((p, got, ""))
    return out
