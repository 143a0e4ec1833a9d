"""The command line's overrides of a space file (`run` and `validate`): another name, strategy,
backend, samples or budget, strategy options, the overlap mode and Slurm settings. The CLI wins
over the file; each value is checked as the file's would be, and refused naming the flag."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from sweep import plan as strategies, profile
from sweep.core.errors import SweepError
from sweep.space import Space
from sweep.space.sections import show, sweep_name_problem


BOOLEAN = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def strategy_option_values(space: Space, given: dict[str, str]) -> Any:
    """The space's strategy with options from the command line (`--budget 50`, `--strategy-option
    whole=20`), each checked against what the strategy declares."""
    spec = strategies.spec(space)
    declared = {o.name: o for o in spec.options}
    values = dict(space.strategy.options)
    for key, text in given.items():
        if key not in declared:
            raise SweepError(f"--strategy-option {key}: strategy {spec.name!r} takes "
                             f"{', '.join(declared) or 'no options'}")
        kind = declared[key].type
        try:
            value: Any = int(text) if kind is int else BOOLEAN[text.lower()] if kind is bool else text
        except (ValueError, KeyError):
            what = "a whole number" if kind is int else "true or false"
            raise SweepError(f"--strategy-option {key}={text}: must be {what} ({declared[key].doc})") from None
        values[key] = declared[key].check(value, f"--strategy-option {key}")
    return dataclasses.replace(space.strategy, options=tuple(sorted(values.items())))


def _with_option(space: Space, name: str, value: Any) -> Space:
    """The space's strategy with option `name` (given as --NAME on the command line, _ as -) set to
    `value`, checked against what the strategy declares; refused naming the strategies that take it."""
    spec = strategies.spec(space)
    option = next((o for o in spec.options if o.name == name), None)
    flag = "--" + name.replace("_", "-")
    if option is None:
        takers = [n for n, s in strategies.REGISTRY.items() if s.takes(name)]
        raise SweepError(f"{flag} {value}: strategy {spec.name} takes no {name.replace('_', ' ')} (it plans its own "
                         f"points); add --strategy {' or --strategy '.join(takers)}, or drop {flag}")
    option.check(value, flag)
    return dataclasses.replace(space, strategy=dataclasses.replace(space.strategy, **{name: value}))


def apply_overrides(space: Space, *, name: str | None = None, strategy: str | None = None, backend: str | None = None,
                    samples: int | None = None, budget: int | None = None, start_from: Path | None = None,
                    slurm: dict[str, Any] | None = None, strategy_options: dict[str, str] | None = None,
                    overlap: bool | None = None) -> Space:
    """The space with command-line overrides (the CLI wins over the file)."""
    if name:
        problem = sweep_name_problem(name)
        if problem:
            raise SweepError(f"--name {show(name)} {problem}")
        space = dataclasses.replace(space, name=name)
    if strategy:
        if strategy not in strategies.STRATEGIES:
            raise SweepError(f"--strategy {strategy!r}: choose one of {', '.join(strategies.STRATEGIES)}")
        space = dataclasses.replace(space, strategy=dataclasses.replace(space.strategy, name=strategy))
    start = str(Path(start_from).expanduser().resolve()) if start_from is not None else None  # from here, not the file
    for option_name, value in (("samples", samples), ("budget", budget), ("start_from", start)):
        if value is not None:   # 0 is a value to refuse, not "not given"
            space = _with_option(space, option_name, value)
    if strategy_options:
        space = dataclasses.replace(space, strategy=strategy_option_values(space, strategy_options))
    if backend:
        profile.backend(backend)
        space = dataclasses.replace(space, profile=dataclasses.replace(space.profile, backend=backend))
    if overlap is not None:      # --no-overlap: every measurement holds the GPU for its whole run
        space = dataclasses.replace(space, profile=dataclasses.replace(space.profile, overlap=overlap))
    if slurm:
        valid = set(space.slurm.__slots__)
        bad = [k for k in slurm if k not in valid]
        if bad:
            raise SweepError(f"unknown Slurm option(s) {', '.join(bad)}; valid: {', '.join(sorted(valid))}")
        space = dataclasses.replace(space, slurm=dataclasses.replace(space.slurm, **slurm))
    return space
