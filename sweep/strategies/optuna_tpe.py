"""Model-based search with Optuna's TPE sampler, for spaces whose parameters interact
(2-D tiles, thread tiles and block sizes of one kernel), where neither a full grid
nor a factorized sweep fits.

The driver asks for a batch (as many as it can run at once), runs it and tells
each result's objective: the summed time of the kernels the space governs.
Illegal suggestions are told to Optuna as pruned and recorded as skipped; a
failed config is told as failed, so TPE steers away from both.
"""

from __future__ import annotations

from sweep.space import Config, Space, check, make_config
from sweep.strategies import Search, Skipped


class TPESearch(Search):
    def __init__(self, space: Space):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space = space
        self.study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=space.strategy.seed))
        self.budget = space.strategy.samples
        self.asked = 0
        self.pending: dict[Config, list] = {}
        self.told: dict[Config, float | None] = {}   # measured configs: a repeat is answered from here
        self.skipped: list[Skipped] = []
        self._optuna = optuna

    def ask(self, n: int) -> list[Config]:
        out: list[Config] = []
        tries = 0
        while len(out) < n and self.asked < self.budget and tries < 100 * max(1, n):
            tries += 1
            trial = self.study.ask()
            chosen = {p.macro: trial.suggest_categorical(p.macro, list(p.values)) for p in self.space.swept}
            c = make_config(self.space, chosen)
            reason = check(self.space, c)
            if reason is not None:
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

    def tell(self, config: Config, objective_ns: float | None) -> None:
        self.told[config] = objective_ns
        for trial in self.pending.pop(config, []):
            if objective_ns is None:
                self.study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
            else:
                self.study.tell(trial, objective_ns)
