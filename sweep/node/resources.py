"""What the compiler says each kernel of a build needs: registers, spills, shared memory.

Every job compiles with nvcc's --resource-usage (render adds it), so ptxas writes
per entry function, into build.log:

    ptxas info    : Compiling entry function '_Z4kernILi64EEvPf' for 'sm_90'
    ptxas info    : Function properties for _Z4kernILi64EEvPf
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 10 registers, used 1 barriers, 256 bytes smem

(the object cache replays these lines on a hit, so a cached build says the same). A
dry run records them per configuration (built.json's build.kernels), so registers
and spills, the occupancy limits, are seen before any GPU time. The kernel names a
build holds (for `init` and `validate`'s glob check) come from the same lines, or
from `nm` of the built programs when the log has none, demangled with c++filt.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterable

from sweep.profile.base import short_name

RESOURCE_FLAG = "--resource-usage"     # nvcc: ptxas -v for every entry function
ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>\w+)'")
PROPS = re.compile(r"Function properties for (?P<name>\S+)")
FRAME = re.compile(r"(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads")
USED = re.compile(r"Used (?P<regs>\d+) registers")
SMEM = re.compile(r"(?P<smem>\d+) bytes smem")
STUB = re.compile(r"^_ZL?(\d+)")


def from_build_log(text: str) -> dict[str, dict[str, Any]]:
    """Mangled kernel name -> {arch, registers, spill_stores, spill_loads, stack, shared} from
    ptxas' lines (the last architecture compiled wins: a sweep builds for one)."""
    out: dict[str, dict[str, Any]] = {}
    current = props = None
    for line in text.splitlines():
        m = ENTRY.search(line)
        if m:
            current = m.group("name")
            out[current] = {"arch": m.group("arch"), "registers": None, "spill_stores": 0, "spill_loads": 0,
                            "stack": 0, "shared": 0}
            continue
        m = PROPS.search(line)
        if m:
            props = m.group("name")
            continue
        m = FRAME.search(line)
        if m and props in out:
            out[props].update(stack=int(m.group("stack")), spill_stores=int(m.group("stores")),
                              spill_loads=int(m.group("loads")))
            continue
        m = USED.search(line)
        if m and current in out:
            s = SMEM.search(line)
            out[current].update(registers=int(m.group("regs")), shared=int(s.group("smem")) if s else 0)
            current = None
    return out


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled -> demangled (c++filt), each name to itself where c++filt is missing or fails."""
    names = list(dict.fromkeys(names))
    tool = shutil.which("c++filt")
    if not names or tool is None:
        return {n: n for n in names}
    try:
        r = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {n: n for n in names}
    lines = r.stdout.splitlines()
    return dict(zip(names, lines)) if r.returncode == 0 and len(lines) == len(names) else {n: n for n in names}


def kernels(text: str) -> list[dict[str, Any]]:
    """The build log's kernels, one row each: name (the short name kernel globs match, as
    sweep.profile.base.short_name gives it), full (demangled), mangled and the resources."""
    used = from_build_log(text)
    full = demangle(used)
    return [{"name": short_name(full[m]), "full": full[m], "mangled": m, **facts} for m, facts in used.items()]


def stub_kernel(symbol: str) -> str | None:
    """The kernel's mangled name from its host launch stub's symbol: `_Z24__device_stub__Z5plainPfPf`
    (a length-prefixed name, `_ZL31...` when static) -> `_Z5plainPf`; None for any other symbol."""
    m = STUB.match(symbol)
    if not m:
        return None
    ident = symbol[m.end():m.end() + int(m.group(1))]
    return "_" + ident[len("__device_stub__"):] if ident.startswith("__device_stub__Z") else None


def program_kernels(programs: Iterable[Path]) -> list[str]:
    """Short names of the kernels the built programs hold, from `nm` (the host launch stubs
    nvcc writes for each __global__ function), for a build whose log has no ptxas lines;
    [] without nm."""
    tool = shutil.which("nm")
    mangled: list[str] = []
    for p in programs:
        if tool is None or not Path(p).is_file():
            continue
        try:
            r = subprocess.run([tool, str(p)], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[-2] in ("T", "t") and (k := stub_kernel(parts[-1])):
                mangled.append(k)
    full = demangle(mangled)
    return sorted(dict.fromkeys(short_name(full[m]) for m in mangled))


def summary(row: dict[str, Any]) -> str:
    """'jacobi_kernel<32, 8, 1>: 32 registers, 0 B spilled, 1224 B shared' for `status`."""
    spilled = (row.get("spill_stores") or 0) + (row.get("spill_loads") or 0)
    full = row.get("full") or row.get("name", "?")
    label = full.split("(")[0].removeprefix("void ").strip()
    return (f"{label}: {row.get('registers')} registers, "
            + (f"{row.get('spill_stores')} B spill stores / {row.get('spill_loads')} B loads" if spilled
               else "no spills")
            + f", {row.get('shared', 0)} B shared")
