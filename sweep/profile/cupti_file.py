"""Reading the "sweep-cupti/2" files that cupti_inject.cpp writes, record by record.

The format is documented in cupti_inject.cpp's header comment: a header line,
then one tab-separated record per line (`clock`, `name`, `kern`, `call`, `mark`, `api`,
`limits`, `fail`, `drop`, `turn`, `copy`, `tok`, `ctx`, `signal`, `end`). This module turns a file into a `Capture`
(`read_capture`), or follows one as the library writes it (`Follower`, for the race's turns),
and knows nothing of Measurements; sweep/profile/cupti.py does that. Files of the library's
first format, "sweep-cupti/1", read the same: they have no `clock` records, so
their times cannot be placed on the wall clock (`Capture.realtime` is None).

A program killed mid-way leaves a file without the `end` line, possibly with a
torn last line (cut inside a write): that line is dropped and the rest is read.
A damaged line anywhere else is an error, since the file is then not what the
library wrote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from sweep.core.errors import SweepError
from sweep.core.limits import Failure, Limits  # the records of refused launches; sweep.core.limits reads them
from sweep.profile.base import Dim3, short_name
from sweep.profile.ranges import Range

FORMAT = "sweep-cupti/2"                    # what the library writes
FORMATS = ("sweep-cupti/1", FORMAT)         # what this module reads
_ESCAPE = re.compile(r"\\(.)")
_UNESCAPE = {"t": "\t", "n": "\n", "\\": "\\"}


@dataclass(frozen=True, slots=True)
class KernelRecord:
    """One kernel execution. Times are CUPTI ns; start = end = 0 when CUPTI had no timestamps."""

    correlation: int
    start: int
    end: int
    device: int
    context: int
    stream: int
    grid: Dim3
    block: Dim3
    registers: int              # per thread
    static_shared: int          # bytes per block
    dynamic_shared: int         # bytes per block
    local_per_thread: int       # bytes
    mangled: str
    kernel_full: str            # demangled
    kernel: str                 # short name, as the other backends report it


@dataclass(frozen=True, slots=True)
class Call:
    """One traced launch call (CPU side): `domain` R (runtime API) or D (driver API)."""

    domain: str
    cbid: int
    correlation: int
    start: int
    end: int
    pid: int
    tid: int


@dataclass(frozen=True, slots=True)
class Mark:
    """One NVTX marker record: kind S (range start, named), E (range end) or I (instant)."""

    kind: str
    id: int
    ns: int
    pid: int
    tid: int
    domain: str
    name: str


@dataclass(frozen=True, slots=True)
class ClockPair:
    """CUPTI's clock and the wall clock (CLOCK_REALTIME), both ns, read by the library at one moment."""

    cupti_ns: int
    realtime_ns: int


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """Turn mode: the program's timed iteration `index` ran on the GPU between go_ns (the turn
    given) and done_ns (its work finished), CUPTI ns."""

    index: int
    go_ns: int
    done_ns: int


@dataclass(frozen=True, slots=True)
class CopyRecord:
    """A memcpy (kind "M") or memset ("S") on the GPU timeline, CUPTI ns."""

    kind: str
    correlation: int
    start: int
    end: int
    device: int
    context: int
    stream: int
    bytes: int


@dataclass(frozen=True, slots=True)
class TokenWindow:
    """Overlap mode: a window the process held its GPU's token (sweep/profile/cupti_token.h), CUPTI ns."""

    acquired: int
    released: int
    requested: int | None = None       # when it was asked for (libraries before the wait was recorded: None)


@dataclass(frozen=True, slots=True)
class ContextRecord:
    """A context created (cuCtxCreate*, cuDevicePrimaryCtxRetain): its call's entry and exit, CUPTI ns,
    and when the call asked for the node's context gate (None from a library before the field)."""

    start: int
    end: int
    requested: int | None = None


@dataclass(frozen=True, slots=True)
class Capture:
    path: Path
    header: Mapping[str, str]
    kernels: tuple[KernelRecord, ...]
    calls: Mapping[int, Call]   # by correlation id; a runtime call wins over a driver call
    marks: tuple[Mark, ...]
    apis: Mapping[tuple[str, int], str] = field(default_factory=dict)  # (domain, cbid) -> function name
    failures: tuple[Failure, ...] = ()
    limits: Limits | None = None
    complete: bool = False      # the file ends its records with an `end` line
    signal: int | None = None
    dropped: int = 0
    torn: bool = False          # the last line was cut short and ignored
    clock_pairs: tuple[ClockPair, ...] = ()    # at the start, and at the final flush when it ran
    turns: tuple[TurnRecord, ...] = ()         # turn mode only
    copies: tuple[CopyRecord, ...] = ()        # memcpy and memset records (libraries from overlap mode on)
    tokens: tuple[TokenWindow, ...] = ()       # overlap mode only
    contexts: tuple[ContextRecord, ...] = ()   # context creations (libraries from overlap mode on)

    def realtime(self) -> Callable[[int], int] | None:
        """CUPTI ns -> wall-clock ns (CLOCK_REALTIME): the first pair's offset, and with a second
        pair (the final flush) the line through both, which follows any drift between the two
        clocks over the run. None without pairs (a sweep-cupti/1 file)."""
        return to_realtime(self.clock_pairs)

    @property
    def pid(self) -> int | None:
        value = self.header.get("pid", "")
        return int(value) if value.isdigit() else None

    def ranges(self, name: str) -> tuple[list[Range], int]:
        """Closed NVTX ranges called `name` (any domain), and how many were never closed.

        A range end is matched to its start by marker id; an end whose id opened
        nothing closes the innermost range still open on its thread.
        """
        open_: dict[int, Mark] = {}
        stacks: dict[int, list[int]] = {}
        closed: list[tuple[Mark, int]] = []
        for m in sorted(self.marks, key=lambda m: m.ns):
            if m.kind == "S":
                open_[m.id] = m
                stacks.setdefault(m.tid, []).append(m.id)
            elif m.kind == "E":
                stack = stacks.get(m.tid, [])
                start_id = m.id if m.id in open_ else next((i for i in reversed(stack) if i in open_), None)
                if start_id is None:
                    continue
                start = open_.pop(start_id)
                stacks[start.tid] = [i for i in stacks.get(start.tid, []) if i != start_id]
                closed.append((start, m.ns))
        ranges = [Range(s.ns, end, s.tid) for s, end in closed if s.name == name]
        return ranges, sum(1 for s in open_.values() if s.name == name)


def to_realtime(pairs: tuple[ClockPair, ...] | list[ClockPair]) -> Callable[[int], int] | None:
    """CUPTI ns -> wall-clock ns through the clock pairs (see Capture.realtime); None without any."""
    if not pairs:
        return None
    a, b = pairs[0], pairs[-1]
    if b.cupti_ns == a.cupti_ns:
        return lambda t: t + a.realtime_ns - a.cupti_ns
    rate = (b.realtime_ns - a.realtime_ns) / (b.cupti_ns - a.cupti_ns)
    return lambda t: a.realtime_ns + round((t - a.cupti_ns) * rate)


def read_capture(path: Path) -> Capture:
    """Parse a capture file; SweepError when it is missing, empty or in none of FORMATS."""
    path = Path(path)
    if not path.is_file():
        raise SweepError(f"{path} does not exist: the program never initialised CUDA, or ran without the injection "
                         f"library (CUDA_INJECTION64_PATH) or without SWEEP_CUPTI_OUT pointing here")
    text = path.read_bytes().decode("utf-8", errors="replace")
    if not text:
        raise SweepError(f"{path} is empty: the injection library opened it but wrote nothing (killed at start-up?); "
                         f"re-run the program and check its log")
    lines = text.split("\n")
    torn = lines[-1] != ""     # a file the library finished writing ends with a newline
    lines = lines[:-1]
    if not lines or not lines[0].startswith("sweep-cupti/"):
        raise SweepError(f"{path} is not a capture of the CUPTI injection library (it does not start with "
                         f"{FORMAT!r}); pass the file named by SWEEP_CUPTI_OUT")
    version = lines[0].split("\t", 1)[0]
    if version not in FORMATS:
        raise SweepError(f"{path} is in format {version!r}; this version of the sweep reads {' and '.join(FORMATS)}: "
                         f"rebuild the library with sweep.profile.cupti.library() and capture again")
    header = dict(f.split("=", 1) for f in lines[0].split("\t")[1:] if "=" in f)
    reader = _Reader(path)
    last = len(lines) - 1
    for n, line in enumerate(lines[1:], 2):
        try:
            reader.record(line.split("\t"))
        except (ValueError, IndexError, KeyError):
            if n - 1 == last and not reader.complete:
                torn = True    # cut by a crash inside the write
                continue
            raise SweepError(f"{path} line {n}: not a valid {line.split(chr(9), 1)[0]!r} record ({line[:120]!r}); "
                             f"the file was changed or damaged: capture again") from None
    return Capture(path=path, header=header, kernels=tuple(reader.kernels), calls=reader.calls,
                   marks=tuple(reader.marks), apis=reader.apis, failures=tuple(reader.failures), limits=reader.limits,
                   complete=reader.complete, signal=reader.signal,
                   dropped=reader.dropped, torn=torn, clock_pairs=tuple(reader.clock_pairs),
                   turns=tuple(reader.turns), copies=tuple(reader.copies), tokens=tuple(reader.tokens),
                   contexts=tuple(reader.contexts))


class Follower:
    """A capture file read as the library writes it: each `poll()` reads the whole lines appended
    since the last one (a line still being written waits for the next poll). The records so far
    are in `records` (kernels, turns, clock pairs, ... as `read_capture` reads them)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.records = _Reader(self.path)
        self._offset = 0
        self._line = 0      # lines read so far (the header is line 1)
        self._header = False

    def poll(self) -> None:
        """Read what was appended; SweepError on a line the library would not write."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            return
        self._offset += end + 1
        for line in data[:end].decode("utf-8", errors="replace").split("\n"):
            self._line += 1
            if not self._header:
                if line.split("\t", 1)[0] not in FORMATS:
                    raise SweepError(f"{self.path} is not a capture of the CUPTI injection library in "
                                     f"{' or '.join(FORMATS)} (line 1: {line[:80]!r})")
                self._header = True
                continue
            try:
                self.records.record(line.split("\t"))
            except (ValueError, IndexError, KeyError):
                raise SweepError(f"{self.path} line {self._line}: not a valid {line.split(chr(9), 1)[0]!r} "
                                 f"record ({line[:120]!r}); the file was changed or damaged") from None


class _Reader:
    def __init__(self, path: Path):
        self.path = path
        self.names: dict[int, tuple[str, str]] = {}
        self.kernels: list[KernelRecord] = []
        self.calls: dict[int, Call] = {}
        self.marks: list[Mark] = []
        self.apis: dict[tuple[str, int], str] = {}
        self.failures: list[Failure] = []
        self.limits: Limits | None = None
        self.complete = False
        self.signal: int | None = None
        self.dropped = 0
        self.clock_pairs: list[ClockPair] = []
        self.turns: list[TurnRecord] = []
        self.copies: list[CopyRecord] = []
        self.tokens: list[TokenWindow] = []
        self.contexts: list[ContextRecord] = []

    def record(self, f: list[str]) -> None:
        tag = f[0]
        if tag == "kern":
            v = [int(x) for x in f[1:17]]
            mangled, full = self.names[int(f[17])]
            self.kernels.append(KernelRecord(
                correlation=v[0], start=v[1], end=v[2], device=v[3], context=v[4], stream=v[5],
                grid=(v[6], v[7], v[8]), block=(v[9], v[10], v[11]), registers=v[12], static_shared=v[13],
                dynamic_shared=v[14], local_per_thread=v[15], mangled=mangled, kernel_full=full,
                kernel=short_name(full)))
        elif tag == "name":
            self.names[int(f[1])] = (_unescape(f[2]), _unescape(f[3]))
        elif tag == "call":
            call = Call(_domain(f[1]), *(int(x) for x in f[2:8]))
            old = self.calls.get(call.correlation)
            # The runtime call wins over a driver call it made; within one API, the outermost (earliest).
            if old is None or (call.domain != "R", call.start) < (old.domain != "R", old.start):
                self.calls[call.correlation] = call
        elif tag == "mark":
            if f[1] not in ("S", "E", "I"):
                raise ValueError(f[1])
            self.marks.append(Mark(f[1], int(f[2]), int(f[3]), int(f[4]), int(f[5]), _unescape(f[6]),
                                   _unescape(f[7])))
        elif tag == "api":
            self.apis[(_domain(f[1]), int(f[2]))] = _unescape(f[3])
        elif tag == "fail":
            v = [int(x) for x in f[2:12]]
            full = _unescape(f[13])
            self.failures.append(Failure(_domain(f[1]), v[0], v[1], v[2], (v[3], v[4], v[5]), (v[6], v[7], v[8]),
                                         v[9], _unescape(f[12]), full, short_name(full)))
        elif tag == "limits":
            kv = dict(x.split("=", 1) for x in f[2:])
            block, grid = (tuple(int(x) for x in kv[k].split(",")) for k in ("block", "grid"))
            if len(block) != 3 or len(grid) != 3:
                raise ValueError(f)
            self.limits = Limits(int(f[1]), int(kv["threads"]), block, grid, int(kv["regs"]), int(kv["smem"]),
                                 int(kv["smem_optin"]))
        elif tag == "drop":
            self.dropped += int(f[1])
        elif tag == "signal":
            self.signal = int(f[1])
        elif tag == "clock":
            self.clock_pairs.append(ClockPair(int(f[1]), int(f[2])))
        elif tag == "turn":
            self.turns.append(TurnRecord(int(f[1]), int(f[2]), int(f[3])))
        elif tag == "copy":
            if f[1] not in ("M", "S"):
                raise ValueError(f[1])
            self.copies.append(CopyRecord(f[1], *(int(x) for x in f[2:9])))
        elif tag == "tok":
            self.tokens.append(TokenWindow(int(f[1]), int(f[2]), int(f[3]) if len(f) > 3 else None))
        elif tag == "ctx":
            self.contexts.append(ContextRecord(int(f[1]), int(f[2]), int(f[3]) if len(f) > 3 else None))
        elif tag == "end":
            self.complete = True
        # other tags: records a later library of this format may add; skipped


def _domain(value: str) -> str:
    if value not in ("R", "D"):
        raise ValueError(value)
    return value


def _unescape(value: str) -> str:
    return _ESCAPE.sub(lambda m: _UNESCAPE.get(m.group(1), m.group(1)), value)
