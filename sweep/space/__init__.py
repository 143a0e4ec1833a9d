"""Search spaces: what a sweep varies, what is legal, how it builds and runs.

    model     the frozen dataclasses (Parameter, Constraint, Strategy, Space,
              Config, ...) and what is computed from them: make_config, check,
              tag, tags_for, config_hash, default_config, groups
    expr      constraint expressions: a small, safe, bounded subset of Python
    reader    a space file's bytes to plain data, every size bounded (1 MiB,
              nesting, aliases, duplicate keys, encoding)
    loader    plain data to a validated Space (parameters, values, constraints)
    sections  the settings sections, and the strategy's options checked against
              what the strategy declares (sweep.plan)
    workloads the named runs every configuration is measured on (`workloads:`)

Everything is validated before anything is rendered: a bad file stops with one
SweepError naming the file, the key, the bad value, what is allowed and the
fix. A *combination* that breaks a constraint is not an error: strategies skip
it and record why (see `check`).
"""

from __future__ import annotations

from typing import Any

from sweep.space.loader import MACRO_RE, MAX_CONSTRAINTS, MAX_PARAMETERS, MAX_VALUES, NAME_RE, TAG_RE, launch_size, \
    load_space, parse_space
from sweep.space.configs import check, config_hash, default_config, first_broken, group_constraints, groups, \
    make_config, pick_config, swept_read_by, tag, tags_for, values_digest
from sweep.space.model import BACKENDS, MAX_VALUE, VERIFY_IN_PROFILE, Build, Certify, Config, Constraint, Parameter, \
    Profile, Program, Replay, Run, Slurm, Space, Stopping, Strategy, Target, iterations_per_run
from sweep.space.workloads import DEFAULT as DEFAULT_WORKLOAD, Workload

__all__ = [
    "BACKENDS", "Build", "Certify", "Config", "Constraint", "DEFAULT_WORKLOAD", "MACRO_RE", "MAX_CONSTRAINTS",
    "MAX_PARAMETERS", "MAX_VALUE", "MAX_VALUES", "NAME_RE", "Parameter", "Profile", "Program", "Replay", "Run", "STRATEGIES",
    "Slurm", "Space", "Stopping", "Strategy", "TAG_RE", "Target", "VERIFY_IN_PROFILE", "Workload", "check",
    "config_hash", "default_config", "first_broken", "group_constraints", "groups", "iterations_per_run",
    "launch_size", "load_space", "make_config", "parse_space", "pick_config", "swept_read_by", "tag", "tags_for",
    "values_digest",
]


def __getattr__(name: str) -> Any:
    """STRATEGIES: the strategy names, from the registry in sweep.plan (which
    imports this package, so it is looked up on first use)."""
    if name == "STRATEGIES":
        from sweep.space import declared

        return declared.NAMES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
