"""What the driver costs on a login node for a plan larger than one job array.

    python bench/slurm_array.py [--configs 2500] [--poll 10] [--target noop|toy] [--parallel 1000]

A --dry-run sweep of N configurations submitted to Slurm: the driver reads the
cluster's limits (MaxArraySize, the submit limit), splits the plan into arrays that
fit, submits the next as tasks leave the queue and watches them all with one squeue
per interval. Targets: `noop` (a Makefile that builds nothing: every task is the
framework's own start-up, so the figures are the driver's and Slurm's), or `toy`
(the CPU toy target, a real make through the object cache; the swept macro is read
by no translation unit, so no task compiles anything new).

Prints the cluster's limits, the time to plan and render, the arrays submitted
(sbatch calls, each timed), the scheduler calls made while watching (squeue,
scontrol, scancel, sacct), the driver's CPU time and its share of the wall time.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweep.pipeline import driver as pipeline  # noqa: E402
from sweep.dispatch import slurm  # noqa: E402
from sweep.dispatch.slurm_limits import read_limits  # noqa: E402


def target(kind: str, work: Path) -> dict:
    if kind == "toy":
        return {"name": "toy", "dir": str(ROOT / "tests" / "data" / "toy_target"), "verify": ["{build}/toy_check"],
                "profile": ["{build}/toy_bench", "-n", "{iterations}"]}
    noop = work / "noop_target"
    noop.mkdir(parents=True, exist_ok=True)
    (noop / "Makefile").write_text("# builds nothing: the bench measures the framework, not a compiler\nall:\n\t@:\n")
    return {"name": "noop", "dir": str(noop), "verify": [], "profile": ["true"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", type=int, default=2500)
    ap.add_argument("--poll", type=float, default=10.0, help="seconds between squeue calls")
    ap.add_argument("--partition", default="debug")
    ap.add_argument("--parallel", type=int, default=1000, help="slurm.array_parallelism")
    ap.add_argument("--max-submit", type=int, default=0, help="slurm.max_submit (0: the cluster's limits only)")
    ap.add_argument("--target", choices=("noop", "toy"), default="noop")
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "slurm-array")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    space = {
        "name": f"array{a.configs}",
        "target": target(a.target, a.work),
        "strategy": "grid",
        "parameters": {"UNUSED_KNOB": {"tag": "U", "values": {"range": [1, a.configs]}, "kernels": ["none"]}},
        "build": {"arch": ["sm_90"], "nvcc_flags": ["-O2"]},
        "slurm": {"partition": a.partition, "cpus_per_job": 1, "gpus_per_job": 0, "time_min": 10,
                  "array_parallelism": a.parallel, "max_submit": a.max_submit},
    }
    shutil.rmtree(a.work / "jobs" / space["name"], ignore_errors=True)  # this bench's own earlier run
    path = a.work / "space.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))

    submit_time: list[float] = []
    first_submit: list[float] = []
    real_submit = slurm.submit

    def timed_submit(*args, **kw):
        t = time.monotonic()
        first_submit[:] = first_submit or [t - t0]
        try:
            return real_submit(*args, **kw)
        finally:
            submit_time.append(time.monotonic() - t)

    slurm.submit = timed_submit
    import getpass

    from sweep.space import target as target_mod

    limits = read_limits(target_mod.load(path).slurm, getpass.getuser())
    before = {k: getattr(slurm.STATS, k) for k in vars(slurm.STATS)}
    ru0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    s = pipeline.run(path, pipeline.Options(executor="slurm", dry_run=True, jobs_root=a.work / "jobs",
                                            results_root=a.work / "results", poll_s=a.poll))
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    st = {k: getattr(slurm.STATS, k) - before[k] for k in before}
    ours = json.loads((a.work / "jobs" / space["name"] / "_dispatch" / "slurm.json").read_text())
    print(f"\n{a.configs}-configuration dry run ({a.target} target) as Slurm job arrays (poll every {a.poll:.0f} s)")
    print(f"  cluster limits          {limits.describe()}")
    print(f"  jobs built              {s.counts}")
    print(f"  plan and render         {first_submit[0]:.1f} s before the first sbatch")
    print(f"  arrays submitted        {len(ours)}: {', '.join(str(len(r['tags'])) for r in ours)} tasks")
    print(f"  sbatch calls            {st['submissions']} ({', '.join(f'{x:.2f} s' for x in submit_time)}, incl. pickling)")
    print(f"  squeue calls            {st['squeue_calls']} (one per poll for every array)")
    print(f"  scontrol / scancel / sacct calls  {st['scontrol_calls']} / {st['scancel_calls']} / {st['sacct_calls']}")
    print(f"  driver CPU              {cpu:.1f} s (user + system) = {100 * cpu / wall:.1f}% of one core over the run")
    print(f"  wall time               {wall:.0f} s ({wall / a.configs:.2f} s per configuration)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
