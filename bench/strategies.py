"""Replay brute-forced tuning spaces (Kernel Tuner cache files) and compare search strategies.

    pip install '.[bench]'                                      # Kernel Tuner 1.5.0, for its strategies
    python bench/strategies.py                                  # 20 seeds, every strategy, 3 spaces
    python bench/strategies.py --seeds 3 --strategies ours,random
    python bench/strategies.py --spaces DIR_OR_FILES --jobs 2 --out results.json
    python bench/strategies.py --strategies ours,ours_async10,ours_batch16   # proposals in flight, rounds

`ours` tells each result before its next ask; `ours_asyncN` keeps N proposals awaiting results and
tells the oldest first (a sweep's way: its `in_flight`); `ours_batchN` asks N and tells all N before
asking again (rounds of a Slurm array).

Every strategy gets the same legal set (the configurations present in the cache file: the
space was brute-forced, so these are exactly the legal ones) and runs up to the largest budget
(200 evaluations); the best found at smaller budgets (25/50/100) is read off the prefix of the
same run.  An evaluation is one distinct legal configuration measured; configurations that
failed (compile/runtime failures in the cache) count as evaluations.  Revisits of an already
measured configuration and proposals outside the legal set are not counted (they cost no GPU
time).  Kernel Tuner strategies run in its simulation mode on the same cache file, with
max_fevals = the largest budget; their evaluation order is the order of the results list it
returns (distinct configurations, failures included). A Kernel Tuner strategy that ends before
the budget (dual and simulated annealing do) is started again with the next seed until the budget
is spent, the configurations already measured free, as a user with that budget would
(--no-kt-restart: the run ends where the strategy does, and is left out of the budgets it did
not reach).

What is minimized is the objective the cache file declares ("objective"; time when it names
none): as it is where lower is better, its reciprocal where higher is (GFLOP/s and other rates),
and Kernel Tuner is told the same objective and direction.  A file that is not a cache, or whose
objective has no known direction, is refused in one line naming it.

With --each-budget every budget is a run of its own instead, each strategy told that budget
(Kernel Tuner's max_fevals, the learning strategy's budget, TPE's trials), as a user with that
budget would run it: a strategy that plans for its budget (Kernel Tuner's dual annealing does) may
differ from the first evaluations of a longer run. It costs the sum of the budgets in runs.

A run whose strategy raises (Kernel Tuner's differential evolution, firefly and Bayesian
optimization do on spaces smaller than their populations or first samples) is left out of the table
and named below it with the exception and where it was raised; the other runs stand. A failure of
this project's strategy also ends the bench with a non-zero status.

Columns: best-found/optimum (median and quartiles over seeds) per budget; evaluations needed to
get within 1% / 5% of the optimum (median over seeds; ">B" when the median run did not reach it
within B = the largest budget); CPU seconds per suggestion of the strategy itself (for Kernel
Tuner: its whole process time per evaluation, simulation overhead included).
"""

from __future__ import annotations

import argparse
import importlib.util
import warnings
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from strategy_table import failure_lines, fmt_table, summarize  # noqa: E402  (bench/strategy_table.py)
from cache_spaces import Evaluator, cached_space, check_space, load_name, space_files  # noqa: E402
from sweep.core.text import terminal_safe  # noqa: E402
from kt_runs import run_kt  # noqa: E402  (bench/kt_runs.py: Kernel Tuner's strategies in simulation mode)

DEFAULT_SPACES = Path("/work/shared/benchmark-spaces/convolution")
BUDGETS = (25, 50, 100, 200)
KT_STRATEGIES = ("random_sample", "genetic_algorithm", "pso", "simulated_annealing", "dual_annealing",
                 "diff_evo", "greedy_ils", "firefly_algorithm", "bayes_opt")
OURS = ("ours", "ours_batch4", "ours_async10", "random")
TPE = ("tpe", "tpe_multivariate")
DEFAULT = ("ours", "random", "tpe") + tuple("kt_" + s for s in KT_STRATEGIES)
ALL = OURS + TPE + tuple("kt_" + s for s in KT_STRATEGIES)
# -- our strategies ----------------------------------------------------------------------
def run_random(space, seed, limit):
    ev = Evaluator(space, limit)
    legal = list(space["table"])
    rng = np.random.default_rng(seed)
    t0 = time.process_time()
    order = rng.permutation(len(legal))[:limit]
    cpu = time.process_time() - t0
    for i in order:
        ev(legal[i])
    return ev.trace, cpu / max(1, len(ev.trace))


def run_ours(space, seed, limit, batch=1, make=None, in_flight=0):
    """The learning strategy (or `make(dims, legal_points=..., seed=..., budget=...)`, a variant of
    it: bench/side_oracle.py) asked `batch` proposals at a time and told all their results before
    the next ask (a Slurm array's rounds); or, with `in_flight`, kept that many proposals awaiting
    their results, the oldest told before each new ask (a sweep's default: a tenth of its budget,
    sweep.plan.learned.default_in_flight). CPU time is the strategy's own: the replay's is left out."""
    from sweep.plan.learning import Dim, LearningSearch
    make = make or LearningSearch
    keys = space["keys"]
    dims = [Dim(k, tuple(space["params"][k]), "choice" if space.get("kinds", {}).get(k) == "choice" else None) for k in keys]
    legal = [dict(zip(keys, cfg)) for cfg in space["table"]]
    ev = Evaluator(space, limit)
    replaying = 0.0

    def measure(p: dict):
        nonlocal replaying
        t = time.process_time()
        v = ev(tuple(p[k] for k in keys))
        replaying += time.process_time() - t
        return v

    def tell(p: dict, v) -> None:
        search.tell(p, v) if isinstance(v, float) else search.tell(p, None, failure=v)

    t0 = time.process_time()
    search = make(dims, legal_points=legal, seed=seed, budget=limit)
    if in_flight:
        waiting: list[dict] = []
        asked = 0
        while True:
            want = min(in_flight - len(waiting), limit - asked)
            got = search.ask(want) if want > 0 else []
            asked += len(got)
            waiting += got
            if not waiting:
                break
            p = waiting.pop(0)           # the oldest proposal's result comes back first
            tell(p, measure(p))
    else:
        while not ev.done:
            pts = search.ask(min(batch, limit - len(ev.trace)))
            if not pts:
                break
            for p, v in [(p, measure(p)) for p in pts]:   # the round's results, all measured before any is told
                tell(p, v)
    return ev.trace, (time.process_time() - t0 - replaying) / max(1, len(ev.trace))


# -- Optuna TPE --------------------------------------------------------------------------
def run_tpe(space, seed, limit, multivariate=False):
    import optuna
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    keys = [k for k in space["keys"] if len(space["params"][k]) > 1]
    fixed = {k: space["params"][k][0] for k in space["keys"] if len(space["params"][k]) == 1}
    ev = Evaluator(space, limit)

    def constraints(trial):
        return (trial.user_attrs.get("violation", 0.0),)

    kw = {"multivariate": True, "group": True} if multivariate else {}
    sampler = optuna.samplers.TPESampler(seed=seed, constraints_func=constraints, **kw)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    cpu, worst, asks = 0.0, 0.0, 0
    while not ev.done and asks < 50 * limit:
        asks += 1
        t0 = time.process_time()
        trial = study.ask()
        p = {k: trial.suggest_categorical(k, space["params"][k]) for k in keys}
        cpu += time.process_time() - t0
        cfg = tuple(p[k] if k in p else fixed[k] for k in space["keys"])
        # illegal (not in the brute-forced legal set): infeasible, not an evaluation
        v = ev(cfg) if cfg in space["table"] else "illegal"
        t0 = time.process_time()
        if isinstance(v, float):
            worst = max(worst, math.log(v))
            study.tell(trial, math.log(v))
        else:   # a failure or an illegal point: infeasible, ranked after every feasible trial
            trial.set_user_attr("violation", 1.0)
            study.tell(trial, worst + 1.0)
        cpu += time.process_time() - t0
    return ev.trace, cpu / max(1, len(ev.trace))


def failure_of(error: BaseException) -> str:
    """A strategy's exception in one line: its type and message, and where it was raised (the
    innermost frame: inside Kernel Tuner, Optuna or this project)."""
    import traceback
    frames = traceback.extract_tb(error.__traceback__)
    where = ""
    if frames:
        f = frames[-1]
        parts = Path(f.filename).parts
        where = f" ({'/'.join(parts[-3:])}:{f.lineno})"
    message = terminal_safe(str(error).splitlines()[0]) if str(error) else ""   # it may echo a cache file's strings
    return f"{type(error).__name__}{': ' + message if message else ''}{where}"


def run_one(args):
    """One run, or where its strategy raises (Kernel Tuner's differential evolution, firefly and
    Bayesian optimization do on spaces smaller than their populations or samples), a record of the
    failure: the table goes on without that run and names it below."""
    path, strategy, seed, limit, restart = args
    try:
        return _run_one(path, strategy, seed, limit, restart)
    except Exception as error:  # noqa: BLE001  (a third party's strategy: any exception is its failure)
        return {"space": load_name(path), "strategy": strategy, "seed": seed, "limit": limit,
                "error": failure_of(error)}


def _run_one(path, strategy, seed, limit, restart):
    space = cached_space(str(path))
    t0 = time.time()
    starts = 1
    if strategy == "ours":
        trace, cpu = run_ours(space, seed, limit)
    elif strategy.startswith("ours_async"):
        trace, cpu = run_ours(space, seed, limit, in_flight=int(strategy[len("ours_async"):]))
    elif strategy.startswith("ours_batch"):
        trace, cpu = run_ours(space, seed, limit, batch=int(strategy[len("ours_batch"):]))
    elif strategy == "random":
        trace, cpu = run_random(space, seed, limit)
    elif strategy == "tpe":
        trace, cpu = run_tpe(space, seed, limit)
    elif strategy == "tpe_multivariate":
        trace, cpu = run_tpe(space, seed, limit, multivariate=True)
    elif strategy.startswith("kt_"):
        trace, cpu, starts = run_kt(space, seed, limit, strategy[3:], restart=restart)
    else:
        raise ValueError(f"unknown strategy {strategy}")
    return {"space": space["name"], "strategy": strategy, "seed": seed, "trace": trace,
            "optimum": space["optimum"], "cpu_per_suggestion": cpu, "wall": time.time() - t0,
            "starts": starts, "restart": restart, "limit": limit}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] + " Kernel Tuner's strategies need "
                                 "`pip install '.[bench]'` (Kernel Tuner 1.5.0), tpe needs optuna.")
    ap.add_argument("--spaces", nargs="*", default=[str(DEFAULT_SPACES)])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds first-seed .. first-seed+seeds-1 (default 0): --first-seed 40 gives seeds a "
                         "strategy was not tuned on")
    ap.add_argument("--strategies", default=",".join(DEFAULT),
                    help="comma list; 'kt' = every Kernel Tuner one; also: " + ",".join(ALL))
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--no-kt-restart", dest="kt_restart", action="store_false",
                    help="end a Kernel Tuner run where its strategy ends, short of the budget (default: start it "
                         "again with the next seed until the budget is spent, the configurations already measured "
                         "free, as a user with that budget would)")
    ap.add_argument("--each-budget", action="store_true",
                    help="run every budget on its own, each strategy told that budget (Kernel Tuner's max_fevals, as "
                         "a user with that budget would set it); default: one run to the largest budget per seed, the "
                         "smaller budgets read off its first evaluations (anytime, as the methodology's curves are)")
    ap.add_argument("--log", help="append every finished run (its trace) to this JSON-lines file")
    ap.add_argument("--merge", nargs="*", help="JSON-lines run logs of earlier invocations to include (not rerun)")
    ap.add_argument("--summarize-only", action="store_true", help="run nothing: tabulate the --merge logs")
    ap.add_argument("--out", help="write the table (and every run's trace) as .json or .csv")
    a = ap.parse_args(argv)
    budgets = tuple(int(b) for b in a.budgets.split(","))
    strategies = []
    for s in a.strategies.split(","):
        strategies += ["kt_" + k for k in KT_STRATEGIES] if s == "kt" else [s]
    for prefix, module, what in (("kt_", "kernel_tuner", "pip install '.[bench]' (Kernel Tuner 1.5.0)"),
                                 ("tpe", "optuna", "pip install optuna")):
        wanted = [s for s in strategies if s.startswith(prefix)]
        if wanted and not a.summarize_only and importlib.util.find_spec(module) is None:
            sys.exit(f"error: {', '.join(wanted)} need the {module} package, not installed here: {what}, "
                     f"or leave them out (--strategies ours,random)")
    files = space_files(a.spaces)
    if not a.summarize_only:
        for f in files:   # a file that cannot be replayed is refused here, once, not in every worker
            check_space(f)
    seeds = range(a.first_seed, a.first_seed + a.seeds)
    limits = budgets if a.each_budget else (max(budgets),)
    tasks = [(str(f), s, seed, limit, a.kt_restart)
             for s in strategies for seed in seeds for f in files for limit in limits]
    runs = []
    for m in a.merge or []:   # runs logged by earlier invocations (--log): reused, not rerun
        with open(m) as f:
            runs += [json.loads(line) for line in f if line.strip()]
    for r in runs:
        r["trace"] = [None if t is None else float(t) for t in r["trace"]]
    # a Kernel Tuner run logged in the other restart mode is not this one (logs before the option: no restarts)
    runs = [r for r in runs if not r["strategy"].startswith("kt_") or r.get("restart", False) == a.kt_restart]
    for r in runs:   # a run logged before runs recorded their budget was one to the largest budget
        r.setdefault("limit", max(budgets))
    runs = [r for r in runs if r["limit"] in limits]
    have = {(r["space"], r["strategy"], r["seed"], r["limit"]) for r in runs}
    tasks = [t for t in tasks if (load_name(t[0]), t[1], t[2], t[3]) not in have]
    if a.summarize_only:
        tasks = []
    log = open(a.log, "a") if a.log else None
    t0 = time.time()
    failed = []

    def keep(r: dict) -> None:   # a failed run is reported, not logged: a later --merge runs it again
        if "error" in r:
            failed.append(r)
            return
        runs.append(r)
        if log:
            log.write(json.dumps(r) + "\n")
            log.flush()

    if a.jobs > 1:
        with ProcessPoolExecutor(a.jobs) as pool:
            for r in pool.map(run_one, tasks, chunksize=1):
                keep(r)
    else:
        for t in tasks:
            keep(run_one(t))
    wall = time.time() - t0
    runs = [r for r in runs if r["strategy"] in strategies and r["seed"] in seeds]
    rows = summarize(runs, budgets, each_budget=a.each_budget)
    print(fmt_table(rows, budgets))
    restarted = [f"{r['space']} {r['strategy']} {r['restarted_runs']} of {r['seeds']}" for r in rows if r["restarted_runs"]]
    if restarted:
        print("\nruns started again after their strategy ended short of the budget: " + "; ".join(restarted))
    for line in failure_lines(failed):
        print(line)
    print(f"\n{len(tasks)} runs made now (wall {wall:.0f} s, jobs {a.jobs}), {len(runs)} in the table, {a.seeds} seeds"
          + (f" from {a.first_seed}" if a.first_seed else ""))
    if a.out:
        out = Path(a.out)
        if out.suffix == ".csv":
            import csv
            with open(out, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["space", "strategy", "seeds"] + [f"best@{b}_{q}" for b in budgets for q in ("q1", "median", "q3")]
                           + ["evals_to_1pct", "evals_to_5pct", "cpu_per_suggestion_s"])
                for r in rows:
                    w.writerow([r["space"], r["strategy"], r["seeds"]] + [x for b in budgets for x in r[f"best@{b}"]]
                               + [r["evals_to_1pct"], r["evals_to_5pct"], r["cpu_per_suggestion_s"]])
        else:
            out.write_text(json.dumps({"rows": rows, "runs": runs, "wall_s": wall, "budgets": budgets},
                                      default=lambda x: None if isinstance(x, float) and math.isinf(x) else x))
    ours_failed = sorted({r["strategy"] for r in failed if not r["strategy"].startswith(("kt_", "tpe"))})
    if ours_failed:   # a reference strategy's failure is theirs; this project's is a defect to fix
        sys.exit(f"error: {', '.join(ours_failed)} failed (above): a defect of this project's strategy")
    return rows


if __name__ == "__main__":
    main()
