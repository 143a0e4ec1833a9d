#!/usr/bin/env python3
"""A CUDA program under the CUPTI injection library, without a GPU: writes a real
capture recorded on an H100 to $SWEEP_CUPTI_OUT (what the library would write),
prints the output the program printed then, and exits with its exit code.

    cupti_program.py CAPTURE [--stderr FILE] [--exit N]
"""
import argparse
import os
import shutil
import sys
from pathlib import Path

H100 = Path(__file__).resolve().parents[1] / "h100"

ap = argparse.ArgumentParser()
ap.add_argument("capture")
ap.add_argument("--stderr", help="a file of real program output to print on stderr")
ap.add_argument("--exit", type=int, default=0)
a, _ = ap.parse_known_args()
source = next(p for p in (H100 / "cupti" / a.capture, H100 / "launch_limits" / a.capture) if p.is_file())
out = os.environ.get("SWEEP_CUPTI_OUT")
if out and "libsweep_cupti" in os.environ.get("CUDA_INJECTION64_PATH", ""):   # the library, not a profiler's
    shutil.copyfile(source, out.replace("%p", str(os.getpid())))
print("tiled_gemm: (a recorded run)")
if a.stderr:
    sys.stderr.write((H100 / a.stderr).read_text())
sys.exit(a.exit)
