"""What a Slurm cluster lets one user queue, and how much of a plan goes out next.

The limits are read once per driver run:

    MaxArraySize   `scontrol show config`: array indices run from 0 to MaxArraySize - 1,
                   so one array holds at most MaxArraySize tasks (Slurm's default: 1001)
    MaxJobCount    `scontrol show config`: the job records the controller keeps, every
                   array task counted (finished ones too, for MinJobAge); a ceiling on
                   what one user can have queued
    MaxSubmitJobs  of the user's associations on this cluster, and MaxSubmitJobsPerUser of
                   the QOS the jobs run under (`sacctmgr`), where an accounting database
                   answers; every array task counts
    max_submit     the space's slurm.max_submit (--max-submit): the limit to keep where
                   sacctmgr cannot say (many clusters give users no accounting database),
                   or to leave room for other work

The submit limit is the smallest of those known. Where sacctmgr cannot say (not
installed, no slurmdbd configured, slurmdbd or its database down), the limits say why
in one clause of `describe()` and keep to MaxJobCount and max_submit. `next_array`
then says how many configurations the next array takes: no more than MaxArraySize,
no more than the submit limit leaves room for (counting the user's tasks already
queued), and only while the sweep's earlier arrays leave some of its
array_parallelism free, so that at most array_parallelism of its tasks run at once
across all its arrays.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, replace

from sweep.space import Slurm

DEFAULT_ARRAY_SIZE = 1001
# sbatch's words for a refusal that passes once some of the user's jobs have left the queue
LIMIT_REFUSALS = re.compile(r"MaxSubmitJob|SubmitJobLimit|job submit limit|MaxJobCount|Job violates accounting/QOS "
                            r"policy|temporarily unable to accept job", re.I)


@dataclass(frozen=True, slots=True)
class Limits:
    array_size: int = DEFAULT_ARRAY_SIZE    # tasks per array at most
    max_submit: int | None = None           # tasks of the user queued (pending or running) at once; None: no limit known
    sources: tuple[str, ...] = ()           # where each limit came from, for the driver's note

    def describe(self) -> str:
        return "; ".join(self.sources) or f"no limits read; arrays of at most {self.array_size} tasks"

    def learned(self, queued: int, why: str) -> "Limits":
        """The limits after sbatch refused a submission with `queued` tasks already in the queue."""
        limit = max(1, queued)
        if self.max_submit is not None and self.max_submit <= limit:
            return self
        return replace(self, max_submit=limit, sources=self.sources + (f"at most {limit} queued: sbatch refused more ({why})",))


def parse_config(text: str) -> dict[str, str]:
    """`scontrol show config` as {key: value} ('MaxArraySize = 1001' lines)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def parse_parsable(text: str, fields: tuple[str, ...]) -> list[dict[str, str]]:
    """`sacctmgr -n -P ... format=<fields>` output: one dict per line."""
    rows = []
    for line in text.splitlines():
        if line.strip():
            values = line.rstrip("\n").split("|")
            rows.append(dict(zip(fields, values + [""] * (len(fields) - len(values)))))
    return rows


def _int(value: str | None) -> int | None:
    value = (value or "").strip()
    return int(value) if value.isdigit() else None


def submit_limits(assocs: list[dict[str, str]], qos: list[dict[str, str]], account: str | None,
                  qos_name: str | None) -> list[tuple[int, str]]:
    """(limit, where) for the association and QOS limits that apply to jobs of `account` under `qos_name`
    (the association's default QOS when none is asked for)."""
    found: list[tuple[int, str]] = []
    mine = [a for a in assocs if not account or a.get("Account") == account]
    for a in mine:
        n = _int(a.get("MaxSubmit"))
        if n is not None:
            found.append((n, f"MaxSubmitJobs {n} of association {a.get('User')}/{a.get('Account')} (sacctmgr)"))
    names = {qos_name} if qos_name else {a.get("DefaultQOS") or "normal" for a in mine} or {"normal"}
    for q in qos:
        n = _int(q.get("MaxSubmitPU"))
        if q.get("Name") in names and n is not None:
            found.append((n, f"MaxSubmitJobsPerUser {n} of QOS {q.get('Name')} (sacctmgr)"))
    return found


def _run(cmd: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return subprocess.CompletedProcess(cmd, 127, "", f"{cmd[0]} not found on PATH")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", f"{cmd[0]} did not answer in {timeout:.0f} s")
    except OSError as e:
        return subprocess.CompletedProcess(cmd, 126, "", f"{cmd[0]}: {e.strerror}")


def failure(stderr: str) -> str:
    """Why a Slurm client said nothing, in one line: its first message, without the
    'sacctmgr: error: ' prefix and the name of the C function that failed."""
    for line in stderr.splitlines():
        line = re.sub(r"^\w+:\s+(error:\s+)?", "", line.strip())
        line = re.sub(r"^[a-z]+(_[a-z]+)+: ", "", line)
        if line:
            return line
    return "no message"


ASSOC_FIELDS = ("User", "Account", "MaxSubmit", "DefaultQOS")
QOS_FIELDS = ("Name", "MaxSubmitPU")


def sacctmgr_commands(user: str, cluster: str | None) -> tuple[list[str], list[str]]:
    """The two sacctmgr calls: the user's associations (on `cluster`, where one slurmdbd serves
    several), and every QOS."""
    where = [f"user={user}"] + ([f"cluster={cluster}"] if cluster else [])
    return (["sacctmgr", "-n", "-P", "show", "assoc", "where", *where, f"format={','.join(ASSOC_FIELDS)}"],
            ["sacctmgr", "-n", "-P", "show", "qos", f"format={','.join(QOS_FIELDS)}"])


def read_limits(s: Slurm, user: str) -> Limits:
    """The cluster's limits for `user` (one scontrol call; two sacctmgr calls where it answers)."""
    config = parse_config(_run(["scontrol", "show", "config"]).stdout)
    sources: list[str] = []
    array_size = _int(config.get("MaxArraySize")) or DEFAULT_ARRAY_SIZE
    sources.append(f"arrays of at most {array_size} tasks (MaxArraySize)")
    limits: list[tuple[int, str]] = []
    max_jobs = _int(config.get("MaxJobCount"))
    if max_jobs:
        limits.append((max_jobs, f"MaxJobCount {max_jobs} (scontrol show config)"))
    assoc_cmd, qos_cmd = sacctmgr_commands(user, config.get("ClusterName"))
    a = _run(assoc_cmd)
    if a.returncode != 0:
        sources.append(f"no QOS or association submit limit read (sacctmgr: {failure(a.stderr)}), "
                       f"so only MaxJobCount and slurm.max_submit limit submissions")
    else:
        assocs = parse_parsable(a.stdout, ASSOC_FIELDS)
        if not assocs:
            sources.append(f"sacctmgr lists no association of user {user}")
        q = _run(qos_cmd)
        if q.returncode != 0:
            sources.append(f"no QOS submit limit read (sacctmgr: {failure(q.stderr)})")
        limits += submit_limits(assocs, parse_parsable(q.stdout, QOS_FIELDS) if q.returncode == 0 else [],
                                s.account, s.qos)
    if s.max_submit:
        limits.append((s.max_submit, f"slurm.max_submit {s.max_submit}"))
    if not limits:
        return Limits(array_size, None, tuple(sources))
    n, why = min(limits)
    return Limits(array_size, n, tuple(sources) + (f"at most {n} tasks queued at once: {why}",))


def next_array(waiting: int, queued: int, running_configs: int, limits: Limits, parallelism: int,
               tasks_per_config: int = 1) -> tuple[int, int]:
    """(configurations for the next array, its throttle), or (0, 0) when none should go out now.

    waiting          configurations not yet submitted
    queued           tasks of the user in the queue now (each counts toward the submit limit)
    running_configs  the sweep's configurations submitted and not yet ended: they hold the
                     parallelism first, so the new array may run only what they leave
    tasks_per_config 2 when each configuration is a build task and a measure task
    """
    throttle = parallelism - running_configs
    if waiting <= 0 or throttle < 1:
        return 0, 0
    room = waiting if limits.max_submit is None else (limits.max_submit - queued) // tasks_per_config
    n = min(waiting, limits.array_size, room)
    return (n, min(throttle, n)) if n >= 1 else (0, 0)


def throttles(arrays: list[tuple[int, int]], parallelism: int) -> list[int]:
    """For a sweep's arrays in submission order, as (unfinished tasks, current throttle): the
    throttle each should have so that earlier arrays keep theirs and later ones take what
    the earlier leave of the parallelism. Throttles only rise (an earlier array's tasks end,
    they never come back)."""
    budget, out = parallelism, []
    for unfinished, current in arrays:
        want = max(current, min(budget, unfinished))
        out.append(want)
        budget -= min(unfinished, want)
        budget = max(budget, 0)
    return out
