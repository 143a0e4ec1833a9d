"""Functions over a space's points: completion, legality, tags, hashes, parameter groups.

`make_config` completes a point with its derived macros (`pick_config` a combined pick,
which may leave a group's macros to the program), `check` says why a point
is illegal (None when it is legal), `tag`/`tags_for` name job folders,
`config_hash` identifies what a job measures, and `groups` splits the swept
parameters into the groups that must vary together.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from typing import Any, Callable, Iterable, Mapping

from sweep.space import expr
from sweep.space.model import Config, Constraint, Parameter, Space, iterations_per_run



def _with_derived(space: Space, chosen: Mapping[str, int]) -> dict[str, int]:
    """`chosen` with each derived macro whose source it sets."""
    values = dict(chosen)
    for p in space.parameters:
        if p.derived and p.equals in values:
            values[p.macro] = values[p.equals]
    return values


def make_config(space: Space, chosen: Mapping[str, int]) -> Config:
    """A Config from values for the swept parameters; derived ones are filled in."""
    values = _with_derived(space, chosen)
    missing = [p.macro for p in space.parameters if p.macro not in values]
    if missing:
        raise ValueError(f"no value for {', '.join(missing)}")
    return Config(tuple((p.macro, int(values[p.macro])) for p in space.parameters))


def pick_config(space: Space, chosen: Mapping[str, int]) -> Config:
    """A combined pick: a Config of the macros `chosen` sets (their derived ones filled in). A group
    whose pick is the program's own launch sizes sets none of its macros: its conf.cuh leaves them
    unset, so the program's own #ifndef defaults apply (sweep.decide.certify's own entrant)."""
    values = _with_derived(space, chosen)
    return Config(tuple((p.macro, int(values[p.macro])) for p in space.parameters if p.macro in values))


def check(space: Space, config: Config) -> str | None:
    """None when `config` is legal, else why it is skipped (the first rule it breaks). A pick that
    leaves some macros to the program (pick_config) is checked against the rules over the macros
    it sets: a rule binds one group's parameters, and the program's own values are its own."""
    values = config.as_dict()
    if len(values) == len(space.parameters):
        return first_broken(space.constraints, values)
    rules = tuple(c for c in space.constraints if expr.names(c.expr) - set(expr.FUNCTIONS) <= values.keys())
    return first_broken(rules, values) if rules else None


def first_broken(constraints: Iterable[Constraint], values: Mapping[str, int]) -> str | None:
    """Why the first of `constraints` that `values` break fails; None when all hold. The rules
    are tested by one function compiled once per list (expr.checker), stopping at the first
    that fails."""
    constraints = constraints if isinstance(constraints, tuple) else tuple(constraints)
    check_all, args = _checker(constraints)
    out = check_all(*[values[a] for a in args])
    if out == -1:
        return None
    i, error = out if isinstance(out, tuple) else (out, None)
    return reason(constraints[i], values, error)


def reason(c: Constraint, values: Mapping[str, int], error: BaseException | None = None) -> str:
    """Why `values` break `c`: false, or (error given) the error it raised and the values it
    read, e.g. 'Y // X >= 1: division by zero at X=0, Y=3', never 'is false'."""
    why = f" ({c.why})" if c.why else ""
    if error is None:
        try:
            expr.evaluate(c.expr, values)
        except (ArithmeticError, ValueError, TypeError) as e:
            error = e
    if error is None:
        return f"{c.expr} is false{why}"
    at = ", ".join(f"{n}={values[n]}" for n in sorted(expr.names(c.expr) - set(expr.FUNCTIONS)))
    what = "division by zero" if isinstance(error, ZeroDivisionError) else f"{type(error).__name__}: {error}"
    return f"{c.expr}: {what} at {at}{why}"


REJECT_SAMPLE = 5000   # points checked against every rule to say which rejects the most


def most_rejecting(constraints: tuple[Constraint, ...], configs: list[Config]) -> tuple[Constraint, int, int] | None:
    """The rule that rejects the most of `configs` (each rule on its own, not only where it is
    the first broken), how many it rejects, and of how many checked (an even sample of
    REJECT_SAMPLE when there are more); None without rules or points."""
    if not constraints or not configs:
        return None
    sample = configs if len(configs) <= REJECT_SAMPLE else configs[::-(-len(configs) // REJECT_SAMPLE)]
    counts = [sum(first_broken((c,), cfg.as_dict()) is not None for cfg in sample) for c in constraints]
    i = max(range(len(constraints)), key=counts.__getitem__)
    return constraints[i], counts[i], len(sample)


_CHECKERS: dict[int, tuple[tuple[Constraint, ...], tuple[Callable[..., Any], tuple[str, ...]]]] = {}


def _checker(constraints: tuple[Constraint, ...]) -> tuple[Callable[..., Any], tuple[str, ...]]:
    """expr.checker for a tuple of rules, found by the tuple's identity: a space's rules are
    one tuple checked at every point, and hashing 1,024 expressions per point cost more
    than checking them. The tuple is kept with its entry, so its id is not reused."""
    hit = _CHECKERS.get(id(constraints))
    if hit is not None and hit[0] is constraints:
        return hit[1]
    if len(_CHECKERS) >= 256:
        _CHECKERS.clear()
    made = expr.checker(tuple(c.expr for c in constraints))
    _CHECKERS[id(constraints)] = (constraints, made)
    return made


OWN_TAG = "own"   # in a tag, macros a pick leaves to the program (pick_config): E32x4x1 -> Eown
MAX_TAG = 120     # characters of a tag; leaves room for suffixes (a hash, a partition) in a 255-byte name


def tag(space: Space, config: Config) -> str:
    """Readable, stable job name, e.g. R128_G128_E5x5x5_L256_P256_F16.

    Parameters sharing a tag letter are joined with 'x' (a 3-D block); derived
    parameters take part like the others.
    """
    by_tag: dict[str, list[str]] = {}
    values = config.as_dict()
    for p in space.parameters:
        by_tag.setdefault(p.tag, []).append(str(values.get(p.macro, OWN_TAG)))
    full = "_".join(t + (OWN_TAG if set(vs) == {OWN_TAG} else "x".join(vs)) for t, vs in by_tag.items())
    if len(full) <= MAX_TAG:
        return full
    # A folder name may have 255 bytes: a long tag keeps a readable start and ends in a
    # hash of the whole, so it stays unique and the same from run to run.
    return full[:MAX_TAG - 13].rstrip("_") + "_" + hashlib.sha256(full.encode()).hexdigest()[:12]


def tags_for(space: Space, configs: list[Config]) -> dict[Config, str]:
    """Tags for many configs; where two would collide, both get a short hash suffix."""
    plain = {c: tag(space, c) for c in configs}
    counts: dict[str, int] = {}
    for t in plain.values():
        counts[t] = counts.get(t, 0) + 1
    return {c: t if counts[t] == 1 else f"{t}_{values_digest(c)[:6]}" for c, t in plain.items()}


def values_digest(config: Config) -> str:
    return hashlib.sha256(json.dumps(config.values).encode()).hexdigest()


def config_hash(space: Space, config: Config, source_digest: str) -> str:
    """Identity of what a job measures: macros, build, run and profile settings, and the
    target's sources. A stored result counts as done only while this still matches."""
    blob = json.dumps({
        "macros": config.values, "target": space.target.name, "source": source_digest,
        "build": [space.build.arch, space.build.nvcc_flags, space.build.make_targets],
        "run": [space.run.batch, space.run.seq_len, space.run.warmup, space.run.iterations, space.run.args,
                space.run.verify],
        "profile": [space.profile.backend, space.profile.ncu_iterations],
        "model": dict(space.target.model or {}),
        **_sampling_identity(space),
        # only where they differ from the Makefile contract's defaults, so older hashes stay what they were
        **({"macros": space.build.macros} if space.build.macros != "header" else {}),
        **({"cmake": [space.target.cmake_target, list(space.target.cmake_args)]} if space.target.build == "cmake" else {}),
        # only with workloads, so the hashes of spaces without them stay what they were
        **({"workloads": [w.identity() for w in space.workloads]} if space.workloads else {}),
    }, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _sampling_identity(space: Space) -> dict[str, Any]:
    """How the job samples, for its hash: nothing for plain single runs (so the hashes of
    sweeps measured before repeats existed stay valid), else the runs and the rule (one
    entry per distinct plan of the workloads, which may time different iterations)."""
    runs = [dataclasses.replace(space.run, iterations=w.iterations) for w in space.workloads] or [space.run]
    plans = list(dict.fromkeys(r.runs_for(iterations_per_run(r, space.profile)) for r in runs))
    if all(repeats == 1 and not adaptive for repeats, adaptive in plans):
        return {}
    st = space.run.stopping
    rule = [st.max_noise, st.budget_s, st.min_samples, st.max_samples]
    entries = [[repeats, adaptive] + (rule if adaptive else []) for repeats, adaptive in plans]
    return {"sampling": entries[0] if len(entries) == 1 else entries}


def default_config(space: Space) -> Config | None:
    """The target's own defaults, when every swept parameter declares one."""
    if any(p.default is None for p in space.swept):
        return None
    return make_config(space, {p.macro: p.default for p in space.swept})


# ---------------------------------------------------------------------------
# Parameter groups
# ---------------------------------------------------------------------------


def swept_read_by(space: Space, c: Constraint) -> set[str]:
    """The swept parameters constraint `c` reads (a derived parameter counts as the one it equals)."""
    source = {p.macro: (p.equals or p.macro) for p in space.parameters}
    return {source[n] for n in expr.names(c.expr) if n in source}


def groups(space: Space) -> list[list[Parameter]]:
    """Swept parameters that must vary together, in declaration order.

    Two parameters are grouped when they share a tag (the sides of a 3-D block),
    a kernel pattern, or a constraint (a derived parameter counts as its source).
    Every constraint then speaks about one group only, so a space's legal points
    are the product of each group's legal combinations (see group_constraints).
    """
    swept = list(space.swept)
    root = {p.macro: p.macro for p in swept}

    def find(m: str) -> str:
        while root[m] != m:
            root[m] = root[root[m]]
            m = root[m]
        return m

    def union(a: str, b: str) -> None:
        root[find(a)] = find(b)

    for a, b in itertools.combinations(swept, 2):
        if a.tag == b.tag or set(a.kernels) & set(b.kernels):
            union(a.macro, b.macro)
    for c in space.constraints:
        named = sorted(swept_read_by(space, c))
        for other in named[1:]:
            union(named[0], other)
    out: dict[str, list[Parameter]] = {}
    for p in swept:
        out.setdefault(find(p.macro), []).append(p)
    return list(out.values())


def group_constraints(space: Space, group: list[Parameter]) -> tuple[Constraint, ...]:
    """The constraints that name a parameter of `group` (or one derived from it), in file order."""
    mine = {p.macro for p in group}
    mine |= {p.macro for p in space.parameters if p.equals in mine}
    return tuple(c for c in space.constraints if expr.names(c.expr) & mine)


def no_legal_line(space: Space, skipped: Iterable[Any]) -> str:
    """What to say when a plan has no legal point ("" if nothing was planned at all); `skipped`: the
    plan's skipped points (sweep.plan's Skipped: each with its .config)."""
    skipped = list(skipped)
    if not skipped:
        return ""
    worst = most_rejecting(space.constraints, [s.config for s in skipped])
    rule = ""
    if worst is not None:
        c, n, of = worst
        sample = "" if of == len(skipped) else f" (an even sample of {of:,} of {len(skipped):,})"
        rule = f"; the constraint that rejects the most is {c.expr!r}: {n:,} of the {of:,} points{sample}"
    return (f"no configuration is legal: every one of the {len(skipped):,} points planned breaks a constraint"
            f"{rule}; relax it in {space.path} (constraints:)")
