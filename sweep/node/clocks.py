"""The GPU's clocks, temperature and power while a program runs, and the node's fingerprint.

    reader()        a Reader of this job's GPU: pynvml when it imports and the driver
                    answers, else nvidia-smi on PATH, else None (no GPU: nothing is read)
    Monitor         polls a Reader in a thread while a program runs, stamping each reading
                    with the wall clock; `peak()` is the highest SM clock seen (and the
                    other readings at that moment), `series()` every reading in time order
    Series          one run's stamped readings: the SM clock of each timed iteration
                    (`iteration_clocks`), and whether the clock fell after it had boosted
    fingerprint()   host, GPU name and UUID, driver, default and maximum SM clock,
                    and the readings at the start: every result row carries it
    throttled()     whether an SM clock is under 75% of the default clock
                    (sweep.stats.drop_throttled, nvbench's rule)

Which GPU: the first entry of CUDA_VISIBLE_DEVICES (an index or a UUID, as the
executors and Slurm set it), else 0. The default clock is the default
applications clock where the GPU reports one, else its maximum SM clock.

A run's clock is its *peak*: the GPU idles at a low clock (345 MHz on an H100)
before a program starts and while it loads, and boosts once its kernels run, so
a run whose SM clock never reached 75% of the default clock ran throttled
throughout. A run throttled during only part of its timed iterations is caught
per iteration where the profile backend says when each iteration ran on the GPU
(sweep.profile.Parsed.windows, on the same wall clock as the readings: cupti and
nsys): an iteration's clock is the lowest reading taken inside it or, for an
iteration shorter than a poll (a poll every 0.05 s through NVML, 0.25 s through
nvidia-smi; iterations are often about 1 ms), the readings next to it (see
`Series.iteration_clocks`). Only readings between the first timed iteration's
start and the last one's end count: before them the GPU may still be idling.
"""

from __future__ import annotations

import bisect
import math
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from sweep.stats import THROTTLE_THRESHOLD, drop_throttled

POLL_S = 0.1
NAN = float("nan")
SMI_READING = ("clocks.sm", "clocks.mem", "temperature.gpu", "power.draw")
SMI_FACTS = ("name", "uuid", "driver_version", "clocks.default_applications.graphics", "clocks.max.sm")


@dataclass(frozen=True, slots=True)
class Reading:
    """One reading: SM and memory clocks (MHz), temperature (C), power draw (W); NaN where unknown."""

    sm_mhz: float = NAN
    mem_mhz: float = NAN
    temperature_c: float = NAN
    power_w: float = NAN

    def to_dict(self) -> dict[str, float | None]:
        return {k: (v if math.isfinite(v) else None) for k, v in asdict(self).items()}


class Reader(Protocol):
    interval_s: float

    def read(self) -> Reading: ...

    def facts(self) -> dict[str, Any]: ...


def _number(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:        # "[N/A]", "[Not Supported]"
        return NAN


def device_id() -> str:
    """This process's GPU as nvidia-smi and NVML name it: CUDA_VISIBLE_DEVICES' first entry, else 0."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return first or "0"


class SmiReader:
    """nvidia-smi --query-gpu, one process per reading (tens of ms)."""

    interval_s = 0.25

    def __init__(self, smi: str, device: str):
        self.smi, self.device = smi, device

    def _query(self, names: tuple[str, ...]) -> list[str]:
        try:
            r = subprocess.run([self.smi, "-i", self.device, f"--query-gpu={','.join(names)}",
                                "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return [""] * len(names)
        line = r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""
        parts = [p.strip() for p in line.split(",")]
        return parts if len(parts) == len(names) else [""] * len(names)

    def read(self) -> Reading:
        return Reading(*(_number(v) for v in self._query(SMI_READING)))

    def facts(self) -> dict[str, Any]:
        name, uuid, driver, default, top = self._query(SMI_FACTS)
        return {"gpu": name, "gpu_uuid": uuid, "driver": driver, "default_sm_mhz": _number(default),
                "max_sm_mhz": _number(top)}


class NvmlReader:
    """pynvml: a reading costs microseconds."""

    interval_s = 0.05

    def __init__(self, nvml: Any, device: str):
        self.nvml = nvml
        self.handle = (nvml.nvmlDeviceGetHandleByUUID(device) if device.startswith(("GPU-", "MIG-"))
                       else nvml.nvmlDeviceGetHandleByIndex(int(device)))

    def _get(self, fn: str, *args: Any) -> float:
        try:
            return float(getattr(self.nvml, fn)(self.handle, *args))
        except Exception:     # NVMLError_NotSupported and friends: unknown
            return NAN

    def read(self) -> Reading:
        n = self.nvml
        return Reading(self._get("nvmlDeviceGetClockInfo", n.NVML_CLOCK_SM),
                       self._get("nvmlDeviceGetClockInfo", n.NVML_CLOCK_MEM),
                       self._get("nvmlDeviceGetTemperature", n.NVML_TEMPERATURE_GPU),
                       self._get("nvmlDeviceGetPowerUsage") / 1000.0)

    def facts(self) -> dict[str, Any]:
        n = self.nvml

        def text(fn: str, *args: Any) -> str:
            try:
                v = getattr(n, fn)(*args)
            except Exception:
                return ""
            return v.decode() if isinstance(v, bytes) else str(v)

        return {"gpu": text("nvmlDeviceGetName", self.handle), "gpu_uuid": text("nvmlDeviceGetUUID", self.handle),
                "driver": text("nvmlSystemGetDriverVersion"),
                "default_sm_mhz": self._get("nvmlDeviceGetDefaultApplicationsClock", n.NVML_CLOCK_GRAPHICS),
                "max_sm_mhz": self._get("nvmlDeviceGetMaxClockInfo", n.NVML_CLOCK_SM)}


def reader() -> Reader | None:
    """The GPU's reader (see the module docstring), or None where no GPU can be read."""
    device = device_id()
    try:
        import pynvml

        pynvml.nvmlInit()
        return NvmlReader(pynvml, device)
    except Exception:        # not installed, no driver, no such device: try nvidia-smi
        pass
    smi = shutil.which("nvidia-smi")
    return SmiReader(smi, device) if smi else None


def fingerprint(r: Reader | None) -> dict[str, Any]:
    """The node and GPU a measurement ran on, with its clocks at the start (JSON-ready, None where unknown)."""
    out: dict[str, Any] = {"host": socket.gethostname()}
    if r is None:
        return out
    facts = r.facts()
    start = r.read().to_dict()
    out.update({k: v for k, v in facts.items() if not isinstance(v, float)})
    for k in ("default_sm_mhz", "max_sm_mhz"):
        out[k] = facts[k] if math.isfinite(facts[k]) else None
    out.update({f"start_{k}": v for k, v in start.items()})
    return out


def default_clock(facts: dict[str, Any]) -> float | None:
    """The SM clock throttling is judged against: the default applications clock, else the maximum (MHz)."""
    for key in ("default_sm_mhz", "max_sm_mhz"):
        v = facts.get(key)
        if isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
            return float(v)
    return None


def throttled(sm_mhz: float, default_mhz: float | None) -> bool:
    """An SM clock (a run's peak, an iteration's) under THROTTLE_THRESHOLD (75%) of the default clock
    (either unknown: not throttled)."""
    if default_mhz is None:
        return False
    return drop_throttled((1.0,), (sm_mhz,), default_mhz).dropped == 1


def threshold(default_mhz: float | None) -> float | None:
    return None if default_mhz is None else THROTTLE_THRESHOLD * default_mhz


@dataclass(frozen=True, slots=True)
class Stamped:
    """A reading and when it was taken: t_ns on the wall clock (time.time_ns(), CLOCK_REALTIME ns),
    half-way through the read (an nvidia-smi read takes tens of ms)."""

    t_ns: int
    reading: Reading


@dataclass(frozen=True, slots=True)
class Series:
    """One run's stamped readings in time order, and the poll interval they were taken at (seconds)."""

    readings: tuple[Stamped, ...] = ()
    interval_s: float = POLL_S

    def fell_after_boost(self, default_mhz: float | None) -> bool:
        """The SM clock dipped under the threshold between two readings at or above it: the GPU
        slowed down while the program's kernels ran. The idle clock before the first kernels
        comes before the boost, and the clock falling once the work is over (the program's
        teardown; nsys writing its report) comes after the last boosted reading, so neither
        alone says so. A clock that falls and stays low until the end is seen once the run is
        parsed (`sampling.judge`), too late to run it again: the record says so."""
        boosted, dipped = False, False
        for s in self.readings:
            if not math.isfinite(s.reading.sm_mhz):
                continue
            low = throttled(s.reading.sm_mhz, default_mhz)
            if not low and dipped:
                return True
            boosted = boosted or not low
            dipped = dipped or (boosted and low)
        return False

    def iteration_clocks(self, windows: Sequence[tuple[int, int]]) -> list[float]:
        """The SM clock (MHz) of each window (start_ns, end_ns on the wall clock; a timed iteration):
        the lowest reading inside it; for a window no reading fell in (shorter than a poll), the
        lower of the nearest reading before its start and the nearest after its end, each only
        within one poll interval of it; NaN where no reading says (kept: unknown is not throttled).

        Only readings from the first window's start to the last one's end count: the GPU
        is busy then, while before the first iteration it may still idle at a low clock
        (345 MHz on an H100) that says nothing of how fast the iterations ran."""
        if not windows:
            return []
        first, last = min(w[0] for w in windows), max(w[1] for w in windows)
        busy = sorted((s.t_ns, s.reading.sm_mhz) for s in self.readings
                      if first <= s.t_ns <= last and math.isfinite(s.reading.sm_mhz))
        times = [t for t, _ in busy]
        reach_ns = self.interval_s * 1e9
        out = []
        for start, end in windows:
            lo, hi = bisect.bisect_left(times, start), bisect.bisect_right(times, end)
            inside = [sm for _, sm in busy[lo:hi]]
            if inside:
                out.append(min(inside))
                continue
            near = []
            if lo > 0 and start - times[lo - 1] <= reach_ns:          # the last reading before it
                near.append(busy[lo - 1][1])
            if hi < len(busy) and times[hi] - end <= reach_ns:        # the first reading after it
                near.append(busy[hi][1])
            out.append(min(near) if near else NAN)
        return out


class Monitor:
    """Polls `reader` every `interval_s` in a thread while the block runs (no reader: records nothing)."""

    def __init__(self, reader: Reader | None, interval_s: float | None = None):
        self.reader = reader
        self.interval_s = interval_s if interval_s is not None else getattr(reader, "interval_s", POLL_S)
        self.readings: list[Stamped] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _read(self) -> None:
        before = time.time_ns()
        reading = self.reader.read()
        self.readings.append(Stamped((before + time.time_ns()) // 2, reading))

    def _poll(self) -> None:
        while True:
            self._read()
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> "Monitor":
        if self.reader is not None:
            self._thread = threading.Thread(target=self._poll, name="clock-monitor", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._read()

    def peak(self) -> Reading:
        """The reading with the highest SM clock (all NaN when nothing was read)."""
        known = [s.reading for s in self.readings if math.isfinite(s.reading.sm_mhz)]
        return max(known, key=lambda r: r.sm_mhz) if known else Reading()

    def series(self) -> Series:
        """Every reading, in time order, with the poll interval."""
        return Series(tuple(sorted(self.readings, key=lambda s: s.t_ns)), self.interval_s)


def sleep(seconds: float) -> None:
    """A pause for a throttled GPU to recover (a seam for tests)."""
    time.sleep(seconds)
