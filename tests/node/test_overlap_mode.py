"""Overlap mode's choice and its safety on the Python side (sweep/node/overlap.py): which jobs
share the GPU, the lock held for verify and not for the profiled runs, NVML's check ignoring
the cooperating jobs' processes and not others, measuring_slots, and the setting."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sweep.core.errors import SweepError
from sweep.node import gpus, overlap
from sweep.node.process import JobFailed
from sweep.records import Status
from sweep.space import target


@pytest.mark.parametrize("backend, setting, lock, devices, expected", [
    ("cupti", None, "/l", ["0"], "overlap"),
    ("cupti", True, "/l", ["GPU-abc"], "overlap"),
    ("cupti", False, "/l", ["0"], "exclusive"),
    ("nsys", None, "/l", ["0"], "exclusive"),
    ("ncu", None, "/l", ["0"], "exclusive"),
    ("events", None, "/l", ["0"], "exclusive"),
    ("cupti", None, None, ["0"], "exclusive"),          # no node-wide lock to take turns on
    ("cupti", None, "/l", ["0", "1"], "exclusive"),     # the program may use two GPUs
    ("cupti", None, "/l", None, "exclusive"),           # CUDA_VISIBLE_DEVICES unset: every GPU
])
def test_overlap_is_chosen_only_for_cupti_on_one_gpu_with_a_lock_and_the_setting_on(backend, setting, lock, devices,
                                                                                    expected):
    profile = {"backend": backend, **({} if setting is None else {"overlap": setting})}
    assert overlap.mode(profile, lock, devices) == expected


def test_the_space_turns_overlap_off_with_one_setting_and_refuses_a_non_boolean(write_space):
    assert target.load(write_space(profile={"backend": "cupti"})).profile.overlap is True
    assert target.load(write_space(profile={"backend": "cupti", "overlap": False})).profile.overlap is False
    with pytest.raises(SweepError, match=r"profile.*overlap.*true or false"):
        target.load(write_space(profile={"backend": "cupti", "overlap": "no"}))


def test_no_overlap_on_the_command_line_overrides_the_space(write_space):
    from sweep.cli.parser import build_parser
    from sweep.pipeline.overrides import apply_overrides

    args = build_parser().parse_args(["run", "toy.yaml", "--no-overlap"])
    assert args.overlap is False and build_parser().parse_args(["run", "toy.yaml"]).overlap is None
    space = target.load(write_space(profile={"backend": "cupti"}))
    assert apply_overrides(space, overlap=args.overlap).profile.overlap is False


def _space(backend: str, overlap_on: bool = True, gpus_per_job: int = 1) -> SimpleNamespace:
    return SimpleNamespace(profile=SimpleNamespace(backend=backend, overlap=overlap_on),
                           slurm=SimpleNamespace(gpus_per_job=gpus_per_job))


def test_measuring_slots_are_the_cpus_per_gpu_capped_in_overlap_mode_and_one_otherwise():
    assert gpus.measuring_slots(_space("cupti"), cpus=16, gpus=1) == gpus.MAX_OVERLAP_SLOTS
    assert gpus.measuring_slots(_space("cupti"), cpus=6, gpus=2) == 3
    assert gpus.measuring_slots(_space("cupti"), cpus=1, gpus=4) == 1
    assert gpus.measuring_slots(_space("nsys"), cpus=16, gpus=1) == 1
    assert gpus.measuring_slots(_space("cupti", overlap_on=False), cpus=16, gpus=1) == 1
    assert gpus.measuring_slots(_space("cupti", gpus_per_job=2), cpus=16, gpus=1) == 1


class FakeJob:
    """What overlap.measure uses of a Job; records whether the GPU lock was free at each stage."""

    def __init__(self, lock: Path, backend: str = "cupti", fail_first: str = ""):
        self.cfg = SimpleNamespace(profile={"backend": backend})
        self.gpu_lock_path = str(lock)
        self.gpu_token = None
        self.env: dict = {}
        self.seen: list[tuple[str, bool, Path | None]] = []
        self.fail_first = fail_first
        self.marked: list[str] = []

    def _lock_free(self) -> bool:
        fd = os.open(self.gpu_lock_path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    def verify(self) -> None:
        self.seen.append(("verify", self._lock_free(), self.gpu_token))

    def capture(self) -> list:
        self.seen.append(("capture", self._lock_free(), self.gpu_token))
        if self.fail_first:
            reason, self.fail_first = self.fail_first, ""
            raise JobFailed(Status.RUNTIME_FAILED, "profile", reason)
        return ["taken"]

    def mark(self, stage: str, start: float) -> None:
        self.marked.append(stage)


@pytest.fixture
def one_gpu(monkeypatch, tmp_path):
    monkeypatch.setattr(gpus, "visible", lambda env=None: ["0"])
    monkeypatch.setattr(gpus, "others_on", lambda device=None: set())
    lock = tmp_path / "gpu0.lock"
    lock.touch()
    return lock


def test_in_overlap_mode_verify_holds_the_lock_and_the_program_gets_the_token_instead(one_gpu, monkeypatch):
    monkeypatch.delenv(overlap.CONTEXT_ENV, raising=False)
    job = FakeJob(one_gpu)
    assert overlap.measure(job) == ["taken"]
    assert job.seen == [("verify", False, None), ("capture", True, one_gpu)]
    assert job.env["gpu_mode"] == "overlap" and job.gpu_token is None and job.marked == ["gpu"]
    assert job.env["gpu_contexts"] == "gate"


def test_the_context_setting_is_read_as_the_cupti_library_reads_it():
    assert overlap.context_mode({}) == "gate" and overlap.context_mode({overlap.CONTEXT_ENV: ""}) == "gate"
    assert overlap.context_mode({overlap.CONTEXT_ENV: "gate"}) == "gate"
    assert overlap.context_mode({overlap.CONTEXT_ENV: "0"}) == "beside"
    assert overlap.context_mode({overlap.CONTEXT_ENV: "1"}) == "token"
    assert overlap.context_mode({overlap.CONTEXT_ENV: "yes"}) == "token"     # the library: neither 0 nor gate


def test_in_exclusive_mode_the_whole_run_holds_the_lock_and_no_token_is_given(one_gpu):
    job = FakeJob(one_gpu, backend="nsys")
    overlap.measure(job)
    assert job.seen == [("verify", False, None), ("capture", False, None)]
    assert job.env["gpu_mode"] == "exclusive" and "gpu_contexts" not in job.env


def test_a_program_out_of_gpu_memory_beside_others_is_measured_again_alone(one_gpu):
    job = FakeJob(one_gpu, fail_first="prog exit 1: cudaMalloc: out of memory")
    assert overlap.measure(job) == ["taken"]
    assert job.seen[1:] == [("capture", True, one_gpu), ("capture", False, None)]
    assert job.env["gpu_mode"] == "exclusive" and "out of GPU memory" in job.env["gpu_mode_note"]


def test_another_failure_in_overlap_mode_is_not_repeated(one_gpu):
    job = FakeJob(one_gpu, fail_first="prog exit 3: wrong results")
    with pytest.raises(JobFailed, match="wrong results"):
        overlap.measure(job)
    assert [s for s, *_ in job.seen] == ["verify", "capture"]


def test_nvml_ignores_processes_under_a_registered_job_and_still_reports_foreign_ones(tmp_path):
    lock = tmp_path / "gpu0.lock"
    parents = {101: 100, 100: 1, 201: 200, 200: 1, 301: 300, 300: 1}
    with overlap.holding(lock):
        me = os.getpid()
        parents[100] = me                  # 101's parent chain reaches this job
        dead = _dead_pid()
        (tmp_path / f"gpu0.lock.{dead}.holder").touch()   # a job that died: hides nothing
        parents[200] = dead
        others = overlap.foreign(lock, users=lambda: {101, 201, 301}, parent=parents.get)
        assert others() == {201, 301}
    assert overlap.foreign(lock, users=lambda: {101}, parent=parents.get)() == {101}   # unregistered once done
    assert not list(tmp_path.glob(f"gpu0.lock.{me}.holder"))


def test_a_real_child_process_of_a_registered_job_is_cooperating(tmp_path):
    lock = tmp_path / "gpu0.lock"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with overlap.holding(lock):
            assert overlap.foreign(lock, users=lambda: {child.pid})() == set()
        assert overlap.foreign(lock, users=lambda: {child.pid})() == {child.pid}
    finally:
        child.kill()
        child.wait()


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid
