"""What the driver costs on a login node for a large job array.

    python bench/slurm_array.py [--configs 1000] [--poll 10]

A --dry-run sweep of N configurations of the CPU toy target (every job a real
make through the object cache; the swept macro is read by no translation unit,
so each job compiles nothing new and the figures are the framework's) submitted
to Slurm as one job array. Prints the time to plan and render, the time of the
one sbatch call, the scheduler calls made while watching (squeue, scontrol,
sacct), the driver's CPU time and the wall time.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweep import pipeline  # noqa: E402
from sweep.executors import slurm  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", type=int, default=1000)
    ap.add_argument("--poll", type=float, default=10.0)
    ap.add_argument("--partition", default="debug")
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "slurm-array")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    space = {
        "name": f"array{a.configs}",
        "target": {"name": "toy", "dir": str(ROOT / "tests" / "data" / "toy_target"), "verify": ["{build}/toy_check"],
                   "profile": ["{build}/toy_bench", "-n", "{iterations}"]},
        "strategy": "grid",
        "parameters": {"UNUSED_KNOB": {"tag": "U", "values": {"range": [1, a.configs]}, "kernels": ["none"]}},
        "build": {"arch": ["sm_90"], "nvcc_flags": ["-O2"]},
        "slurm": {"partition": a.partition, "cpus_per_job": 1, "time_min": 10, "array_parallelism": 1000},
    }
    path = a.work / "space.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))

    submit_time = []
    real_submit = slurm.submit

    def timed_submit(*args, **kw):
        t = time.monotonic()
        try:
            return real_submit(*args, **kw)
        finally:
            submit_time.append(time.monotonic() - t)

    slurm.submit = timed_submit
    ru0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    s = pipeline.run(path, pipeline.Options(executor="slurm", dry_run=True, jobs_root=a.work / "jobs",
                                            results_root=a.work / "results", poll_s=a.poll))
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    st = slurm.STATS
    print(f"\n{a.configs}-configuration dry run as a Slurm job array (poll every {a.poll:.0f} s)")
    print(f"  jobs built              {s.counts}")
    print(f"  sbatch submissions      {st.submissions} ({', '.join(f'{x:.2f} s' for x in submit_time)} each, incl. pickling)")
    print(f"  squeue calls            {st.squeue_calls}")
    print(f"  scontrol / sacct calls  {st.scontrol_calls} / {st.sacct_calls}")
    print(f"  driver CPU              {cpu:.1f} s (user + system)")
    print(f"  wall time               {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
