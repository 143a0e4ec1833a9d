"""One configuration's job on the GPU node: build -> verify -> profile -> result.json.

    python -m sweep.node.job jobs/<sweep>/<tag>        (what job.sbatch and the executors run)

Every job ends with a result.json written atomically, whatever happened, with
one Status and, for failures, the stage, the reason and the log to read:

    ok              measured
    skipped         illegal configuration: a constraint, the target's static_assert, or a
                    resource limit (ptxas or nvlink refusing a kernel's shared memory,
                    registers or constant memory; the runtime refusing a launch's size:
                    "too many resources requested for launch", "invalid configuration
                    argument"), with the resource, the amount and the limit (sweep.core.limits)
    compile_failed  the build failed for another reason (the first compiler or ptxas error line)
    verify_failed   the programs built but compute wrong results: never picked. With
                    `verify: profile` (a program that checks itself before it times), a
                    non-zero exit of the profiled run before its timed part is this,
                    unless the program names a CUDA error (then CUDA failed, not the check)
    runtime_failed  a program crashed, or a profiler or tool failed
    timeout         the scheduler's time limit ended it, or a program outlived its own
    preempted       the scheduler took the node back (it is requeued)
    cancelled       somebody cancelled it

The configuration is built once and measured on every workload of its space,
one after another while the job holds the GPU, and verified once, on the first
(sweep.node.measure: the per-workload loop, each workload's files in a folder of its
own). A space without workloads measures its one run in the job's folder.

The profiled run uses the capture window the backend chose; when nsys or ncu
captured nothing because the program never calls cudaProfilerStart, the run is
repeated over the whole program (sweep.profile, "Capture windows"), and the
result's env["capture"] says which window was used.

While it runs, state.json says where (host, pid, stage, start), so `status`
can show a sweep from its files alone, from any shell. An interrupted job (Ctrl-C)
leaves no result: the next run measures it. The records are in sweep.records;
running programs (the GPU lock, the subprocess wrapper) in sweep.node.process.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from sweep import profile
from sweep.core import atomic, limits, safe
from sweep.node import build as build_mod, clocks, group, measure, overlap, sampling
from sweep.core.errors import DiskFull, SweepError
from sweep.node.measure import CUDA_FAILURE, Measuring  # noqa: F401  (CUDA_FAILURE: importable from here, as before)
from sweep.node.process import (JobFailed, Ran, Termination, Tools, check_exit, current_stage, device_facts,  # noqa: F401
                           expand, gpu_lock, last_line, run_program, slurm_job_id, tail)
from sweep.profile import Measurement
from sweep.records import (JobConfig, JobResult, JobSettings, Status, now, read_json, read_result,  # noqa: F401
                           write_result)
from sweep.space.model import VERIFY_IN_PROFILE

# Jobs of other roles than measuring a configuration: role -> runner(job, stages, previous).
# A module of a later part of the node stage registers its role on import (sweep.node.race:
# "race"); sweep.node imports them all, so every job process knows every role.
ROLES: dict[str, Callable[["Job", str, JobResult | None], JobResult]] = {}

DIAGNOSIS = "diagnose_cupti.txt"    # a refused launch, re-run under the CUPTI library to learn its size

# ---------------------------------------------------------------------------
# Running one job
# ---------------------------------------------------------------------------


class Job:
    """The stages of one job; each raises JobFailed to end it with a status."""

    def __init__(self, job_dir: Path, tools: Tools | None = None, timeout_s: float | None = None,
                 build_jobs: int | None = None, gpu_lock_path: str | Path | None = None,
                 stop_build: Callable[[float], bool] = build_mod.never):
        self.dir = Path(job_dir).resolve()
        self.cfg = JobConfig.load(self.dir)
        settings = self.cfg.settings
        self.tools = tools or Tools.find(settings)
        self.timeout_s = timeout_s if timeout_s is not None else settings.timeout_s
        self.build_jobs = build_jobs if build_jobs is not None else (self.cfg.build.get("jobs", 0) or settings.build_jobs)
        self.gpu_lock_path = gpu_lock_path
        self.stop_build = stop_build            # true once the process running this build on a thread is interrupted
        self.gpu_token: Path | None = None      # overlap mode: the lock file the program takes (sweep.node.overlap)
        self.backend = profile.backend(self.cfg.profile["backend"])
        self.timings: dict[str, float] = {}
        self.intervals: dict[str, list[float]] = {}
        self.build_info: dict[str, Any] = {}
        self.env: dict[str, Any] = {"host": socket.gethostname(), "commit": self.cfg.commit,
                                    "backend": self.cfg.profile["backend"]}
        self.sampled: sampling.Sampled | None = None
        # One Measuring per workload (sweep.node.measure); the first of each program carries its check
        self.specs = measure.specs(self.cfg)
        checks = measure.checking(self.specs) if self.self_checking else [False] * len(self.specs)
        self.measuring = [Measuring(self, spec, measure.folder(self.dir, spec), check=check)
                          for spec, check in zip(self.specs, checks)]

    # -- helpers ---------------------------------------------------------------
    @property
    def self_checking(self) -> bool:
        """The profiled program checks its own results (`verify: profile`), and run.verify wants it to."""
        return self.cfg.target["verify"] == VERIFY_IN_PROFILE and bool(self.cfg.run.get("verify", True))

    def values(self) -> dict[str, Any]:
        """The first workload's placeholders: what the check commands run with (verify once, on it)."""
        return self.measuring[0].values()

    def program(self, extra: tuple[str, ...] | list[str] = (), iterations: int | None = None) -> list[str]:
        """The first workload's timing command; with `verify: profile`, the check arguments follow it."""
        return self.measuring[0].program(extra, iterations)

    def request(self) -> profile.Request:
        """The backend's request for the job (the first workload's program). Its cache folder is
        resolved here, <jobs root>/_cache/<backend> by default, since a workload's request names
        its own folder (Measuring.request), deeper than the job's."""
        tool = self.tools.path(self.backend.tool) or "" if self.backend.tool else ""
        cache = self.cfg.settings.cache_dir
        return profile.Request(self.dir, self.program, tool, self.cfg.profile, self.specs[0].events,
                               Path(cache) if cache else self.dir.parent.parent / "_cache" / self.backend.name,
                               gpu_token=self.gpu_token)

    def mark(self, stage: str, start: float) -> None:
        """Record a stage's wall-clock interval (epoch seconds), for overhead accounting."""
        self.intervals[stage] = [start, time.time()]

    def state(self, stage: str) -> None:
        atomic.write_json(self.dir / "state.json", {"stage": stage, "host": socket.gethostname(), "pid": os.getpid(),
                                                     "started": now(), "slurm_job": slurm_job_id()})

    # -- stages ----------------------------------------------------------------
    def build(self) -> None:
        self.state("build")
        t0 = time.monotonic()
        arch = self.cfg.settings.arch or build_mod.resolve_arch(self.cfg.build["arch"])
        start = time.time()
        out = build_mod.build(self.dir, arch, self.build_jobs, self.timeout_s, stop=self.stop_build)
        self.timings["build"] = time.monotonic() - t0
        self.mark("build", start)
        self.build_info = {"arch": arch, "compiled": list(out.compiled), "cached": list(out.cached),
                           "kernels": list(out.kernels)}
        if not out.ok:
            raise JobFailed(out.status, "build", out.reason, out.log)
        self.build_info["objects"] = build_mod.object_digests(self.dir / "build")
        self._check_programs(out.log)
        try:  # what the backend builds once (cupti: its library), here on the CPUs rather than on the GPU's time
            self.setup_backend()
        except JobFailed:
            pass  # said again, with the fix, when the job measures

    def _check_programs(self, log: Path) -> None:
        """Every program the job will run must exist once the build is done: a typo in a
        command or a Makefile whose `all` misses one fails here, before any GPU time."""
        commands = [list(c) for c in self.verify_commands()] + [list(s.profile) for s in self.specs]
        for cmd in commands:
            program = expand(cmd[:1], self.values(), [])[0] if cmd else ""
            if program.startswith(str(self.dir)) and not os.access(program, os.X_OK):
                raise JobFailed(Status.COMPILE_FAILED, "build",
                                f"the build made no program {program}: make the Makefile's `all` target build it, "
                                "or fix the command in the space file's target", log)

    def verify_commands(self) -> list[list[str]]:
        verify = self.cfg.target["verify"]
        return [] if verify == VERIFY_IN_PROFILE else [list(c) for c in verify]

    def setup_backend(self) -> None:
        """The backend's work before the GPU (cupti: build or find its library)."""
        if self.backend.setup is None:
            return
        try:
            self.backend.setup(self.request())
        except SweepError as e:
            raise JobFailed(Status.RUNTIME_FAILED, "profile", str(e)) from None

    def _load_built(self) -> None:
        """Build facts from a separate build stage (the local executor builds on CPUs first)."""
        try:
            built = read_json(self.dir / "built.json")
        except (OSError, SweepError):
            raise JobFailed(Status.RUNTIME_FAILED, "build", "measure stage without a build: built.json is missing") from None
        if not isinstance(built, dict) or built.get("config_hash") != self.cfg.config_hash:
            raise JobFailed(Status.RUNTIME_FAILED, "build", "built.json belongs to another configuration: build again")
        self.build_info = built.get("build", {})
        self.timings["build"] = built.get("seconds", 0.0)
        if built.get("interval"):
            self.intervals["build"] = built["interval"]

    def verify(self) -> None:
        commands = self.verify_commands()
        if not self.cfg.run.get("verify", True) or not commands:
            return
        self.state("verify")
        t0, start = time.monotonic(), time.time()
        log = self.dir / "verify.log"
        safe.write_new(log, b"")
        for template in commands:
            cmd = expand(list(template), self.values(), list(self.cfg.run["args"]))
            p = run_program(cmd, log, "verify", self.timeout_s)
            if p.returncode != 0:
                self.refused_launch(p, log, "verify", cmd)
                raise JobFailed(Status.VERIFY_FAILED, "verify", f"{Path(cmd[0]).name} exit {p.returncode}: {tail(p)}", log)
        self.timings["verify"] = time.monotonic() - t0
        self.mark("verify", start)

    def capture(self) -> list[sampling.Taken]:
        """Every workload's profiled runs, one workload after another (needs the GPU; sweep.node.measure)."""
        self.state("profile")
        be = self.backend
        t0, start = time.monotonic(), time.time()
        if be.tool and not self.tools.path(be.tool):
            raise JobFailed(Status.RUNTIME_FAILED, "profile",
                            f"{be.tool} not found on {socket.gethostname()}: set {be.tool.upper()}=/path/to/{be.tool} "
                            f"(or --{be.tool}) or load its module (slurm.setup), or use profile.backend: cupti or events")
        reader = clocks.reader()
        facts = clocks.fingerprint(reader)
        self.env.update(facts)
        taken = []
        for m in self.measuring:
            try:
                taken.append(m.capture(reader, facts))
            except JobFailed as f:
                raise measure.named_failure(f, m.spec.name) from None
        self.env["capture"] = ", ".join(dict.fromkeys(m.inv.capture for m in self.measuring))
        self.timings["profile"] = time.monotonic() - t0
        self.mark("profile", start)
        return taken

    def refused_launch(self, p: Ran, log: Path, stage: str, program: list[str],
                        inv: profile.Invocation | None = None) -> None:
        """A run the runtime stopped by refusing a launch's size is an illegal configuration:
        skipped, naming the resource, the amount and the limit (sweep.core.limits). `program` is
        the command without a profiler: what the diagnosis re-runs (under nsys or ncu, their
        own injection would replace the CUPTI library's)."""
        text = p.stderr + "\n" + p.stdout
        if not limits.may_be_refused_launch(text):
            return
        capture = self._capture_of(inv) if inv is not None and self.backend.name == "cupti" else None
        if capture is None or not capture.failures:
            capture = self._diagnose(program, log) or capture
        if capture is None:
            over = limits.from_run(text)
        else:
            facts = limits.with_registers(limits.kernel_facts(Path(capture.header.get("exe", p.args[0]))),
                                          capture.kernels)
            over = limits.from_run(text, capture.failures, capture.limits, facts)
        if over is not None:
            raise JobFailed(Status.SKIPPED, stage, over.reason()[:500], log)

    def _capture_of(self, inv: profile.Invocation) -> Any:
        from sweep.profile.cupti_file import read_capture

        try:
            return read_capture(inv.output)
        except SweepError:
            return None

    def _diagnose(self, cmd: list[str], log: Path) -> Any:
        """The refused launch's size and the device's limits: the failed command once more
        under the CUPTI injection library (it stops at the same launch). None if that cannot run."""
        from sweep.profile import cupti

        out = self.dir / DIAGNOSIS
        try:
            lib = cupti.library(cupti.cache_dir(self.request()))
            with safe.open_nofollow(log, "a") as f:
                f.write("\n# the runtime refused a launch: running it again under the CUPTI library to see its size\n")
            run_program(list(cmd), log, "diagnose", self.timeout_s, env=cupti.environment(lib, out, token=self.gpu_token))
        except (SweepError, JobFailed, OSError):
            return None
        return self._capture_of(profile.Invocation([], out))

    def parse(self, taken: list[sampling.Taken]) -> tuple[list[Measurement], dict[str, float]]:
        """Turn each workload's runs into Measurements (a single run's parse is CPU only: it runs
        outside the GPU lock, unless its clock fell after it had boosted: see sweep.node.sampling). The
        forward time and the device facts are the first workload's; each workload's entry in
        env["workloads"] says how it was sampled and, when its launches overlapped (PDL), how."""
        t1, start = time.monotonic(), time.time()
        ms: list[Measurement] = []
        parts, per = [], {}
        for m, t in zip(self.measuring, taken):
            try:
                got, sampled = m.finish(t)
                if not got:
                    raise JobFailed(Status.RUNTIME_FAILED, "parse",
                                    "the profile holds no kernel launches in the timed iterations", m.log)
            except JobFailed as f:
                raise measure.named_failure(f, m.spec.name) from None
            ms.extend(got)
            parts.append((m.spec.name, sampled))
            per[m.spec.name] = {"capture": m.inv.capture, "runs": sampled.runs, "samples": sampled.samples,
                                "noise": sampled.noise, "profile_s": round(m.seconds, 3),
                                **({"overlap": m.parsed.env["overlap"]} if m.parsed and "overlap" in m.parsed.env else {})}
        self.sampled = measure.combined(parts)
        self.timings["parse"] = time.monotonic() - t1
        self.mark("parse", start)
        first = self.measuring[0].parsed
        self.env.update(first.env)
        facts = device_facts(first.device_text)
        if self.env.get("gpu_uuid"):   # NVML's reading of the GPU before a program's own word for it
            facts.pop("gpu_uuid", None)
        self.env.update(facts)
        if self.cfg.workloads:
            self.env["workloads"] = per
        return ms, first.forward_ms

    # -- the whole job -----------------------------------------------------------
    def run(self, stages: str = "all") -> JobResult:
        """stages: all | build (compile only: --dry-run) | measure (after a separate build).

        An interrupt (Ctrl-C, SIGINT) is not a result: the job leaves none, so the
        next run measures it, and the interrupt goes on to the caller."""
        t0 = time.monotonic()
        group.time_limit(self.timeout_s)      # its programs end (and record `timeout`) before the scheduler's kill
        previous = read_result(self.dir)
        history: tuple[dict[str, str], ...] = ()
        restarts = os.environ.get("SLURM_RESTART_COUNT", "")
        if restarts.isdigit() and int(restarts) > 0 and not (previous and previous.status == Status.PREEMPTED):
            # Requeued by the scheduler (node failure, scontrol requeue, preemption without a
            # warning signal): the job itself cannot tell which, so the entry names them all.
            history = ({"status": "requeued", "stage": "scheduler",
                        "reason": f"requeued by Slurm (restart {restarts}): node failure, preemption or scontrol requeue"},)
        ms: list[Measurement] = []
        forward: dict[str, float] = {}
        runner = ROLES.get(self.cfg.role)
        if runner is not None:          # a job of another role (the certification race, sweep.node.race)
            return runner(self, stages, previous)
        try:
            if stages in ("all", "build"):
                self.build()
            if stages == "measure":
                self._load_built()
            if stages in ("all", "measure"):
                self.setup_backend()
                taken = overlap.measure(self)   # the GPU held for the whole run, or only for its GPU work
                ms, forward = self.parse(taken)
            status, stage, reason, log = Status.OK, "", "", ""
            if stages == "build":
                stage, reason = "build", "built only (dry run): not measured"
        except JobFailed as f:
            status, stage, reason, log, ms, forward = f.status, f.stage, f.reason, str(f.log or ""), [], {}
        except (DiskFull, build_mod.BuildInterrupted):
            (self.dir / "state.json").unlink(missing_ok=True)
            raise
        except OSError as e:
            (self.dir / "state.json").unlink(missing_ok=True)
            if e.errno == errno.ENOSPC:
                raise DiskFull.at(self.dir) from None
            raise
        except SweepError as e:
            status, stage, reason, log, ms, forward = Status.RUNTIME_FAILED, "job", str(e), "", [], {}
        except BaseException:
            (self.dir / "state.json").unlink(missing_ok=True)
            raise
        self.timings["total"] = time.monotonic() - t0
        result = JobResult.ended(self.cfg, status, stage, reason, log, previous=previous, measurements=tuple(ms),
                                 forward_ms=forward, env=self.env, timings=self.timings, intervals=self.intervals,
                                 build=self.build_info, sampling=self.sampled if status == Status.OK else None)
        if history:
            result = replace(result, history=result.history + history, attempt=max(result.attempt, int(restarts) + 1))
        if stages == "build" and status == Status.OK:
            atomic.write_json(self.dir / "built.json", {"config_hash": self.cfg.config_hash, "at": now(),
                                                        "build": self.build_info, "seconds": self.timings["build"],
                                                        "interval": self.intervals.get("build")})
        else:
            write_result(self.dir, result)
        (self.dir / "state.json").unlink(missing_ok=True)
        return result


def run_job(job_dir: str | Path, stages: str = "all", *, build_jobs: int | None = None,
            gpu_lock_path: str | None = None) -> dict[str, Any]:
    """Entry point for executors: runs the job and returns its result as a dict (picklable)."""
    return Job(Path(job_dir), build_jobs=build_jobs, gpu_lock_path=gpu_lock_path).run(stages).to_dict()


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m sweep.node.job", description="Run one configuration's job in its folder.")
    ap.add_argument("job_dir", type=Path)
    ap.add_argument("--stages", choices=("all", "build", "measure"), default="all")
    a = ap.parse_args(argv)
    try:
        r = Job(a.job_dir).run(a.stages)
    except SweepError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{r.tag}: {r.status}" + (f" ({r.stage}: {r.reason})" if r.reason else ""))
    return 0 if r.status in (Status.OK, Status.SKIPPED) else 1


if __name__ == "__main__":
    sys.exit(main())
