"""Model-based search with Optuna's TPE sampler, for spaces whose parameters interact
(2-D tiles, thread tiles and block sizes of one kernel), where neither a full grid
nor a factorized sweep fits.

The driver asks for a batch (as many as it can run at once, but at most
`in_flight` awaiting their results: a tenth of `samples`, at least 4, as for the
learning strategy), runs it and tells each result's objective: the summed time
of the kernels the space governs. A failed config is told as failed. Uncapped, a
sweep on a 16-core H200 asked 36 proposals before its first result (xgemm,
bench/STRATEGIES.md), so a third of a 100-trial budget learned nothing. Where the
space declares legal defaults, they are the first trial (`defaults_first`), as for
the learning strategy.

The space's constraints are handed to the sampler as Optuna constraints: each
trial's value for constraint i is 1 when the trial breaks it, else 0. TPE then
ranks every infeasible trial after the feasible and merely pruned ones (those
breaking fewer rules first), so an illegal point is never taken for a good one;
as a pruned trial without constraints it could be, while few trials had
completed. Optuna 5 takes constraints per trial (Trial.set_constraint) and
deprecates the sampler's constraints_func, which older versions need; both get
the same values. TPE may still suggest illegal points: each is told as pruned
(with its constraint values), recorded as skipped, and never built. A space
whose legal points are rare is better sampled by `random`, which draws from the
legal set.
"""

from __future__ import annotations

from typing import Any

from sweep.space import Config, Space, check, first_broken, make_config
from sweep.plan.base import DEFAULTS_FIRST, IN_FLIGHT, Option, Search, Skipped, StrategySpec, default_in_flight, \
    defaults_to_propose


def per_trial_constraints(optuna: Any) -> bool:
    """Whether this Optuna takes constraints per trial (5 and later) rather than through constraints_func."""
    return hasattr(optuna.trial.Trial, "set_constraint")


class TPESearch(Search):
    def __init__(self, space: Space):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        o = SPEC.values(space.strategy)
        self.space = space
        self.per_trial = per_trial_constraints(optuna)
        extra = {} if self.per_trial or not space.constraints else {"constraints_func": self._constraints_func}
        self.study = optuna.create_study(direction="minimize",
                                         sampler=optuna.samplers.TPESampler(seed=o["seed"], **extra))
        default = defaults_to_propose(space, o)
        if default is not None:
            self.study.enqueue_trial(default)
        self.note = f"optuna: up to {o['samples']} trials" + ("; first the declared defaults" if default is not None else "")
        self.budget = o["samples"]
        self.in_flight = o["in_flight"] or default_in_flight(self.budget)
        self.asked = 0
        self.pending: dict[Config, list] = {}
        self.told: dict[Config, float | None] = {}   # measured configs: a repeat is answered from here
        self.skipped: list[Skipped] = []
        self._optuna = optuna

    def violations(self, config: Config) -> tuple[float, ...]:
        """Per constraint of the space: 1.0 where `config` breaks it, else 0.0 (Optuna: > 0 is infeasible)."""
        values = config.as_dict()
        return tuple(0.0 if first_broken((c,), values) is None else 1.0 for c in self.space.constraints)

    def _constraints_func(self, trial: Any) -> tuple[float, ...]:
        return self.violations(make_config(self.space, trial.params))

    def ask(self, n: int) -> list[Config]:
        n = min(n, self.in_flight - len(self.pending))   # enough await their results: asked again as each ends
        out: list[Config] = []
        tries = 0
        while len(out) < n and self.asked < self.budget and tries < 100 * max(1, n):
            tries += 1
            trial = self.study.ask()
            chosen = {p.macro: trial.suggest_categorical(p.macro, list(p.values)) for p in self.space.swept}
            c = make_config(self.space, chosen)
            reason = check(self.space, c)
            if reason is not None:
                if self.per_trial:
                    for i, v in enumerate(self.violations(c)):
                        if v > 0:
                            trial.set_constraint(str(i), v)
                self.study.tell(trial, state=self._optuna.trial.TrialState.PRUNED)
                self.skipped.append(Skipped(c, reason))
                continue
            if c in self.told:  # TPE may repeat a point; measure it once and answer repeats with its result
                if self.told[c] is None:
                    self.study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
                else:
                    self.study.tell(trial, self.told[c])
                continue
            if c in self.pending or c in out:
                self.study.tell(trial, state=self._optuna.trial.TrialState.PRUNED)
                continue
            self.pending[c] = [trial]
            self.asked += 1
            out.append(c)
        return out

    def tell(self, config: Config, objective_ns: float | None, failure: str | None = None,
             cost_s: float | None = None) -> None:
        self.told[config] = objective_ns
        for trial in self.pending.pop(config, []):
            if objective_ns is None:
                self.study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
            else:
                self.study.tell(trial, objective_ns)


SPEC = StrategySpec(
    "optuna", "Optuna's TPE sampler, learning from each batch's results; constraints are handed to the sampler",
    options=(
        Option("samples", int, 20, "how many distinct configs to measure (trials)", lo=1, hi=1_000_000),
        Option("seed", int, 0, "seeds the sampler: the same seed and results ask for the same configs"),
        IN_FLIGHT,
        DEFAULTS_FIRST,
    ),
    search=TPESearch,
)
