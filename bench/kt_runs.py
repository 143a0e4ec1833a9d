"""Kernel Tuner's strategies replayed on a brute-forced cache file in its simulation mode, as
bench/strategies.py runs them: each run seeded, started again where its strategy ends short of the
budget, and given what it needs made once per worker (the legal set, the cache file's text, the
solved restriction).

    run_kt(space, seed, limit, strategy, restart=True) -> (trace, CPU per suggestion, starts)
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import random
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cache_spaces import Evaluator

KT_RESTARTS_IDLE = 3   # restarts in a row that add no new configuration end the run


@contextlib.contextmanager
def seeded_latin_hypercubes():
    """Kernel Tuner draws Latin hypercube samples (differential evolution's population through
    searchspace.get_LHS_sample, Bayesian optimization's start) from scipy's LatinHypercube with
    no seed: fresh OS entropy, so those two strategies' rows differed from run to run with the same
    seed. Within this, each such sampler's rng is drawn from numpy's global generator instead,
    which run_kt seeds before each start."""
    from scipy.stats import qmc
    from kernel_tuner.strategies import bayes_opt
    original = qmc.LatinHypercube

    class Seeded(original):
        def __init__(self, d, **kw):
            if kw.get("rng") is None and kw.get("seed") is None:
                kw["rng"] = int(np.random.randint(0, 2**31 - 1))
            super().__init__(d, **kw)

    qmc.LatinHypercube = bayes_opt.LatinHypercube = Seeded
    try:
        yield
    finally:
        qmc.LatinHypercube = bayes_opt.LatinHypercube = original


@dataclass
class KtSpace:
    """What every Kernel Tuner run of one loaded space is given, made once per worker: the legal set
    as the restriction looks it up (configurations as comma-joined strings), the cache file's text,
    and Kernel Tuner's solves of the restriction (solved_once), each with the CPU it took."""
    data: dict
    legal: frozenset
    cache_text: str
    solved: dict = field(default_factory=dict)


_KT_SPACES: dict[str, KtSpace] = {}


def kt_space(space: dict) -> KtSpace:
    """This worker's KtSpace for `space` (a space loaded again, a new data object, gets a new one)."""
    made = _KT_SPACES.get(space["path"])
    if made is None or made.data is not space["data"]:
        made = KtSpace(space["data"], frozenset(",".join(str(v) for v in cfg) for cfg in space["table"]),
                       json.dumps(space["data"]))
        _KT_SPACES[space["path"]] = made
    return made


@contextlib.contextmanager
def solved_once(kt: KtSpace):
    """Kernel Tuner solves the space's restriction over the whole product of its values (python-
    constraint, one call per point: about 8 us a point, minutes for the hub's largest products) at
    every start of every run, and every run of one space gets the same legal set in the same order.
    Within this context a worker solves each space once (kept in kt.solved) and hands later starts a
    copy. The CPU the solve took is charged again to every start that reuses it (yielded, to be added
    to the run's CPU), so Kernel Tuner's CPU per suggestion reads as if it solved every time, as it
    does for a user; only the bench's wall time shrinks."""
    from constraint import Problem
    original = Problem.getSolutionsAsListDict
    reused = [0.0]

    def solve(problem, *args, **kwargs):
        key = (repr(args), repr(sorted(kwargs.items())))
        if key in kt.solved:
            (found, index, size), spent = kt.solved[key]
            reused[0] += spent
            return list(found), dict(index), size
        t0 = time.process_time()
        out = original(problem, *args, **kwargs)
        kt.solved[key] = ((list(out[0]), dict(out[1]), out[2]), time.process_time() - t0)
        return out

    Problem.getSolutionsAsListDict = solve
    try:
        yield reused
    finally:
        Problem.getSolutionsAsListDict = original


def run_kt(space, seed, limit, strategy, restart=True):
    """One Kernel Tuner run; with `restart`, a strategy that ends before the budget (dual and
    simulated annealing do) is started again with the next seed until `limit` distinct
    configurations are measured, as a user with that budget would: the configurations earlier
    starts measured stay free (the user's cache), so only new ones count.  Without it the run ends
    where the strategy does, and the summary leaves it out of the budgets it did not reach."""
    import kernel_tuner
    keys = space["keys"]
    tune_params = {k: space["params"][k] for k in keys}
    kt = kt_space(space)
    legal = kt.legal

    def restrict(*args):
        # Kernel Tuner passes a dict of the configuration; python-constraint, checking a space of one
        # parameter, passes its value alone
        values = [args[0][k] for k in keys] if len(args) == 1 and isinstance(args[0], dict) else args
        return ",".join(str(v) for v in values) in legal

    warnings.simplefilter("ignore", RuntimeWarning)   # overflows inside Kernel Tuner's and scipy's annealing
    # Kernel Tuner imports a strategy's module on its first use, and that first import (of the
    # scientific stack under it) draws from Python's global generator: done after the seed, the
    # first run of a strategy in a process differed from every later one with the same seed
    kernel_tuner.interface.strategy_map[strategy].tune   # reading an attribute imports the module
    importlib.import_module("kernel_tuner.strategies.bayes_opt")   # seeded_latin_hypercubes patches it
    ev = Evaluator(space, limit)
    cpu, starts, idle = 0.0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache.json"
        cache.write_text(kt.cache_text)   # each run its own copy: nothing one run does reaches the next
        while not ev.done and idle < KT_RESTARTS_IDLE:
            start_seed = seed if starts == 0 else seed + 100_003 * starts   # the first start is the seed's own
            np.random.seed(start_seed % 2**32)
            random.seed(start_seed)
            before = len(ev.trace)
            t0 = time.process_time()
            with contextlib.redirect_stdout(io.StringIO()), seeded_latin_hypercubes(), solved_once(kt) as reused:
                results, env = kernel_tuner.tune_kernel(
                    space["data"].get("kernel_name", "kernel"), "__global__ void k() {}",
                    space["data"].get("problem_size", (1,)), [], tune_params,
                    restrictions=restrict, cache=str(cache), simulation_mode=True, strategy=strategy,
                    objective=space["objective"], objective_higher_is_better=space["higher_is_better"],
                    strategy_options={"max_fevals": limit}, verbose=False, quiet=True)
            cpu += time.process_time() - t0 + reused[0]
            starts += 1
            for r in results:
                cfg = tuple(r[k] for k in keys)
                if cfg in space["table"] and not ev.done:
                    ev(cfg)
            idle = idle + 1 if len(ev.trace) == before else 0
            if not restart:
                break
    return ev.trace, cpu / max(1, len(ev.trace)), starts
