#!/usr/bin/env python3
"""Writes engine-timing/1 JSON like tests/data/toy_target's toy_bench, without a GPU or a
compiler: k_a (ALPHA_BLOCK, fastest at 128) and k_b (BETA, fastest at 4), from conf.cuh."""
import json
import os
import re
import sys
import time
from pathlib import Path

here = Path(__file__).resolve().parent
macros = {m: int(v) for m, v in re.findall(r"#define\s+(\w+)\s+(-?\d+)", (here / "conf.cuh").read_text())}
alpha, beta = macros.get("ALPHA_BLOCK", 256), macros.get("BETA", 1)
n = int(sys.argv[sys.argv.index("-n") + 1]) if "-n" in sys.argv else 5
out = sys.argv[sys.argv.index("--json") + 1]
# Executor tests: PY_BENCH_SLEEP_MS (or PY_BENCH_SLEEP_MS_GPU<n>, for the GPU CUDA_VISIBLE_DEVICES
# names) makes a run take that long; the "device" is the CUDA_VISIBLE_DEVICES it saw.
gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "0")
time.sleep(int(os.environ.get(f"PY_BENCH_SLEEP_MS_GPU{gpu}", os.environ.get("PY_BENCH_SLEEP_MS", "0"))) / 1000)


# PY_BENCH_SLOWER_IN=<job folder>:<factor> makes that job's kernels the factor slower: kernels that
# interact in one job ("best", every pick at once) as they did not in the sweep's own jobs.
folder, _, factor = os.environ.get("PY_BENCH_SLOWER_IN", "").partition(":")
slower = float(factor) if folder and here.parent.name == folder else 1.0


def kernel(name, block, best, ns):
    t = slower * ns * (1 + abs(block.bit_length() - best.bit_length()) * 0.3)
    times = [t * (1 + 0.001 * (i % 3)) for i in range(n)]
    s = sorted(times)
    return {"kernel": name, "grid": [64, 1, 1], "block": [block, 1, 1], "calls": 1, "median_ns": s[n // 2],
            "min_ns": s[0], "max_ns": s[-1], "mean_ns": sum(s) / n, "std_ns": 0.0, "iter_total_ns": times}


Path(out).write_text(json.dumps({
    "schema": "engine-timing/1", "program": "bench",
    "device": {"name": "toy", "uuid": f"toy-GPU-{gpu}", "compute_capability": "0.0", "multiprocessors": 0,
               "cuda_driver": 0, "cuda_runtime": 0},
    "forward_ms": {"median_ms": 0.01, "min_ms": 0, "max_ms": 0, "mean_ms": 0, "std_ms": 0},
    "kernels": [kernel("k_a", alpha, 128, 1000.0), kernel("k_b", beta, 4, 500.0)]}))
