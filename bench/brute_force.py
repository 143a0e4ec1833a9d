"""Brute force of an example's space in one process per GPU run: every legal configuration checked
and timed, written as a Kernel Tuner cache that bench/strategies.py replays.

    S=examples/xgemm/space.yaml
    python bench/brute_force.py build --space $S --build /tmp/xgemm-brute --jobs 16      # compile (CPU only)
    python bench/brute_force.py run --space $S --build /tmp/xgemm-brute --log xgemm.jsonl --deadline 500
    python bench/brute_force.py cache --space $S --build /tmp/xgemm-brute --log xgemm.jsonl bench/data/xgemm_H200.json.gz

A sweep builds and runs one program per configuration; that is a CUDA context, a link and a
process start per point, too much for 10,000 of them in a session's GPU time. Here the legal set
(the tool's own constraint evaluation over the space file, sweep.plan.learned.legal_points) is cut
into chunks; each chunk is one translation unit instantiating its configurations' kernels from the
example's template (the kernel a sweep's conf.cuh instantiates), compiled in parallel; one program
(the example's brute_force_main.cu) checks and times them all in one CUDA context. An example
takes part by holding, beside its space file:

- brute_force.cuh: its struct BruteForceBench, then bench/brute_force_harness.cuh (which the build
  finds on its include path), then `template <...> BruteForceResult
  brute_force_one(BruteForceBench&)`, whose template arguments are the space's swept macros in the
  space file's order, on the harness's brute_force_measure (and, to compare outputs with a
  reference on the GPU, brute_force_all_match);
- brute_force_main.cu: main calls the harness's brute_force_main with the bench's setup (inputs,
  reference, the problem's size for the JSON header line); it prints the header (device, driver,
  problem_size or size, count), then one JSON line per configuration from --start to --end.

`run` appends one JSON line per configuration to the log and resumes after the last one logged, so
a run stopped by --deadline or a lost machine goes on where it stopped; a configuration that poisons
the context is logged as failed and the program is started again after it.

In the cache, a configuration's compile_time is the build's compile-seconds over its
configurations (they compile in units of `--chunk`, not one by one), and benchmark_time its own wall time in
the harness (check, warm-up and timed launches): what the configuration cost here, which is less
than a sweep's job (no process start, no link, no profiler).
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import gzip
import json
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_space(space_path: Path):
    """The space file, loaded by the tool itself (from this checkout)."""
    sys.path.insert(0, str(ROOT))
    from sweep.space import target

    return target.load(space_path)


def legal_set(space) -> tuple[list[str], list[dict[str, int]], dict[str, list[int]]]:
    """The (loaded) space's swept macros (brute_force_one's template arguments, in order), its legal
    points (the tool's own enumeration) and each macro's values."""
    from sweep.plan.learned import legal_points

    keys = [p.macro for p in space.swept]
    folder = Path(space.path).parent
    if not (folder / "brute_force.cuh").is_file():
        raise SystemExit(f"{folder}: no brute_force.cuh beside the space file; "
                         "the harness instantiates its brute_force_one template (see bench/brute_force.py)")
    points = legal_points(space)
    if points is None:
        raise SystemExit(f"{space.path}: the legal set is too large to enumerate")
    return keys, points, {p.macro: list(p.values) for p in space.swept}


def kernel_name(space) -> str:
    """The one kernel the (loaded) space's swept macros govern (their `kernels:` lists), for the cache."""
    names = sorted({k for p in space.swept for k in p.kernels})
    if len(names) != 1:
        raise SystemExit(f"{space.path}: its swept macros govern {names or 'no kernel'}; "
                         "the brute force times one kernel, so name exactly one in their kernels: lists")
    return names[0]


def key_of(point: dict[str, int], keys: list[str]) -> str:
    return ",".join(str(point[k]) for k in keys)


def write_sources(build: Path, keys: list[str], points: list[dict[str, int]], chunk: int) -> list[Path]:
    """One translation unit per `chunk` points, and the registry that lists them all in order."""
    build.mkdir(parents=True, exist_ok=True)
    units = []
    for c, first in enumerate(range(0, len(points), chunk)):
        rows = []
        for p in points[first:first + chunk]:
            args = ", ".join(str(p[m]) for m in keys)
            rows.append(f'    e.push_back({{"{key_of(p, keys)}", &brute_force_one<{args}>}});')
        unit = build / f"chunk_{c:04d}.cu"
        unit.write_text('#include "brute_force.cuh"\n\n'
                        f"void brute_force_chunk_{c}(std::vector<BruteForceEntry>& e) {{\n"
                        + "\n".join(rows) + "\n}\n")
        units.append(unit)
    decls = "".join(f"void brute_force_chunk_{c}(std::vector<BruteForceEntry>& e);\n" for c in range(len(units)))
    calls = "".join(f"    brute_force_chunk_{c}(e);\n" for c in range(len(units)))
    (build / "registry.cu").write_text('#include "brute_force.cuh"\n\n' + decls
                                       + "\nvoid brute_force_entries(std::vector<BruteForceEntry>& e) {\n"
                                       + calls + "}\n")
    return units


def nvcc(source: Path, out: Path, arch: str, example: Path) -> float:
    """Compile one unit; its wall seconds. A failure stops the build with nvcc's own words."""
    t0 = time.perf_counter()
    includes = [f"-I{example}", f"-I{example.parent / 'common'}", f"-I{ROOT / 'bench'}"]   # common: the examples' headers
    p = subprocess.run(["nvcc", "-std=c++17", "-O3", f"-arch={arch}", *includes, "-c", str(source), "-o", str(out)],
                       capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"nvcc failed on {source}:\n{p.stderr[-4000:]}")
    return time.perf_counter() - t0


def build(a: argparse.Namespace) -> int:
    keys, points, _ = legal_set(load_space(a.space))
    if a.limit:
        points = points[:a.limit]
    units = write_sources(a.build, keys, points, a.chunk)
    sources = [*units, a.build / "registry.cu", a.space.parent / "brute_force_main.cu"]
    t0 = time.perf_counter()
    with futures.ThreadPoolExecutor(a.jobs) as pool:
        seconds = list(pool.map(lambda s: nvcc(s, a.build / (s.stem + ".o"), a.arch, a.space.parent), sources))
    link = subprocess.run(["nvcc", f"-arch={a.arch}", *[str(a.build / (s.stem + ".o")) for s in sources],
                           "-o", str(a.build / "brute_force")], capture_output=True, text=True)
    if link.returncode:
        raise SystemExit(f"the link failed:\n{link.stderr[-4000:]}")
    compile_s = sum(seconds[:len(units)])
    (a.build / "build.json").write_text(json.dumps({"configurations": len(points), "units": len(units),
                                                    "compile_seconds": round(compile_s), "jobs": a.jobs}))
    print(f"{len(points)} configurations in {len(units)} units: {compile_s:.0f} compile-seconds, "
          f"{time.perf_counter() - t0:.0f} s of wall time at {a.jobs} jobs")
    return 0


def logged(log: Path) -> list[dict]:
    """The lines of a run log, its header and one per configuration (a torn last line, from a killed
    run, is dropped)."""
    rows = []
    if log.exists():
        for line in log.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            rows.append(row)
    return rows


def resume_point(log: Path) -> int:
    """The index of the first configuration the log lacks. A torn last line (a run killed while it
    wrote) is cut off first, so the next line appended does not merge with it and get dropped."""
    if log.exists():
        data = log.read_bytes()
        if data and not data.endswith(b"\n"):
            with log.open("r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)
    return max((r["i"] for r in logged(log) if "i" in r), default=-1) + 1


def run(a: argparse.Namespace) -> int:
    program = a.build / "brute_force"
    size = ["--size", str(a.size)] if a.size else []   # the problem size, where the example's main takes one
    deadline = time.monotonic() + a.deadline if a.deadline else None
    while True:
        start = resume_point(a.log)
        header = subprocess.run([str(program), *size, "--start", "0", "--end", "0"],
                                capture_output=True, text=True)
        if header.returncode or not header.stdout.strip():
            raise SystemExit(f"{program} could not start ({header.returncode}): {header.stderr.strip()[-2000:]}")
        count = json.loads(header.stdout.splitlines()[0])["count"]
        if start >= count:
            print(f"{a.log}: all {count} configurations logged")
            return 0
        with a.log.open("a") as out:
            if start == 0:
                out.write(header.stdout.splitlines()[0] + "\n")
            p = subprocess.Popen([str(program), *size, "--start", str(start)],
                                 stdout=subprocess.PIPE, text=True)
            for line in p.stdout:
                if line.startswith('{"i"'):
                    out.write(line)
                    out.flush()
                if deadline and time.monotonic() > deadline:
                    p.kill()
                    p.wait()
                    print(f"{a.log}: stopped at the deadline; run again to go on")
                    return 0
            rc = p.wait()
        if rc == 3:       # the context was poisoned by the configuration after the last one logged
            with a.log.open("a") as out:
                out.write(json.dumps({"i": resume_point(a.log), "key": None, "failure": "RuntimeFailedConfig",
                                      "detail": "the context was left unusable"}) + "\n")
        elif rc:
            raise SystemExit(f"{program} exited {rc}")


def cache(a: argparse.Namespace) -> int:
    space = load_space(a.space)
    keys, points, values = legal_set(space)
    rows = logged(a.log)
    header = next(r for r in rows if "device" in r)
    built = json.loads((a.build / "build.json").read_text())
    compile_ms = built["compile_seconds"] / built["configurations"] * 1000
    order = [key_of(p, keys) for p in points]
    by_index = {r["i"]: r for r in rows if "i" in r}
    stamp = datetime.fromtimestamp(a.log.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")
    entries = {}
    for i, key in enumerate(order):
        r = by_index.get(i)
        if r is None:
            continue
        if r.get("key") not in (None, key):
            raise SystemExit(f"{a.log}: line {i} is {r['key']}, the space's point {i} is {key}: a log of another build")
        t: float | str = statistics.median(r["times"]) if "times" in r else r["failure"]
        entries[key] = {**dict(zip(keys, map(int, key.split(",")))), "time": t,
                        "times": r.get("times", []), "compile_time": compile_ms,
                        "verification_time": 0, "benchmark_time": r.get("wall_s", 0.0) * 1000,
                        "strategy_time": 0, "framework_time": 0, "timestamp": stamp}
    data = {"device_name": header["device"], "kernel_name": kernel_name(space),
            "problem_size": header.get("problem_size") or [header["size"]] * 3,
            "tune_params_keys": keys, "tune_params": values, "objective": "time",
            # not Kernel Tuner's (it ignores the key): which parameters are flags or enumerations,
            # for bench/strategies.py's learning strategy, as the sweep reads them from the space
            "parameter_kinds": {p.macro: p.kind for p in space.swept}, "cache": entries}
    opener = gzip.open if a.out.suffix == ".gz" else open
    with opener(a.out, "wt") as f:
        json.dump(data, f)
    times = [e["time"] for e in entries.values() if isinstance(e["time"], float)]
    print(f"{a.out}: {len(entries)} of {len(order)} configurations ({len(times)} measured, "
          f"{len(entries) - len(times)} failed); optimum {min(times):.4f} ms on {header['device']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    for name in ("build", "run", "cache"):
        p = sub.add_parser(name)
        p.add_argument("--space", type=Path, required=True,
                       help="the example's space file; brute_force.cuh and brute_force_main.cu lie beside it")
        p.add_argument("--build", type=Path, required=True, help="folder of the generated sources and the program")
        if name == "build":
            p.add_argument("--jobs", type=int, default=16)
            p.add_argument("--chunk", type=int, default=48, help="configurations per translation unit")
            p.add_argument("--arch", default="sm_90")
            p.add_argument("--limit", type=int, default=0, help="the first N legal points only (a trial)")
        if name in ("run", "cache"):
            p.add_argument("--log", type=Path, required=True, help="the run's JSON lines (appended, resumed)")
        if name == "run":
            p.add_argument("--size", type=int, default=0,
                           help="passed to the program as --size (examples/xgemm: M = N = K); 0: its default")
            p.add_argument("--deadline", type=float, default=0, help="stop after this many seconds (0: none)")
        if name == "cache":
            p.add_argument("out", type=Path, help="the cache file to write (.json or .json.gz)")
    a = ap.parse_args(argv)
    return {"build": build, "run": run, "cache": cache}[a.command](a)


if __name__ == "__main__":
    sys.exit(main())
