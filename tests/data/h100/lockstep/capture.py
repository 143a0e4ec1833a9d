#!/usr/bin/env python3
"""Makes the turn-mode captures in this folder, on a machine with a GPU (an H100 here):

    OUT=/some/folder python3 tests/data/h100/lockstep/capture.py

Builds the CUPTI injection library (sweep.profile.cupti.library) and examples/tiled_gemm
at two tile configurations for this GPU, then runs one lockstep round of the two
(sweep.node.lockstep: both started at once under the library in turn mode, 6 turns each of
one timed iteration, a b a b ...) and copies their captures to $OUT as gemm_a_turns.txt
(default tiles) and gemm_b_turns.txt (128x64x8, 8x8), with each turn's window and
per-shape time as the coordinator read them in turns.json.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

from sweep.node.build import detect_arch  # noqa: E402
from sweep.node.lockstep import Lockstep, Program  # noqa: E402
from sweep.profile import cupti  # noqa: E402

out = Path(os.environ["OUT"])
out.mkdir(parents=True, exist_ok=True)
work = Path(tempfile.mkdtemp())
arch = detect_arch()
conf_b = work / "conf_b"
conf_b.mkdir()
(conf_b / "conf.cuh").write_text("#define GEMM_BM 128\n#define GEMM_BN 64\n#define GEMM_BK 8\n"
                                 "#define GEMM_TM 8\n#define GEMM_TN 8\n")
for name, conf in (("a", None), ("b", conf_b)):
    cmd = ["make", "-s", "-C", str(ROOT / "examples" / "tiled_gemm"), f"BUILD_DIR={work / name}", f"ARCH={arch}"]
    subprocess.run(cmd + ([f"CONF_DIR={conf}"] if conf else []), check=True)
lib = cupti.library(work / "cache")
progs = {k: Program(k, (str(work / k / "tiled_gemm"), "--nvtx", "--iters", "20", "--warmup", "1",
                        "--sizes", "256,512,1024"), lib, work / f"run_{k}") for k in ("a", "b")}
with Lockstep(progs, timeout_s=120, turns=6) as ls:
    turns = ls.round(["a", "b"])
    seen = [{"key": t.key, "index": t.index, "window": t.window,
             "ns": {"x".join(map(str, m.grid)): m.iter_total_ns[0] for m in ls.sample([t])}}
            for ts in turns.values() for t in ts]
for k in ("a", "b"):
    (capture,) = (work / f"run_{k}").glob("lockstep_*.txt")
    shutil.copyfile(capture, out / f"gemm_{k}_turns.txt")
(out / "turns.json").write_text(json.dumps(seen, indent=1))
print(json.dumps(seen[:4], indent=1))
shutil.rmtree(work)
