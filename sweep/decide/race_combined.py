"""The race on combined configurations: every group's rank-r entrant in one program, so a round
runs top + 1 programs however many groups race (sweep.decide.certify, which plans and runs it).

    wants_combined(space, p)          whether a race goes on combined configurations
    combined(space, best, p)          the configurations, as (rank, values)
    find_entrants(space, ranks, ...)  the ok jobs already measuring them (a sweep job, an entrant, the baseline)
    run_entrants(space, sw, ...)      build, verify and measure the others (role "entrant")
    shared(space, best, c, dir, p)    p raced on them, when every one was measured ok

A group that races the program's own launch sizes (values {}: the baseline job, where the space
declares no defaults) leaves its macros unset in the default rank (space.pick_config); a rank that
sets only declared defaults and leaves the rest to the program is the baseline job itself.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, Mapping, Protocol

from sweep.decide.collect import Collected
from sweep.decide import by_gpu
from sweep.node.race import Lane, RacePlan
from sweep.records import Best
from sweep.space import Config, Space, check, pick_config, tag

ENTRANT_ROLE = "entrant"  # a combined configuration run for the race (combined)


def wants_combined(space: Space, p: RacePlan | None) -> bool:
    """Whether the race goes on combined configurations: certify.combine, and a run a sample (in
    lockstep the entrants' own jobs race, unless one round's processes outnumber certify.processes)."""
    return (p is not None and space.certify.combine
            and (not p.lockstep or len(p.tags()) * max(1, len(p.weights)) > space.certify.processes))


def combined(space: Space, best: Best, p: RacePlan) -> list[tuple[str, dict[str, int]]] | None:
    """The configurations that race every group at once, as (rank, values): rank r sets each
    group's r-th fastest entrant ("1", "2", ...), rank "default" each group's default; the
    macros a rank leaves unset keep the picks (best.config); the default rank of a group racing the
    program's own sizes leaves that group's macros unset (pick_config). One run of such a configuration
    gives a sample to every group, so a round runs top + 1 programs instead of one per
    entrant of every group. It rests on what factorized selection already assumes: a group's
    kernels take the same time whatever launch sizes the other groups' kernels use. None when
    fewer than two groups race (nothing to share) or a combination breaks a constraint (each
    group then races its own jobs)."""
    if len(p.lanes) < 2:
        return None
    picks = {q.macro: best.config[q.macro] for q in space.swept if q.macro in best.config}
    ranks: dict[str, dict[str, int]] = {}
    for x in p.lanes:
        for entrant, rank in ranks_of(x).items():
            values = ranks.setdefault(rank, dict(picks))
            values.update(x.values[entrant])
            if not x.values[entrant]:       # the program's own: its macros unset
                for m in x.macros:
                    values.pop(m, None)
    out = []
    for rank, values in ranks.items():
        if check(space, pick_config(space, values)) is not None:
            return None
        out.append((rank, values))
    return out


def ranks_of(x: Lane) -> dict[str, str]:
    """Each entrant's rank in its lane: "1", "2", ... in the lane's order (fastest first), "default" for the default."""
    ranked = [e.id for e in x.entrants if not e.is_default]
    return {e.id: "default" if e.is_default else str(ranked.index(e.id) + 1) for e in x.entrants}


def combined_plan(p: RacePlan, jobs: Mapping[str, tuple[str, str, str]]) -> RacePlan:
    """p with each entrant replaced by the combined job of its rank (jobs: rank -> tag, folder, config hash)."""
    lanes = []
    for x in p.lanes:
        rank_of = ranks_of(x)
        entrants = tuple(dataclasses.replace(e, id=jobs[rank_of[e.id]][0]) for e in x.entrants)
        lanes.append(Lane(x.macros, x.patterns, entrants, {jobs[rank_of[e.id]][0]: x.values[e.id] for e in x.entrants}))
    tags = {t: (d, h) for t, d, h in jobs.values()}
    return dataclasses.replace(p, lanes=tuple(lanes), jobs={t: d for t, (d, _) in tags.items()},
                               hashes={t: h for t, (_, h) in tags.items()})


def find_entrants(space: Space, ranks: list[tuple[str, dict[str, int]]], c: Collected, sweep_dir: Path) \
        -> dict[str, tuple[str, str, str]]:
    """rank -> (tag, folder, config hash) of the ok job measuring each combined configuration:
    one of role "entrant" (run for the race) or one the sweep measured itself; one that sets
    only declared defaults and leaves the rest to the program is the baseline job's."""
    cf = c.configs
    if cf.empty or "config_hash" not in cf:
        return {}
    ok = cf[(cf["status"] == "ok") & cf["role"].isin([ENTRANT_ROLE, "sweep"])]
    found = {}
    for rank, values in ranks:
        full = pick_config(space, values).as_dict()
        hit = ok
        for macro, v in full.items():
            hit = hit[hit[macro] == v] if macro in hit else hit.iloc[0:0]
        for macro in (p.macro for p in space.parameters if p.macro not in full):   # left to the program
            hit = hit[hit[macro].isna()] if macro in hit else hit
        if hit.empty and all(space.parameter(m).default == v for m, v in full.items()
                             if not space.parameter(m).derived):
            hit = cf[(cf["status"] == "ok") & (cf["role"] == "baseline")]   # the program's own and the defaults
        if not hit.empty:
            row = hit.sort_values("role").iloc[0]    # "entrant" before "sweep": either measured it
            found[rank] = (str(row["tag"]), str(Path(sweep_dir) / str(row["tag"])), str(row["config_hash"]))
    return found


def shared(space: Space, best: Best, c: Collected, sweep_dir: Path, p: RacePlan | None) -> RacePlan | None:
    """The race of p on combined configurations, when every one of them was measured ok; else None."""
    ranks = combined(space, best, p) if wants_combined(space, p) else None
    if not ranks:
        return None
    found = find_entrants(space, ranks, c, sweep_dir)
    return combined_plan(p, found) if len(found) == len(ranks) else None


def unshared(p: RacePlan, ranks: list[tuple[str, dict[str, int]]]) -> RacePlan:
    """p as it is (each group races its own jobs), saying why on stderr."""
    print(f"  note: some of the {len(ranks)} combined configurations failed (see `status`): each group races its "
          "own jobs instead", file=sys.stderr)
    return p


class Renders(Protocol):
    """What running entrants needs of the sweep (sweep.decide.certify.Sweep has it)."""

    def render(self, config: Config | None, tag: str, role: str = "sweep", partition: str = "") -> Any: ...

    def run_pending(self, jobs: list[Any], label: str, say: str) -> None: ...


def run_entrants(space: Space, sw: Renders, ranks: list[tuple[str, dict[str, int]]], found: Mapping[str, Any],
                 partition: str = "") -> None:
    """Build, verify and measure the combined configurations no job has measured yet (role
    "entrant": selection never counts them) through the sweep's executor."""
    configs = {}   # two ranks no group races at both may combine to one configuration: one job
    for rank, values in ranks:
        if rank not in found:
            cfg = pick_config(space, values)
            name = f"{ENTRANT_ROLE}_{tag(space, cfg)}"
            configs[by_gpu.partition_tag(name, partition) if partition else name] = cfg
    jobs = [sw.render(cfg, name, role=ENTRANT_ROLE, partition=partition) for name, cfg in configs.items()]
    sw.run_pending(jobs, space.name + ":certify", f"certifying: {len(jobs)} configuration(s) that race every group "
                   "at once (each group's same rank in one program run)")
