"""What every record shares: the job Status and its sets, schema checks, Stale and Damaged."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, Mapping

from sweep.core.errors import SweepError


class Status(str, Enum):
    """A job's outcome. The first eight are final; pending, running and built (by a dry
    run) are what `status` and the tables show for a job that has not been measured."""

    OK = "ok"                           # measured
    SKIPPED = "skipped"                 # illegal: a constraint, a static_assert, a resource limit
    COMPILE_FAILED = "compile_failed"
    VERIFY_FAILED = "verify_failed"     # built, but computes wrong results: never picked
    RUNTIME_FAILED = "runtime_failed"   # a program crashed, or a profiler or tool failed
    TIMEOUT = "timeout"
    PREEMPTED = "preempted"
    CANCELLED = "cancelled"
    PENDING = "pending"
    RUNNING = "running"
    BUILT = "built"                     # compiled by a dry run, not measured yet (the next run measures it)

    def __str__(self) -> str:
        return self.value

    def __hash__(self) -> int:  # as its value, so "ok" finds Status.OK in a set or dict
        return hash(self.value)

    @property
    def failed(self) -> bool:
        return self in FAILED

    @property
    def final(self) -> bool:
        """Not run again on resume (failures only with --retry-failed)."""
        return self in DONE


FAILED = frozenset({Status.COMPILE_FAILED, Status.VERIFY_FAILED, Status.RUNTIME_FAILED, Status.TIMEOUT,
                    Status.PREEMPTED, Status.CANCELLED})
DONE = frozenset({Status.OK, Status.SKIPPED, Status.COMPILE_FAILED, Status.VERIFY_FAILED})
NOT_FAILED = frozenset({Status.OK, Status.SKIPPED, Status.PENDING, Status.RUNNING, Status.BUILT})
FINAL = frozenset(Status) - {Status.PENDING, Status.RUNNING, Status.BUILT}


def now() -> str:
    """UTC time, as every record writes it."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Stale(SweepError):
    """A record of another schema version: refused with the command that rewrites it."""


class Damaged(SweepError):
    """A record of the right schema whose content is not what that schema says."""


def check_schema(data: Any, path: Path | str, schema: str, rewrite: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise Damaged(f"{path} holds {type(data).__name__}, not a {schema} record; {rewrite}")
    found = data.get("schema")
    if found != schema:
        raise Stale(f"{path} has schema {found!r}, this version reads {schema!r}; {rewrite}")
    return data


def build_record(cls: type, data: Mapping[str, Any], path: Path | str, rewrite: str, **converted: Any) -> Any:
    """cls(**data) with `converted` fields replaced; a missing or unknown key is Damaged."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise Damaged(f"{path}: unknown field(s) {', '.join(unknown)} for {cls.__name__}; {rewrite}")
    try:
        return cls(**{**data, **converted})
    except TypeError as e:
        raise Damaged(f"{path}: not a valid {cls.__name__} ({e}); {rewrite}") from None


def read_json(path: Path) -> Any:
    """A JSON file's content; Damaged when it is not JSON (OSError passes through)."""
    try:
        return json.loads(Path(path).read_bytes())
    except ValueError as e:
        raise Damaged(f"{path} is not valid JSON ({e})") from None
