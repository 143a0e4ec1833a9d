"""What a space file would do, without doing it: `config-sweep validate SPACE`.

The grid (its size and product), how many of its points are legal, the illegal
ones counted by the first constraint each breaks, what the strategy would build
(how many configurations and which), and the kernel globs checked against the
kernel names of a build when there is one (sweep.pipeline.adopt finds them). Nothing
is rendered or written. Each swept parameter's declared default is set beside the
program's own (the `#ifndef NAME / #define NAME N` of its sources): a default that is
not what the program runs without conf.cuh makes every speed-up a ratio to something else.
"""

from __future__ import annotations

import fnmatch
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from sweep import plan as strategies
from sweep.core import paths
from sweep.plan.base import GRID_LIMIT, constant_rules_break, group_size
from sweep.plan.learned import each_group_legal
from sweep.space import Parameter, Space, check, groups, make_config, tags_for
from sweep.space.configs import reason
from sweep.space.init import program_sources, scan_macros
from sweep.space.source_text import reads_once
from sweep.space.source_facts import read_sources
from sweep.space.legality import first_broken_index

SHOWN = 12          # configurations listed by name; the rest are counted
SHARE_SAMPLE = 10_000   # random points of a grid too large to count, to say what share is legal


@dataclass(frozen=True, slots=True)
class OwnDefault:
    """A swept parameter's declared default (None: none) beside the program's own value, from the
    `#ifndef NAME / #define NAME N` in `where` (relative to the target's folder); `followers`: its
    derived macros (`equals:` it) whose own values differ from it, so no default of it is the
    program's own point."""

    macro: str
    declared: int | None
    own: int
    where: str
    in_values: bool
    followers: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class SourceReading:
    """A swept parameter whose kernels: list and the sources disagree on the kernels its macro
    governs (sweep.space.source_facts): a list that misses one lets factorized vary the macro
    under a kernel it believes untouched, and races the pick without that kernel's time."""

    macro: str
    read_by: tuple[str, ...]       # the kernels whose code, launch or arguments read it, as the sources say
    unlisted: tuple[str, ...]      # of those, the ones its kernels: globs miss
    unread: tuple[str, ...]        # kernels of the sources its globs name that never read it


@dataclass(frozen=True, slots=True)
class GroupReading:
    """A parameter group (sweep.space.groups): its macros, the kernels its parameters name, its
    combinations and how many of them are legal (None: too many to list)."""

    macros: tuple[str, ...]
    kernels: tuple[str, ...]
    grid: int
    legal: int | None


@dataclass(frozen=True, slots=True)
class Validation:
    space: Space
    grid: int
    product: str
    legal: int | None                          # None: the grid is too large to count
    broken: tuple[tuple[str, int], ...]        # (first constraint broken, points), most first
    strategy_note: str
    planned: tuple[str, ...] | None            # tags of the configurations a static strategy builds
    globs: tuple[tuple[str, tuple[str, ...]], ...] = ()   # (glob, kernel names it matches)
    kernels_from: str = ""                     # where the kernel names came from ("" : no build found)
    kernel_names: tuple[str, ...] = field(default=())
    sampled: tuple[int, int] | None = None     # a grid too large to count: (random points legal, of how many)
    own_defaults: tuple[OwnDefault, ...] = ()  # swept parameters the program's sources give a value
    readings: tuple[SourceReading, ...] | None = None   # kernels: lists the sources disagree with (None: no sources)
    by_groups: tuple[int, ...] | None = None   # a grid too large to count: each parameter group's legal combinations
    groups: tuple[GroupReading, ...] = ()      # where the parameters fall into several groups

    @property
    def unmatched(self) -> list[str]:
        """Globs that match no kernel of the build (only meaningful with kernel names)."""
        return [g for g, hits in self.globs if not hits] if self.kernel_names else []


@reads_once
def validate(space: Space, kernel_names: list[str] | None = None, kernels_from: str = "",
             warm: Sequence[dict[str, int]] = ()) -> Validation:
    """What the space file says: its grid, legal points and the first rule each illegal one breaks, the
    strategy's plan (with `warm`, the start a learning strategy takes from its start_from recording), and
    its kernel globs against `kernel_names`."""
    n, product = space.size()
    legal, broken = None, Counter()
    if n <= GRID_LIMIT:     # each rule tested once per combination of what it reads (sweep.space.legality)
        derived = space.followers
        first = first_broken_index(space.swept, derived, space.constraints)
        legal = int((first < 0).sum())
        counts = np.bincount(first[first >= 0], minlength=len(space.constraints))
        firsts = np.full(len(space.constraints), -1)
        rejected = np.flatnonzero(first >= 0)
        firsts[first[rejected[::-1]]] = rejected[::-1]      # each rule's first rejected point (last write wins)
        sizes = [len(p.values) for p in space.swept]
        for i in np.flatnonzero(counts):       # the rule's words at the first point it rejects
            at = np.unravel_index(int(firsts[i]), sizes)
            values = make_config(space, {p.macro: p.values[int(k)] for p, k in zip(space.swept, at)})
            broken[reason(space.constraints[i], values.as_dict())] += int(counts[i])
    # each group's legal combinations (None for one too large to list), listed once for the count, the
    # group lines and the search: where the grid was too large to count, or for the lines of several groups
    gs = groups(space)
    combos = each_group_legal(space) if (legal is None and constant_rules_break(space) is None
                                         or legal is not None and len(gs) > 1) else None
    by_groups = None
    if legal is None and combos is not None and None not in combos:
        by_groups = tuple(len(c) for c in combos)      # a rule speaks of one group: the legal set is their product
    sampled = legal_share(space) if legal is None and by_groups is None else None   # counted: no share to estimate
    spec = strategies.spec(space)
    planned, search = None, None
    if spec.plan is None and "samples" not in spec.values(space.strategy):
        # learning, auto: the search says what it will do (auto: which and why; a warm start: from where)
        given = {"combos": combos} if combos is not None else {}     # listed once, for the count and the search
        search = spec.search(space, start=warm, **given) if warm else spec.search(space, **given)
    p = spec.plan(space) if spec.plan is not None else getattr(search, "plan", None)   # auto on a small space
    if p is not None:
        tags = tags_for(space, list(p.configs))
        planned, note = tuple(tags[c] for c in p.configs), p.note or f"{space.strategy.name}: {len(p.configs)} configurations"
    elif search is not None:
        note = search.note
    else:                       # optuna: a trial count, no legal set of its own to count
        note = f"{space.strategy.name}: up to {space.strategy.samples} trials, each batch chosen from the results before it"
    names = tuple(sorted(set(kernel_names or ())))
    globs = []
    for param in space.parameters:
        for g in param.kernels:
            if g not in (x for x, _ in globs):
                globs.append((g, tuple(k for k in names if fnmatch.fnmatchcase(k, g))))
    return Validation(space, n, product, legal, tuple(broken.most_common()), note, planned, tuple(globs),
                      kernels_from, names, sampled, own_defaults(space), source_readings(space), by_groups,
                      group_readings(gs, combos))


def group_readings(gs: list[list[Parameter]], combos: list[list[dict[str, int]] | None] | None) \
        -> tuple[GroupReading, ...]:
    """Each parameter group (sweep.space.groups) where there are several; combos: their legal
    combinations (None for a group too large to list), or None to leave them uncounted."""
    if len(gs) < 2:
        return ()
    counts = [len(c) if c is not None else None for c in combos] if combos is not None else [None] * len(gs)
    return tuple(GroupReading(tuple(p.macro for p in g), tuple(dict.fromkeys(k for p in g for k in p.kernels)),
                              group_size(g), count) for g, count in zip(gs, counts))


@reads_once
def own_defaults(space: Space) -> tuple[OwnDefault, ...]:
    """Each swept parameter whose macro the target's sources define, with its declared default."""
    folder = space.target.source_dir
    if not folder.is_dir():               # a T1 space's target is its file: no sources
        return ()
    own = {m.name: m for m in scan_macros(folder, program_sources(folder))}
    out = []
    for p in space.swept:
        if p.macro not in own:
            continue
        mine = own[p.macro].default
        followers = tuple((d.macro, own[d.macro].default) for d in space.parameters
                          if d.equals == p.macro and d.macro in own and own[d.macro].default != mine)
        out.append(OwnDefault(p.macro, p.default, mine, own[p.macro].where, mine in p.values, followers))
    return tuple(out)


@reads_once
def source_readings(space: Space) -> tuple[SourceReading, ...] | None:
    """The swept parameters whose kernels: globs, over the kernels the sources define, differ from
    the kernels the sources read the macro in (None: no sources, or no kernel found in them)."""
    folder = space.target.source_dir
    if not folder.is_dir():
        return None
    sources = program_sources(folder)
    own = {m.name: m.default for m in scan_macros(folder, sources)}
    governs = read_sources(folder, sources, own).governs
    kernels = sorted({k for ks in governs.values() for k in ks})
    if not kernels:
        return None
    out = []
    for p in space.swept:
        if p.macro not in governs or not p.kernels:
            continue
        listed = {k for k in kernels if any(fnmatch.fnmatchcase(k, g) for g in p.kernels)}
        read = set(governs[p.macro])
        if listed != read:
            out.append(SourceReading(p.macro, tuple(sorted(read)), tuple(sorted(read - listed)),
                                     tuple(sorted(listed - read))))
    return tuple(out)


def unlisted_measured(space: Space, measured: Iterable[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(macro, kernels) for each swept macro the sources read in kernels the sweep measured but its
    kernels: list misses: those kernels' times are not in its pick, and a factorized sweep varied it
    under them as if they were another group's."""
    seen = set(measured)
    out = []
    for r in source_readings(space) or ():
        missed = tuple(k for k in r.unlisted if k in seen)
        if missed:
            out.append((r.macro, missed))
    return tuple(out)


def source_reading_lines(readings: tuple[SourceReading, ...] | None) -> list[str]:
    if readings is None:
        return []
    if not readings:
        return ["kernels: each kernels: list names the kernels the sources read its macro in"]
    out = ["kernels: the sources read these macros in other kernels than their kernels: lists name (check the lists;"
           " factorized and the race trust them):"]
    for r in readings:
        if not r.read_by:
            out.append(f"  {r.macro}: no kernel's code, launch or arguments read it (only a rule?)")
            continue
        said = [f"read in {', '.join(r.unlisted)} too, which its kernels: list misses"] if r.unlisted else []
        said += [f"its kernels: list names {', '.join(r.unread)}, which the sources never show reading it"] \
            if r.unread else []
        out.append(f"  {r.macro}: " + "; ".join(said))
    return out


def declared_not_own(space: Space) -> str:
    """A line for a run's start naming the declared defaults that are not the program's own ("" when
    there are none): every speed-up of the run is a ratio to them."""
    off = [o for o in own_defaults(space) if o.declared is not None and o.declared != o.own and not o.followers]
    if not off:
        return ""
    said = ", ".join(f"{o.macro} {o.declared} (its sources say {o.own}, {o.where})" for o in off)
    return (f"declared defaults other than the program's own: {said}; speed-ups are against the declared ones "
            f"({paths.COMMAND} validate {space.path} says more)")


def group_lines(readings: Sequence[GroupReading]) -> list[str]:
    """The groups, each by the kernels its parameters name: a parameter that should share a group
    (a kernels: glob mistyped, a tag missing) shows here as a group of its own."""
    if not readings:
        return []
    out = [f"groups: {len(readings)} (no tag, kernel or rule joins one group's parameters to another's; each group's "
           "kernels are timed apart, so one build measures a point of every group):"]
    for g in readings:
        legal = f"{g.legal:,} legal of {g.grid:,}" if g.legal is not None else f"{g.grid:,} combinations"
        out.append(f"  {', '.join(g.kernels) or 'no kernels: list'}: {', '.join(g.macros)} ({legal})")
    return out


def own_default_lines(owns: Sequence[OwnDefault]) -> list[str]:
    """What the validation says of the declared defaults: nothing where the sources define none of
    the swept macros; one line where each declared one is the program's own; else a line per
    parameter whose default is missing or is not the program's own, and why it matters."""
    if not owns:
        return []
    off = [o for o in owns if o.declared != o.own]
    if not off:
        return [f"defaults: each of the {len(owns)} swept macros its sources define declares the program's own value"]
    out = ["defaults: beside the program's own (its sources' #ifndef NAME / #define NAME N):"]
    for o in off:
        where = f"the program's own is {o.own} ({o.where}{'' if o.in_values else ', not among the values'})"
        if o.followers:
            derived = " and ".join(f"{m} {v}" for m, v in o.followers)
            out.append(f"  {o.macro}: declares {'none' if o.declared is None else o.declared}; {where}, with "
                       f"{derived}, which follow it here (equals:): no default of it is the program's own point, "
                       "so the race holds the program's own launch sizes as they are")
        elif o.declared is None:
            out.append(f"  {o.macro}: declares none; {where}: `default: {o.own}` names them in picks and "
                       "speed-ups (without it they race as the program's own launch sizes)")
        else:
            out.append(f"  {o.macro}: declares {o.declared}, but {where}: speed-ups and the race measure against "
                       f"{o.declared}, not what the program runs; declare `default: {o.own}` if the sources are right")
    return out


def legal_share(space: Space, n: int = SHARE_SAMPLE) -> tuple[int, int]:
    """How many of n random points of the grid (seeded: the same each time) pass the rules."""
    rng = np.random.default_rng(0)
    draws = np.stack([rng.integers(0, len(p.values), n) for p in space.swept], 1)
    return sum(check(space, make_config(space, {p.macro: p.values[int(i)] for p, i in zip(space.swept, row)})) is None
               for row in draws), n


def lines(v: Validation) -> list[str]:
    """The validation as the command prints it."""
    s = v.space
    out = [f"{s.path}: space {s.name}, target {s.target.name}"
           + (f" ({s.target.build})" if s.target.build != "make" else ""),
           f"grid: {v.grid:,} points ({v.product})"]
    if v.legal is None and v.by_groups:
        out.append(f"legal: {math.prod(v.by_groups):,} of {v.grid:,} (the product of the {len(v.by_groups)} parameter "
                   f"groups' legal combinations: {' x '.join(f'{n:,}' for n in v.by_groups)})")
    elif v.legal is None:
        hits, of = v.sampled or (0, 0)
        searched = ": the learning strategy searches the rules for candidates" \
            if v.space.strategy.name in ("learning", "auto") else ""
        share = (f"; {hits:,} of {of:,} random points pass the rules (about {100 * hits / of:.2g}%)" if hits else
                 f"; none of {of:,} random points passes the rules (under {100 * 3 / of:.2g}% of the grid is legal, "
                 f"a 95% bound){searched}" if of else "")
        out.append(f"legal: not counted (over {GRID_LIMIT:,} points){share}")
    else:
        out.append(f"legal: {v.legal:,} of {v.grid:,}" + (f"; {v.grid - v.legal:,} illegal, by the first rule each "
                                                          "breaks:" if v.broken else ""))
        out += [f"  {count:>6,}  {rule}" for rule, count in v.broken]
    out.append(f"strategy {v.strategy_note}")
    if v.planned is not None:
        shown = ", ".join(v.planned[:SHOWN]) + (f", ... ({len(v.planned) - SHOWN} more)" if len(v.planned) > SHOWN else "")
        out.append(f"  would build {len(v.planned)} configuration(s): {shown or 'none'}")
    out += group_lines(v.groups)
    out += own_default_lines(v.own_defaults)
    out += source_reading_lines(v.readings)
    if not v.kernel_names:
        out.append("kernels: no build to check the globs against (run a --dry-run first, or pass --build DIR)")
        return out
    out.append(f"kernels: {len(v.kernel_names)} in the build ({v.kernels_from}); each glob:")
    for g, hits in v.globs:
        out.append(f"  {g}: " + (", ".join(hits) if hits else "matches NO kernel of the build"))
    if v.unmatched:
        out.append(f"the build's kernels: {', '.join(v.kernel_names)}; fix the kernels: lists of the parameters "
                   "(globs over these short names)")
    return out
