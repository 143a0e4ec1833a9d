"""Which strategy, and what budget, for a space: each strategy replayed from a recording over
several seeds, as `config-sweep choose` prints it.

    config-sweep choose SPACE --from RECORDING [--strategies learning,optuna,random]
                        [--seeds 10] [--budgets 25,50,100] [--each-budget] [--parallel 10] [--jobs N]
                        [--json FILE]

Every strategy named runs as a sweep runs it: its options are the space file's where the file
names that strategy, else the declared defaults; each run sets `seed` (where the strategy takes
one) and spends at most the largest budget (`budget`, or `samples` for a strategy that draws a
fixed number), the smaller budgets read off its first evaluations; with `each_budget` every budget
is a run of its own, the strategy told that budget, as a sweep with that budget runs it (the
learning strategy and TPE keep fewer proposals in flight at a smaller budget). Up to `parallel`
proposals await their results, the oldest told first, as an executor with that many slots tells
them. Each configuration is answered from the recording
matched as `--executor replay` matches it (sweep.dispatch.replay.index): its recorded objective
(sweep.decide.select.objective_ns), its failure kind, or "skipped" where the recording lacks it
(nothing is invented), and what it cost the GPU it was recorded on. Nothing is rendered, built or
written but the JSON asked for.

The reference is the best objective among the space's legal configurations in the recording: the
optimum only where the recording holds the whole legal set, which the first line says. Per
strategy the table gives, over its runs, best-found / reference at each budget (median and
quartiles), the evaluations a run made (a strategy may stop by itself before the budget), the
evaluations and GPU-seconds (as recorded) to come within 1% and 5% of the reference (median over
runs; ">B" where the median run did not), and how many of its proposals the recording lacked.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from sweep import plan as strategies
from sweep.core import atomic
from sweep.core.errors import SweepError
from sweep.dispatch import replay
from sweep.plan.base import Ticker, defaults_to_propose
from sweep.plan.learned import legal_points
from sweep.pipeline import recorded
from sweep.pipeline.recorded import Answer, answerer, legal_recorded
from sweep.space import Config, Space, Strategy, target

DEFAULT_STRATEGIES = ("learning", "optuna", "random")
DEFAULT_BUDGETS = (25, 50, 100)


@dataclass(frozen=True, slots=True)
class Run:
    strategy: str
    seed: int
    answers: tuple[Answer, ...]
    stopped: str                    # why the strategy stopped by itself, where it did
    budget: int = 0                 # the budget the strategy was told

    def best_at(self, budget: int) -> float:
        times = [a.objective_ns for a in self.answers[:budget] if a.objective_ns is not None]
        return min(times) if times else math.inf

    def to_within(self, reference: float, tol: float) -> tuple[int, float] | None:
        """(evaluations, GPU-seconds as recorded) until the first objective within `tol` of the reference."""
        spent = 0.0
        for i, a in enumerate(self.answers):
            spent += a.cost_s
            if a.objective_ns is not None and a.objective_ns <= reference * (1.0 + tol):
                return i + 1, spent
        return None


@dataclass(frozen=True, slots=True)
class Reference:
    best_ns: float
    best: Config
    recorded_legal: int             # legal configurations the recording holds
    legal: int | None               # the space's legal configurations (None: too many to count)
    recording_costs: dict[str, float]   # what the recorded legal configurations cost, by kind (compile, runs, ...)

    @property
    def recording_cost_s(self) -> float:
        """What the recorded legal configurations cost, together."""
        return sum(self.recording_costs.values())


def reference(space: Space, idx: replay.Index, answer: Callable[[Config], Answer]) -> Reference:
    """The best recorded objective among the space's legal configurations, and how much of the legal set was recorded."""
    held = legal_recorded(space, idx, answer)
    timed = [(a.objective_ns, c) for c, a in held if a.objective_ns is not None]
    if not timed:
        raise SweepError(f"--from {idx.recording.path}: none of the {len(held)} legal configurations of {space.path} it "
                         "records has a time; give a recording with measured configurations of this space")
    best_ns, best = min(timed, key=lambda t: t[0])
    points = legal_points(space)
    by_kind: dict[str, float] = {}
    for c, _ in held:
        for kind, seconds in idx.lookup(c.as_dict()).costs.items():
            by_kind[kind] = by_kind.get(kind, 0.0) + seconds
    return Reference(best_ns, best, len(held), len(points) if points is not None else None, by_kind)


def strategy_space(space: Space, name: str, seed: int, budget: int, start_from: str = "") -> Space:
    """`space` with strategy `name`: the file's options where it names that strategy, else the
    declared defaults, with this run's seed and budget, and start_from where given (else none: a
    warm start runs only where asked, beside the cold one)."""
    if name not in strategies.REGISTRY:
        raise SweepError(f"--strategies {name}: not a strategy; choose from {', '.join(strategies.STRATEGIES)}")
    declared = {o.name for o in strategies.REGISTRY[name].options}
    options = dict(space.strategy.options) if space.strategy.name == name else {}
    for key, value in (("seed", seed), ("budget", budget), ("samples", budget), ("start_from", start_from)):
        if key in declared:
            options[key] = value
    return dataclasses.replace(space, strategy=Strategy(name, options))


def replay_run(space: Space, answer: Callable[[Config], Answer], budget: int, parallel: int,
               warm: Sequence[dict[str, int]] = ()) -> tuple[Answer, ...] | str:
    """One run of the space's strategy (from the points `warm` first, where it takes a warm start):
    up to `budget` configurations, `parallel` awaiting their answers at most, the oldest told first.
    Returns the answers, and why the strategy stopped."""
    search = strategies.start(space, warm=warm)
    answers: list[Answer] = []
    waiting: deque[Config] = deque()
    while len(answers) < budget:
        want = min(parallel - len(waiting), budget - len(answers) - len(waiting))
        if want > 0:
            waiting.extend(search.ask(want))
        if not waiting:
            break
        c = waiting.popleft()
        a = answer(c)
        answers.append(a)
        parts = {"parts": a.parts} if getattr(search, "wants_parts", False) else {}   # a model per group
        search.tell(c, a.objective_ns, failure=a.failure, cost_s=a.cost_s, **parts)
    return tuple(answers), getattr(search, "stopped", "")


def compare(space: Space, recording: Path, names: Sequence[str] = DEFAULT_STRATEGIES, seeds: int = 10,
            budgets: Sequence[int] = DEFAULT_BUDGETS, parallel: int = 10, jobs: int = 1,
            start_from: Path | None = None, each_budget: bool = False) -> tuple[Reference, list[Run]]:
    """Every strategy of `names` replayed from `recording`, `seeds` runs each (one where it takes no
    seed), on `jobs` processes (each run depends only on its strategy, seed and budget: the same runs
    whatever the number), told the largest budget, or with `each_budget` each budget in turn. With
    `start_from`, each strategy that takes a warm start runs again from that recording's fastest
    configurations, as "<name>+start"."""
    if seeds < 1 or parallel < 1 or jobs < 1 or not budgets or min(budgets) < 1:
        raise SweepError("--seeds, --parallel, --jobs and every budget must be at least 1")
    for name in names:
        strategy_space(space, name, 0, 1)              # an unknown name is refused before any run
    idx = replay.index(space, recording)
    answer = answerer(space, idx)
    ref = reference(space, idx, answer)
    warm = str(Path(start_from).expanduser().resolve()) if start_from is not None else ""
    starts = [n for n in names if warm and strategies.REGISTRY[n].takes("start_from")]
    if warm and not starts:
        raise SweepError(f"--start-from {start_from}: none of {', '.join(names)} takes a warm start; add learning or auto "
                         "to --strategies")
    # read once, here: a recording that cannot start this space is refused before any run
    points = recorded.start_points(strategy_space(space, starts[0], 0, 1, warm)) if starts else []
    limits = sorted(set(budgets)) if each_budget else [max(budgets)]
    plan = [(name, seed, budget, parallel, start) for name in names
            for start in ("", *([warm] if name in starts else []))
            for budget in limits
            for seed in range(seeds if strategies.REGISTRY[name].takes("seed") else 1)]
    tick = Ticker(f"{space.name}: replaying {', '.join(names)}")     # a line every few seconds on a long one
    runs: list[Run] = []
    if jobs == 1 or len(plan) == 1:
        for task in plan:
            runs.append(_run_task(space, answer, points, task))
            tick(len(runs), len(plan), "runs")
        return ref, runs
    # spawned, not forked: the parent may hold threads (BLAS, a progress line) that a fork would copy mid-step
    with ProcessPoolExecutor(min(jobs, len(plan)), mp_context=multiprocessing.get_context("spawn"),
                             initializer=_start_worker, initargs=(space, recording, points)) as pool:
        for run in pool.map(_one_run, plan):
            runs.append(run)
            tick(len(runs), len(plan), "runs")
    return ref, runs


def _run_task(space: Space, answer: Callable[[Config], Answer], points: Sequence[dict[str, int]],
              task: tuple[str, int, int, int, str]) -> Run:
    """One run of the plan; `points`: the warm start, for a task with a start_from."""
    name, seed, budget, parallel, start = task
    answers, stopped = replay_run(strategy_space(space, name, seed, budget, start), answer, budget, parallel,
                                  points if start else ())
    return Run(name + ("+start" if start else ""), seed, answers, stopped, budget)


_WORKER: dict[str, Any] = {}       # a worker process's space, recording answerer and warm start (_start_worker)


def _start_worker(space: Space, recording: Path, points: Sequence[dict[str, int]]) -> None:
    idx = replay.index(space, recording)
    _WORKER.update(space=space, answer=answerer(space, idx), points=points)


def _one_run(task: tuple[str, int, int, int, str]) -> Run:
    return _run_task(_WORKER["space"], _WORKER["answer"], _WORKER["points"], task)


# -- what it prints ------------------------------------------------------------------------
def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile by linear interpolation, inf where either neighbour is (a run that never got there)."""
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    if math.isinf(v[lo]) or math.isinf(v[hi]):
        return math.inf
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _reach(runs: Sequence[Run], ref: Reference, tol: float, budget: int) -> str:
    """Median evaluations (GPU-seconds) to within tol of the reference, or >budget."""
    got = [r.to_within(ref.best_ns, tol) for r in runs]
    evals = quantile([g[0] if g else math.inf for g in got], 0.5)
    if math.isinf(evals):
        return f">{budget}"
    spent = quantile([g[1] if g else math.inf for g in got], 0.5)
    return f"{evals:g} ({spent:,.0f} s)"


def told(runs: Sequence[Run], budget: int) -> list[Run]:
    """The runs that say what `budget` finds: those told that budget where there are any (--each-budget),
    else those told the largest, read at their first `budget` evaluations."""
    exact = [r for r in runs if r.budget == budget]
    if exact:
        return exact
    largest = max(r.budget for r in runs)
    return [r for r in runs if r.budget == largest]


def each_budget(runs: Sequence[Run]) -> bool:
    """Whether the runs were told budgets of their own (--each-budget), not all the largest."""
    return len({r.budget for r in runs}) > 1


def summary(ref: Reference, runs: Sequence[Run], budgets: Sequence[int]) -> dict[str, dict]:
    """Per strategy: its runs' best / reference at each budget (q1, median, q3), evaluations made and
    reach (of the runs told the largest budget), proposals the recording lacked (of all its runs)."""
    out: dict[str, dict] = {}
    for name in dict.fromkeys(r.strategy for r in runs):
        every = [r for r in runs if r.strategy == name]
        mine = told(every, max(budgets))
        row: dict = {"runs": len(mine), "evals": quantile([len(r.answers) for r in mine], 0.5),
                     "unrecorded": sum(not a.recorded for r in every for a in r.answers),
                     "to1": _reach(mine, ref, 0.01, max(budgets)), "to5": _reach(mine, ref, 0.05, max(budgets))}
        for b in budgets:
            ratios = [r.best_at(b) / ref.best_ns for r in told(every, b)]
            row[b] = tuple(quantile(ratios, q) for q in (0.25, 0.5, 0.75))
        out[name] = row
    return out


def _ratio(x: float) -> str:
    return "-" if math.isinf(x) else f"{x:.3f}"


def lines(space: Space, recording: Path, ref: Reference, runs: Sequence[Run], budgets: Sequence[int]) -> list[str]:
    """The table and what it says, as `config-sweep choose` prints them."""
    rec = replay.load(recording)
    rows = summary(ref, runs, budgets)
    whole = ref.legal is not None and ref.recorded_legal >= ref.legal
    held = ("all of them recorded" if whole else
            f"{ref.recorded_legal:,} of them recorded ({ref.recorded_legal / ref.legal:.0%})" if ref.legal
            else f"{ref.recorded_legal:,} recorded")
    sizes = " ".join(f"{m}={v}" for m, v in ref.best.values)
    out = [f"{space.name}: {f'{ref.legal:,}' if ref.legal is not None else 'too many to count'} legal configurations, "
           f"{held} in {Path(recording).name} ({rec.kind}{', ' + rec.device if rec.device else ''})",
           f"reference: {'the optimum' if whole else 'the best recorded (not a proven optimum)'}, "
           f"{ref.best_ns / 1e3:,.1f} us at {sizes}; the recorded legal configurations cost "
           f"{ref.recording_cost_s:,.0f} GPU-seconds as recorded"
           + (f" ({replay.cost_parts(ref.recording_costs, ',.0f', skip_zero=True)})" if ref.recording_costs else "")]
    note = replay.objective_note(rec)
    out += [note, ""] if note else [""]
    w = max([10, *(len(n) for n in rows)])
    head = f"{'strategy':<{w}} {'runs':>4} " + " ".join(f"{'best@' + str(b) + ' med [q1, q3]':>24}" for b in budgets) \
        + f" {'evals':>6} {'to 1% (GPU-s)':>16} {'to 5% (GPU-s)':>16} {'unrecorded':>10}"
    out += [head, "-" * len(head)]
    for name, row in rows.items():
        cells = " ".join(f"{_ratio(row[b][1]):>7} [{_ratio(row[b][0]):>6}, {_ratio(row[b][2]):>6}]" for b in budgets)
        out.append(f"{name:<{w}} {row['runs']:>4} {cells} {row['evals']:>6g} {row['to1']:>16} {row['to5']:>16} "
                   f"{row['unrecorded']:>10}")
    out.append("")
    lows = []
    for b in budgets if rows else ():
        low = min(row[b][1] for row in rows.values())
        names = [n for n, row in rows.items() if row[b][1] == low]
        lows.append(f"at {b}, {' and '.join(names)} ({_ratio(low)}{', a tie' if len(names) > 1 else ''})")
    if lows:
        out.append("lowest median best-found / reference: " + "; ".join(lows))
    missing = sum(row["unrecorded"] for row in rows.values())
    asked = sum(len(r.answers) for r in runs)
    if not whole or missing:
        out.append(f"the reference is the best of what was recorded; {missing} of the {asked} proposals "
                   f"({missing / max(asked, 1):.0%}) were of configurations the recording lacks, answered 'skipped' "
                   "and counted as evaluations, as --executor replay does (a strategy learns to avoid them): the more "
                   "of them, the less the table says; record more of the space (a grid or random sweep) for a fairer "
                   "comparison")
    each = each_budget(runs)
    out.append("best-found / reference: 1.000 is the reference itself; evals: configurations a run made (a strategy "
               "may stop by itself first); to 1%: median evaluations (and GPU-seconds as recorded) to within 1%"
               + ("; each budget's column is from runs told that budget (--each-budget), evals and to 1% from "
                  f"those told {max(budgets)}" if each else
                  f"; every run was told {max(budgets)}, the smaller budgets read off its first evaluations "
                  "(--each-budget tells each its own)" if len(set(budgets)) > 1 else ""))
    return out


def to_json(ref: Reference, runs: Sequence[Run], budgets: Sequence[int]) -> dict:
    """Everything the table was made from: the reference and every run's answers, in order."""
    return {"budgets": list(budgets), "each_budget": each_budget(runs),
            "reference": {"best_ns": ref.best_ns, "best": ref.best.as_dict(), "recorded_legal": ref.recorded_legal,
                          "legal": ref.legal, "recording_cost_s": ref.recording_cost_s,
                          "recording_costs": ref.recording_costs},
            "runs": [{"strategy": r.strategy, "seed": r.seed, "budget": r.budget, "stopped": r.stopped,
                      "objective_ns": [a.objective_ns for a in r.answers], "failure": [a.failure for a in r.answers],
                      "cost_s": [a.cost_s for a in r.answers], "recorded": [a.recorded for a in r.answers]}
                     for r in runs]}


def new_file(path: Path) -> Path:
    """`path`, where no file is yet (--json never writes over one)."""
    if Path(path).exists():
        raise SweepError(f"--json {path} exists: choose never overwrites a file; give another path, or remove it first")
    return Path(path)


def run(space_path: Path, recording: Path, names: Sequence[str] = DEFAULT_STRATEGIES, seeds: int = 10,
        budgets: Sequence[int] = DEFAULT_BUDGETS, parallel: int = 10, jobs: int = 1,
        json_path: Path | None = None, start_from: Path | None = None, each_budget: bool = False) -> list[str]:
    """`config-sweep choose`: the space file's strategies compared on `recording` (and, with
    `start_from`, warm-started from that recording too); the lines to print (and every run's answers
    written to `json_path`, a new file, where given)."""
    out = new_file(json_path) if json_path is not None else None        # refused before any run
    space = target.load(space_path)
    ref, runs = compare(space, recording, names, seeds, budgets, parallel, jobs, start_from, each_budget)
    shown = lines(space, recording, ref, runs, budgets)
    if start_from is not None:
        warm = [n for n in names if strategies.REGISTRY[n].takes("start_from")]
        first = any(defaults_to_propose(strategy_space(space, n, 0, 1)) is not None for n in warm)
        after = " after the declared defaults" if first else ""
        shown.insert(-1, f"+start: the same strategy, its first proposals{after} the fastest legal configurations "
                         f"recorded in {Path(start_from).name} (--start-from; run's --start-from does the same)")
    if out is not None:
        atomic.write_json(new_file(out), to_json(ref, runs, budgets))
        shown.append(f"wrote {out}")
    return shown
