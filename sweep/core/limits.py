"""Resource limits: a configuration that asks for more than the compiler or the GPU
allows is invalid (recorded as skipped, like a failed static_assert), not broken.

At build time, ptxas and nvlink refuse a kernel that needs more than a block or
a program may have; the messages (real ones in tests/data/resource_limits/) are

    ptxas error   : Entry function '_Z8big_smemPf' uses too much shared data (0x18000 bytes, 0xc000 max)
    ptxas error   : File uses too much global constant data (0x13880 bytes, 0x10000 max)
    nvlink error   : entry function '_Z3k11PfPKf' with max regcount of 64 calls function '_Z1gPKf' with regcount of 140

At run time the CUDA runtime refuses the launch, and the program prints the
error its own way; the runtime's text is what is recognised. On the H100 with
CUDA 13.0 (real messages in tests/data/h100/launch_limits/):

    too many resources requested for launch   cudaErrorLaunchOutOfResources (701): the block needs more
                                              registers than the SM has for it
    invalid argument                          cudaErrorInvalidValue (1): more threads than 1024 or than
                                              the kernel's __launch_bounds__, a block or grid side over
                                              its limit, more dynamic shared memory than allowed
    invalid configuration argument            cudaErrorInvalidConfiguration (9): what older CUDA said
                                              for the sizes above

"invalid argument" is what any CUDA call says of a bad argument, so it counts
as a refused launch only when a launch is known to have failed with it. The
message alone names no numbers. The CUPTI injection library records each
refused launch (its grid, block, dynamic shared memory and error; CUPTI also
reports the kernel, with its registers per thread, as a kernel record without
times) and the device's limits (sweep/profile/cupti_file.py: Failure, Limits);
with those, and the launch bounds read from the program file by cuobjdump
where it is installed (`kernel_facts`), the reason names the resource, the
amount and the limit. Without them it names what it can.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence


_NUMBER = r"0x[0-9a-fA-F]+|\d+"
BUILD_PATTERNS = (
    # ptxas: "Entry function 'X' uses too much shared data (0x18000 bytes, 0xc000 max)",
    #        "File uses too much global constant data (0x13880 bytes, 0x10000 max)"
    re.compile(rf"(?:[Ee]ntry function '(?P<where>[^']+)'|(?P<file>File)) uses too (?:much|many) "
               rf"(?P<what>[\w ]+?)\s+data \((?P<amount>{_NUMBER}) bytes, (?P<limit>{_NUMBER}) max\)"),
    # ptxas or nvlink: a kernel whose launch bounds cap its registers calls a function that needs more
    re.compile(r"[Ee]ntry function '(?P<where>[^']+)' with max regcount of (?P<limit>\d+) calls function "
               r"'(?P<callee>[^']+)' with regcount of (?P<amount>\d+)"),
)
RESOURCE_NAMES = {"shared": "shared memory per block", "global constant": "constant memory",
                  "constant": "constant memory", "local": "local memory per thread", "param": "kernel parameters"}
RUNTIME_PATTERN = re.compile(r"too many resources requested for launch|invalid configuration argument|"
                             r"cudaErrorLaunchOutOfResources|cudaErrorInvalidConfiguration", re.I)
ANY_CALL_PATTERN = re.compile(r"\binvalid argument\b|cudaErrorInvalidValue", re.I)   # a launch's, or any call's
INVALID_VALUE, INVALID_CONFIGURATION, OUT_OF_RESOURCES = 1, 9, 701
SIZE_ERRORS = (INVALID_VALUE, INVALID_CONFIGURATION, OUT_OF_RESOURCES)
Dim3 = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Failure:
    """A launch the runtime refused (a capture's `fail` record, sweep/profile/cupti_file.py):
    its size and the cudaError_t it returned."""

    domain: str
    cbid: int
    correlation: int
    error: int                  # cudaError_t: 9 invalid configuration, 701 too many resources, ...
    grid: Dim3
    block: Dim3
    dynamic_shared: int         # bytes per block asked for at launch
    mangled: str
    kernel_full: str
    kernel: str

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(frozen=True, slots=True)
class Limits:
    """The device's per-block limits (a capture's `limits` record); -1 where the driver did not say."""

    device: int
    threads: int
    block: Dim3
    grid: Dim3
    registers: int
    shared: int                 # bytes a block may use without opting in
    shared_optin: int           # bytes a block may use after cudaFuncSetAttribute


@dataclass(frozen=True, slots=True)
class Overflow:
    """What a configuration asked for beyond a limit; amount and limit in `unit` (None: unknown)."""

    resource: str               # e.g. "shared memory per block", "registers per block", "threads per block"
    amount: int | None
    limit: int | None
    unit: str = ""              # "bytes", "registers", "threads", ""
    where: str = ""             # the kernel (or file) it concerns
    detail: str = ""            # how the amount is made up, or what could not be told
    message: str = ""           # the tool's or the program's own line

    def reason(self) -> str:
        """One line for the result: 'resource limit: shared memory per block 98304 bytes > 49152 bytes (k): ...'."""
        unit = f" {self.unit}" if self.unit else ""
        amount = f" {self.amount}{unit}" if self.amount is not None else ""
        limit = f" > {self.limit}{unit}" if self.limit is not None else ""
        extra = "; ".join(x for x in (self.where, self.detail) if x)
        text = f"resource limit: {self.resource}{amount}{limit}" + (f" ({extra})" if extra else "")
        return f"{text}: {self.message}" if self.message else text


def from_build_log(text: str) -> Overflow | None:
    """The first compile-time resource overflow in a build log, or None."""
    for line in text.splitlines():
        for pattern in BUILD_PATTERNS:
            m = pattern.search(line)
            if not m:
                continue
            d = m.groupdict()
            if d.get("callee"):
                return Overflow("registers per thread", int(d["amount"]), int(d["limit"]), "registers",
                                demangle(d["where"]), f"it calls {demangle(d['callee'])}, compiled for "
                                f"{d['amount']} registers, where its launch bounds allow {d['limit']}", line.strip())
            what = d["what"].strip()
            return Overflow(RESOURCE_NAMES.get(what, f"{what} data"), int(d["amount"], 0), int(d["limit"], 0),
                            "bytes", "the whole file" if d.get("file") else demangle(d["where"]),
                            message=line.strip())
    return None


@dataclass(frozen=True, slots=True)
class KernelFacts:
    """A kernel's static resources, from the program file (cuobjdump)."""

    registers: int | None = None            # per thread
    static_shared: int | None = None        # bytes per block
    max_threads: int | None = None          # __launch_bounds__ (threads per block), when it has them


def may_be_refused_launch(text: str) -> bool:
    """The run's output holds an error a refused launch gives (then a capture can tell)."""
    return bool(RUNTIME_PATTERN.search(text) or ANY_CALL_PATTERN.search(text))


def from_run(text: str, failures: Sequence[Failure] = (), limits: Limits | None = None,
             facts: Mapping[str, KernelFacts] | None = None) -> Overflow | None:
    """The launch a run's output says the runtime refused for its size, or None.

    `failures` and `limits` come from a CUPTI capture of the run; `facts` (by
    mangled name) from `kernel_facts` and `with_registers`. The first refused
    launch is the one named; "invalid argument" needs one to count.
    """
    fail = next((f for f in failures if f.error in SIZE_ERRORS), None)
    lines = [l.strip() for l in text.splitlines()]
    line = next((l for l in lines if RUNTIME_PATTERN.search(l)), None)
    if line is None and fail is not None:
        line = next((l for l in lines if ANY_CALL_PATTERN.search(l)), None)
    if line is None:
        return None
    line = line[:300]
    if fail is None:
        return Overflow("launch size", None, None, where="which launch and by how much is known under the cupti "
                        "backend, which records refused launches", message=line)
    info = (facts or {}).get(fail.mangled, KernelFacts())
    where = f"{fail.kernel_full}, grid {_dims(fail.grid)}, block {_dims(fail.block)}"
    over = _size_over(fail, limits) or _resources_over(fail, limits, info)
    if over is not None:
        resource, amount, limit, unit, detail = over
        return Overflow(resource, amount, limit, unit, where, detail, line)
    unknown = ("registers per thread unknown: cuobjdump not found" if info.registers is None else
               f"{info.registers} registers per thread x {fail.threads} threads fit")
    return Overflow("threads per block", fail.threads, None, "threads", where,
                    f"{unknown}; the kernel's __launch_bounds__ may allow fewer", line)


def _size_over(fail: Failure, limits: Limits | None) -> tuple | None:
    """A block or grid size, or dynamic shared memory, over the device's limits."""
    maxima = limits or Limits(-1, 1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535), -1, -1, -1)
    if maxima.threads > 0 and fail.threads > maxima.threads:
        return "threads per block", fail.threads, maxima.threads, "threads", ""
    for name, sizes, most in (("block", fail.block, maxima.block), ("grid", fail.grid, maxima.grid)):
        for axis, size, limit in zip("xyz", sizes, most):
            if limit > 0 and size > limit:
                return f"{name}.{axis}", size, limit, "", ""
            if size < 1:
                return f"{name}.{axis}", size, None, "", "a launch size must be at least 1"
    if maxima.shared_optin > 0 and fail.dynamic_shared > maxima.shared_optin:
        return "dynamic shared memory per block", fail.dynamic_shared, maxima.shared_optin, "bytes", ""
    return None


def _resources_over(fail: Failure, limits: Limits | None, info: KernelFacts) -> tuple | None:
    """Launch bounds, registers or shared memory of the kernel over what this block may have."""
    if info.max_threads and fail.threads > info.max_threads:
        return "threads per block", fail.threads, info.max_threads, "threads", "the kernel's __launch_bounds__"
    if info.registers and limits is not None and limits.registers > 0 and info.registers * fail.threads > limits.registers:
        return ("registers per block", info.registers * fail.threads, limits.registers, "registers",
                f"{fail.threads} threads x {info.registers} registers per thread")
    shared = (info.static_shared or 0) + fail.dynamic_shared
    if limits is not None and limits.shared_optin > 0 and shared > limits.shared_optin:
        return "shared memory per block", shared, limits.shared_optin, "bytes", "static + dynamic"
    if limits is not None and limits.shared > 0 and fail.dynamic_shared > limits.shared:
        return ("dynamic shared memory per block", fail.dynamic_shared, limits.shared, "bytes",
                "over 48 KB needs cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize)")
    return None


def _dims(d: tuple[int, int, int]) -> str:
    return "x".join(map(str, d))


# ---------------------------------------------------------------------------
# Static facts from the program file
# ---------------------------------------------------------------------------

_RESOURCE_LINE = re.compile(r"Function (?P<name>\S+?):\s*(?P<fields>.*)$")
_FIELD = re.compile(r"(?P<key>[A-Z]+(?:\[\d+\])?):(?P<value>\d+)")


def parse_resource_usage(text: str) -> dict[str, KernelFacts]:
    """`cuobjdump --dump-resource-usage` output -> KernelFacts by mangled name (the
    last architecture listed wins; a sweep builds for one). CUDA 13.0 writes
    " Function NAME:" and its fields ("REG:128 STACK:0 SHARED:1024 ...") on the
    next line; SHARED includes the 1 KB a block of sm_90 reserves."""
    out: dict[str, KernelFacts] = {}
    name = None
    for line in text.splitlines():
        m = _RESOURCE_LINE.search(line.strip())
        if m:
            name = m.group("name")
        fields = {f.group("key"): int(f.group("value")) for f in _FIELD.finditer(m.group("fields") if m else line)}
        if name and "REG" in fields:
            out[name] = KernelFacts(fields["REG"], fields.get("SHARED"))
            name = None
    return out


def with_registers(facts: Mapping[str, KernelFacts], kernels: Sequence) -> dict[str, KernelFacts]:
    """`facts` with the registers per thread of captured kernel records (objects with
    .mangled and .registers: CUPTI reports a refused kernel too, with no times)."""
    out = dict(facts)
    for k in kernels:
        if k.mangled and k.registers:
            old = out.get(k.mangled, KernelFacts())
            out[k.mangled] = KernelFacts(k.registers, old.static_shared, old.max_threads)
    return out


def parse_launch_bounds(text: str) -> dict[str, int]:
    """Threads per block from `cuobjdump -elf`'s .nv.info.<kernel> EIATTR_MAX_THREADS entries."""
    out: dict[str, int] = {}
    section = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        s = re.search(r"\.nv\.info(?:\.(\S+))?\s*$", line)
        if s:
            section = s.group(1)      # None for the program's own .nv.info
        elif section and "EIATTR_MAX_THREADS" in line:
            values = re.findall(r"0x[0-9a-fA-F]+", " ".join(lines[i:i + 3]).split("EIATTR_MAX_THREADS", 1)[1])
            sizes = [int(v, 16) for v in values[-3:]] if len(values) >= 3 else []
            if sizes:
                out[section] = sizes[0] * sizes[1] * sizes[2]
    return out


def kernel_facts(program: Path) -> dict[str, KernelFacts]:
    """Registers, static shared memory and launch bounds of the program's kernels, by
    mangled name; {} without cuobjdump (it comes with the CUDA toolkit)."""
    tool = shutil.which("cuobjdump")
    if tool is None or not Path(program).is_file():
        return {}
    try:
        usage = subprocess.run([tool, "--dump-resource-usage", str(program)], capture_output=True, text=True,
                               timeout=60).stdout
        elf = subprocess.run([tool, "-elf", str(program)], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    facts = parse_resource_usage(usage)
    for name, threads in parse_launch_bounds(elf).items():
        old = facts.get(name, KernelFacts())
        facts[name] = KernelFacts(old.registers, old.static_shared, threads)
    return facts


def demangle(name: str) -> str:
    """A C++ name as written (c++filt, where installed); the name as it is otherwise."""
    tool = shutil.which("c++filt")
    if tool is None or not name.startswith("_Z"):
        return name
    try:
        r = subprocess.run([tool, name], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return name
    return r.stdout.strip() or name
