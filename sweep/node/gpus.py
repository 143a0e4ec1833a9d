"""Which GPUs a process may use, and one lock per GPU for the whole node.

    visible       the devices CUDA_VISIBLE_DEVICES names: indices, GPU-<uuid>, MIG-<uuid>
                  (a comma list of any of them); None when it is unset
    lock_dir      the node-wide folder of the GPU locks: $SWEEP_LOCK_DIR, else /run/lock/config-sweep,
                  else /tmp/config-sweep-locks, made world-writable with the sticky bit
    lock_path     a GPU's lock file there, named by its UUID where it can be read, else its index
    gpu_lock      holds a GPU's lock while a job measures
    slot_path     a GPU's admission slot files beside its lock; try_lock takes one without waiting
    own_lock_path the lock of the GPU this process was given (a Slurm or debug job's)
    others_on     the pids of other processes on this job's GPU (NVML), None where unknown
    exclusive     runs a measuring window, checks the GPU was not shared, repeats it once if it was
    measuring_slots  how many jobs may measure on one GPU at once (overlap mode: several)

The lock lived in jobs/<sweep>/_dispatch/, one per sweep: two sweeps started together on one
GPU measured at the same time, silently. Now every sweep of every user (each with its own
jobs folder) shares the node's lock of a GPU. What the lock cannot stop (a process that
takes no lock: a training run, a notebook) NVML's process list shows, read at the start and
the end of the window.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, TypeVar

from sweep.core.errors import SweepError

LOCK_DIR_ENV = "SWEEP_LOCK_DIR"
SYSTEM_LOCK_DIRS = (Path("/run/lock"), Path("/tmp"))
LOCK_FOLDER = {Path("/run/lock"): "config-sweep", Path("/tmp"): "config-sweep-locks"}
UUID_RE = re.compile(r"^(GPU|MIG)-[0-9A-Za-z/_.:-]+$")
SMI_UUID = re.compile(r"^GPU (\d+):.*\(UUID: (GPU-[0-9A-Za-z-]+)\)")
T = TypeVar("T")


def visible(env: str | None = None) -> list[str] | None:
    """The devices CUDA_VISIBLE_DEVICES names, in order: "0", "GPU-<uuid>", "MIG-<uuid>" (None: unset).
    CUDA stops at the first entry it cannot read, so do the entries after it."""
    text = os.environ.get("CUDA_VISIBLE_DEVICES") if env is None else env
    if text is None:
        return None
    out = []
    for word in (w.strip() for w in text.split(",")):
        if word.isdigit():
            out.append(str(int(word)))
        elif UUID_RE.match(word):
            out.append(word)
        else:
            break
    return out


def uuids_by_index(run: Callable[[list[str]], str] | None = None) -> dict[str, str]:
    """GPU index -> UUID from `nvidia-smi -L` ({} where it cannot run)."""
    smi = shutil.which("nvidia-smi")
    if run is None and not smi:
        return {}
    try:
        text = run(["nvidia-smi", "-L"]) if run is not None else \
            subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {m[1]: m[2] for m in (SMI_UUID.match(line.strip()) for line in text.splitlines()) if m}


def lock_dir(env: dict[str, str] | None = None, system: tuple[Path, ...] = SYSTEM_LOCK_DIRS) -> Path:
    """The node-wide folder of the GPU locks, made if missing: world-writable with the sticky bit
    (every user's sweeps lock in it; none can remove another's files)."""
    env = os.environ if env is None else env
    if env.get(LOCK_DIR_ENV):
        candidates = [Path(env[LOCK_DIR_ENV])]
    else:
        candidates = [base / LOCK_FOLDER.get(base, "config-sweep-locks") for base in system
                      if base.is_dir() and os.access(base, os.W_OK | os.X_OK)]
    for d in candidates:
        try:
            d.mkdir(parents=True)
            os.chmod(d, 0o1777)          # only a folder this call made: never another user's
        except FileExistsError:
            pass
        except OSError:
            continue
        if d.is_dir() and os.access(d, os.W_OK | os.X_OK):
            return d
    where = candidates[0] if candidates else "/run/lock or /tmp"
    raise SweepError(f"cannot use {where} for the node's GPU locks: set {LOCK_DIR_ENV} to a folder every "
                     "user of this node can write (mode 1777), e.g. export SWEEP_LOCK_DIR=/tmp/config-sweep-locks")


def lock_key(device: str, uuids: dict[str, str] | None = None) -> str:
    """The name a GPU's lock goes by: its UUID where known (indices differ between
    CUDA_VISIBLE_DEVICES settings, UUIDs do not), else gpu<index>."""
    if UUID_RE.match(device):
        return re.sub(r"[^0-9A-Za-z-]", "_", device)
    uuid = (uuids_by_index() if uuids is None else uuids).get(device)
    return uuid if uuid else f"gpu{device}"


def lock_path(device: str, uuids: dict[str, str] | None = None, directory: Path | None = None) -> Path:
    return (directory or lock_dir()) / f"{lock_key(device, uuids)}.lock"


def slot_path(lock: Path, slot: int) -> Path:
    """Admission slot `slot` of the GPU whose lock is `lock` (node-wide like the lock: <lock name>.slot<i>).
    A job process holds a slot from the moment it is given the GPU until its job ends."""
    return lock.with_name(f"{lock.name}.slot{slot}")


def try_lock(path: Path) -> int | None:
    """The descriptor holding `path`'s exclusive lock, or None at once when another holds it."""
    import fcntl

    try:
        fd = _open_shared(path)
    except OSError as e:
        raise lock_error(e, path) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def own_lock_path() -> Path | None:
    """The node-wide lock of the GPU this process was given (CUDA_VISIBLE_DEVICES' first device, as
    Slurm sets it inside a job), so a Slurm or debug job measures alone on it as a local one does;
    None where no GPU is named."""
    devices = visible()
    return lock_path(devices[0]) if devices else None


def _open_shared(path: Path) -> int:
    """A descriptor of a lock file any user may hold: read-only (flock needs no write access), made
    0666 when missing; an existing file is opened without O_CREAT (fs.protected_regular refuses
    O_CREAT on another user's file in a sticky folder)."""
    while True:
        try:
            return os.open(path, os.O_RDONLY | os.O_NOFOLLOW)   # a link planted in the shared folder is refused
        except FileNotFoundError:
            pass
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        try:
            os.fchmod(fd, 0o666)        # past the umask: another user's job opens it too
        except OSError:
            pass
        return fd


class gpu_lock:
    """Exclusive use of a GPU while a job measures (the lock file the executor names; None: no lock)."""

    def __init__(self, path: str | Path | None):
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> "gpu_lock":
        if self.path:
            import fcntl

            try:
                self.fd = _open_shared(Path(self.path))
            except OSError as e:
                raise lock_error(e, Path(self.path)) from None
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            import fcntl

            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def others_on(device: str | None = None) -> set[int] | None:
    """The pids NVML lists on this job's GPU (its CUDA_VISIBLE_DEVICES' first device) other than
    this process; None where pynvml is missing or cannot read it."""
    devices = visible() if device is None else [device]
    if not devices:
        return None
    try:
        import pynvml as nvml  # type: ignore[import-not-found]

        nvml.nvmlInit()
        dev = devices[0]
        handle = (nvml.nvmlDeviceGetHandleByUUID(dev) if UUID_RE.match(dev) else nvml.nvmlDeviceGetHandleByIndex(int(dev)))
        procs = list(nvml.nvmlDeviceGetComputeRunningProcesses(handle))
        procs += list(nvml.nvmlDeviceGetGraphicsRunningProcesses(handle))
    except Exception:   # no pynvml, no driver, a MIG slice NVML will not list: unknown, not "free"
        return None
    return {int(p.pid) for p in procs} - {os.getpid()}


def exclusive(window: Callable[[], T], env: dict[str, Any], users: Callable[[], set[int] | None] | None = None) -> T:
    """Runs a measuring window; when another process was on the GPU at its start or its end, runs it
    once more, and says so in env["gpu_shared"] (the pids, and whether the repeat was clean).
    `users`: who else is on the GPU (default others_on, NVML's process list)."""
    users = users or others_on
    seen: list[list[int]] = []
    for attempt in (1, 2):
        before = users()
        out = window()
        after = users()
        others = sorted((before or set()) | (after or set()))
        if not others:
            if seen:
                env["gpu_shared"] = {"pids": seen[0], "repeated": True,
                                     "note": "another process used the GPU during the first measurement; "
                                             "measured again alone"}
            return out
        seen.append(others)
    env["gpu_shared"] = {"pids": sorted(set(seen[0]) | set(seen[1])), "repeated": True,
                         "note": f"other processes ({', '.join(map(str, seen[1]))}) used the GPU during both "
                                 "measurements: these times may be slower than the GPU alone"}
    return out


def lock_error(e: OSError, path: Path) -> SweepError:
    """A lock file that cannot be opened, in one line."""
    why = "permission denied" if e.errno in (errno.EACCES, errno.EPERM) else e.strerror
    return SweepError(f"cannot open the GPU lock {path} ({why}): set {LOCK_DIR_ENV} to a folder every user of "
                      "this node can write (mode 1777)")


MAX_OVERLAP_SLOTS = 16  # programs measuring on one GPU at once in overlap mode, at most


def measuring_slots(space: Any, cpus: int, gpus: int) -> int:
    """How many jobs may be in their measuring phase on one GPU at once: 1, or in overlap mode
    (sweep.node.overlap: the cupti backend, profile.overlap on, one GPU per job) the CPUs per
    GPU, at most MAX_OVERLAP_SLOTS. Why these bounds: the slots exist so that one program's host
    work (set-up, fills, CPU checks) runs while another's GPU work runs, so with a host share h
    of a run about 1 / (1 - h) of them keep the GPU busy (16: programs up to 15/16 host work;
    examples/host_heavy's runs are about 95% host work on an H100: 0.2 s of GPU work, context
    creation included, in a 4.4 s run); a slot without a core of its own only slows the others' host work.
    The cap is also the memory guard: every program waiting for the token keeps its CUDA context
    and its allocations on the GPU, and what a program allocates is unknown before it runs, so
    their number is bounded; a program that runs out of GPU memory beside the others is
    measured again alone (sweep.node.overlap), so the guard costs time, never a result."""
    if not overlap_wanted(space):
        return 1
    return max(1, min(cpus // max(gpus, 1), MAX_OVERLAP_SLOTS))


def overlap_wanted(space: Any) -> bool:
    """The space measures in overlap mode where a job's GPU allows it: the cupti backend, profile.overlap
    on, one GPU per job (each job still checks its lock and GPU: sweep.node.overlap.mode)."""
    profile, slurm = getattr(space, "profile", None), getattr(space, "slurm", None)
    return (getattr(profile, "backend", "") == "cupti" and bool(getattr(profile, "overlap", False))
            and getattr(slurm, "gpus_per_job", 1) == 1)
