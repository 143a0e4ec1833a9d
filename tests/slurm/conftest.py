"""Fixtures for tests that need the project's single-node Slurm cluster.

The cluster is real (munged, slurmctld, slurmd, slurmdbd and its MariaDB from
Debian's packages) and is managed by ``tests/slurm/cluster.sh``. ``slurm_cluster`` makes sure it is up,
starting it when the binaries are installed but the daemons are not running.
Without Slurm the tests skip, unless ``SWEEP_REQUIRE_SLURM=1`` (CI sets it),
in which case they fail with the reason.

Every test collected under ``tests/slurm/`` gets the ``slurm`` marker.

The helpers below are plain functions as well as fixtures, so code elsewhere
can load this file (e.g. with importlib) and call ``ensure_cluster()``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CLUSTER_SH = HERE / "cluster.sh"


@dataclasses.dataclass(frozen=True)
class SlurmCluster:
    """What the tests may rely on about the running cluster."""

    node: str
    default_partition: str
    partitions: tuple[str, ...]
    cpus: int
    gpus: int
    state_dir: Path
    script: Path = CLUSTER_SH


def require_slurm() -> bool:
    return os.environ.get("SWEEP_REQUIRE_SLURM", "") == "1"


def _unavailable(reason: str) -> None:
    if require_slurm():
        pytest.fail(f"SWEEP_REQUIRE_SLURM=1 but the Slurm cluster is unavailable: {reason}", pytrace=False)
    pytest.skip(f"Slurm cluster unavailable: {reason} (bash {CLUSTER_SH} install && bash {CLUSTER_SH} start)")


def _cluster_sh(cmd: str, timeout: float) -> subprocess.CompletedProcess:
    # stdin/stdout/stderr are never inherited: the daemons that `start` spawns
    # must not hold pytest's pipes open.
    return subprocess.run(
        ["bash", str(CLUSTER_SH), cmd],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _describe() -> SlurmCluster:
    node = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True)
    parts = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, check=True)
    names = [p.strip() for p in parts.stdout.split() if p.strip()]
    default = next((p.rstrip("*") for p in names if p.endswith("*")), names[0].rstrip("*") if names else "debug")
    cpus = subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True, check=True)
    gres = subprocess.run(["sinfo", "-h", "-o", "%G"], capture_output=True, text=True, check=True)
    gpus = 0
    for item in gres.stdout.split()[0].split(",") if gres.stdout.split() else []:
        fields = item.split("(")[0].split(":")
        if fields[0] == "gpu" and fields[-1].isdigit():
            gpus = int(fields[-1])
    return SlurmCluster(
        node=node.stdout.split()[0],
        default_partition=default,
        partitions=tuple(p.rstrip("*") for p in names),
        cpus=int(cpus.stdout.split()[0].rstrip("+")),
        gpus=gpus,
        state_dir=Path(os.environ.get("SWEEP_SLURM_DIR", "/tmp/sweep-slurm")),
    )


def ensure_cluster() -> SlurmCluster:
    """Return the running cluster, starting it if needed; skip/fail otherwise."""
    if shutil.which("sbatch") is None or shutil.which("slurmctld") is None:
        _unavailable("sbatch/slurmctld not on PATH")
    status = _cluster_sh("status", timeout=60)
    if status.returncode != 0:
        start = _cluster_sh("start", timeout=180)
        if start.returncode != 0:
            _unavailable(f"`cluster.sh start` exited {start.returncode}:\n{_tail(start.stdout)}")
        status = _cluster_sh("status", timeout=60)
        if status.returncode != 0:
            _unavailable(f"cluster started but `cluster.sh status` says:\n{_tail(status.stdout)}")
    try:
        cluster = _describe()
    except (subprocess.CalledProcessError, IndexError, ValueError) as exc:
        _unavailable(f"cannot read the cluster's layout with sinfo: {exc!r}")
        raise  # unreachable: _unavailable raises
    _require_empty_queue()
    return cluster


def _require_empty_queue() -> None:
    # The tests time their jobs' starts; jobs someone else left queued would
    # hold the single node and turn every test into a timeout.
    queue = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True)
    foreign = [line for line in queue.stdout.splitlines() if line.strip()] if queue.returncode == 0 else []
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        _unavailable(
            f"the test cluster is busy with {len(foreign)} job(s) from before this test run ({shown}); "
            f"the Slurm tests need an idle node: wait for them, or `bash {CLUSTER_SH} fresh` cancels them"
        )


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    return ensure_cluster()


@pytest.fixture(scope="session")
def slurm_partition(slurm_cluster: SlurmCluster) -> str:
    return slurm_cluster.default_partition


@pytest.hookimpl(tryfirst=True)   # before xdist's own hook reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Called with every collected item of the session: mark only ours. They all run on one
    # xdist worker, one at a time: each assumes a queue that is otherwise idle.
    for item in items:
        path = Path(str(getattr(item, "path", item.fspath))).resolve()
        if HERE == path or HERE in path.parents:
            item.add_marker(pytest.mark.slurm)
            item.add_marker(pytest.mark.xdist_group("slurm"))
