"""The node stage: what runs on the GPU node for one job.

render (conf.cuh, Makefile, job.sbatch) -> build (make through the object cache)
-> job (verify, profile, result.json), with measure, sampling, process, clocks and
the GPU lock beneath it; the certification race (race, lockstep) is a job of its own
role, which it registers with the job on import (below), so `python -m
sweep.node.job DIR` runs every role."""

from sweep.node import race  # noqa: F401  (registers the "race" role with sweep.node.job)
