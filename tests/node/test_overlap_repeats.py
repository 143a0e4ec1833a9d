"""A job's repeated runs in overlap mode (sweep.node.measure, sampling, together): a program showing
one timed iteration a run is repeated for its noise; with the GPU's token (overlap mode) the repeats
start together, each in files of its own, only run 1 checked; without it (exclusive mode) one after
another. The pooled record is the same either way, and a run out of GPU memory beside the others
runs again alone (the lock held, no token), the note saying so. No GPU: the "program" is a Python
script that sleeps as host work and records when it ran."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sweep import profile
from sweep.node import measure, overlap
from sweep.node.process import JobFailed
from sweep.node.together import at_once
from sweep.profile import Invocation, Measurement, Parsed
from sweep.records import Status
from sweep.space.workloads import DEFAULT

# One run: `host_s` of "host work", then its record (start, end, argv, token, whether it could take the
# GPU's lock itself) in its output; it fails as CUDA does out of memory where FAIL_OOM_IN is in its path.
PROGRAM = r"""
import fcntl, json, os, sys, time
out, lock = sys.argv[1], os.environ.get("TEST_LOCK", "")
start = time.time()
time.sleep(float(os.environ.get("HOST_S", "0.3")))
if os.environ.get("FAIL_OOM_IN") and os.environ["FAIL_OOM_IN"] in out:
    sys.stderr.write("cudaMalloc failed: out of memory\n")
    sys.exit(2)
free = None
if lock:
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        free = True
    except BlockingIOError:
        free = False
    finally:
        os.close(fd)
record = json.dumps({"start": start, "end": time.time(), "argv": sys.argv[2:], "out": out,
                     "token": os.environ.get("TEST_TOKEN"), "lock_free": free})
open(out, "w").write(record)
with open(os.environ["TEST_RECORDS"], "a") as f:      # every run's record (a run in the job's own files overwrites)
    f.write(record + "\n")
"""


def invocation(req: profile.Request) -> Invocation:
    out = req.job_dir / "capture.json"
    env = {"TEST_TOKEN": str(req.gpu_token)} if req.gpu_token else {}
    return Invocation([sys.executable, os.environ["TEST_PROGRAM"], str(out), *req.program()], out, env=env)


def parse(inv: Invocation, stdout: str) -> Parsed:
    json.loads(inv.output.read_text())       # the run's own record is there
    return Parsed([Measurement("k", (1, 1, 1), (32, 1, 1), 1, 1000.0, 1000.0, 1000.0, 1000.0, 0.0, (1000.0,))])


BACKEND = profile.Backend("fake", "a CPU-only program that records when it ran", invocation, parse)


class FakeJob:
    """What a Measuring needs of its job."""

    def __init__(self, d: Path, token: Path | None):
        self.dir, self.backend, self.timeout_s, self.gpu_token = d, BACKEND, 60.0, token
        self.cfg = SimpleNamespace(values={}, run={"iterations": 1}, profile={"backend": "fake"})

    def request(self) -> profile.Request:
        return profile.Request(self.dir, lambda *a, **k: [], gpu_token=self.gpu_token)

    def refused_launch(self, *args) -> None:
        pass


@pytest.fixture
def program(tmp_path, monkeypatch):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    lock = tmp_path / "gpu0.lock"
    lock.touch()
    monkeypatch.setenv("TEST_PROGRAM", str(script))
    monkeypatch.setenv("TEST_LOCK", str(lock))
    monkeypatch.setenv("TEST_RECORDS", str(tmp_path / "records.jsonl"))
    monkeypatch.setattr(overlap, "repeat_slots", lambda lock, cpus=None: 4)
    return lock


def measured(tmp_path: Path, token: Path | None, check: bool = True, iterations: int = 1):
    """A one-iteration program's measuring (5 runs for its noise), the space saying `iterations` a run
    (1: repeated from the start; more: once its first run showed 1): (the Measuring, its pooled
    Measurements, its Sampled record)."""
    d = tmp_path / ("overlap" if token else "exclusive")
    spec = measure.Spec(DEFAULT, 1, 1, iterations, 0, (), ("prog",), check_args=("--check",))
    m = measure.Measuring(FakeJob(d, token), spec, d, check=check)
    m.program = lambda extra=(), iterations=None, warmup=None, check=None: (  # noqa: E731
        ["--check"] if (m.check if check is None else check) else [])
    ms, sampled = m.finish(m.capture(None, {}))
    return m, ms, sampled


def records(tmp_path: Path) -> list[dict]:
    """Every run's record, in the order they ended."""
    return [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]


def most_at_once(runs: list[dict]) -> int:
    return max(sum(r["start"] < x["end"] and x["start"] < r["end"] for r in runs) for x in runs)


def test_in_overlap_mode_the_repeats_start_together_at_most_the_slots_and_only_run_one_is_checked(tmp_path, program):
    m, _, sampled = measured(tmp_path, token=program)
    runs = records(tmp_path)
    assert sampled.runs == 5 and len(runs) == 5
    assert most_at_once(runs) == 4                       # four at once (the slots), the fifth after them
    assert sorted(r["argv"] == ["--check"] for r in runs) == [False] * 4 + [True]
    assert all(r["token"] == str(program) for r in runs)
    assert sorted(p.parent.name for p in (m.out / measure.RUNS).glob("*/capture.json")) == ["2", "3", "4"]


def test_repeats_known_only_once_the_first_run_showed_one_iteration_start_together_after_it(tmp_path, program):
    m, _, sampled = measured(tmp_path, token=program, iterations=5)
    first, *rest = records(tmp_path)
    assert sampled.runs == 5 and "repeated to 5 runs" in sampled.reason
    assert first["argv"] == ["--check"] and all(first["end"] <= r["start"] for r in rest)
    assert most_at_once(rest) == 4


def test_in_exclusive_mode_the_repeats_run_one_after_another(tmp_path, program):
    m, _, sampled = measured(tmp_path, token=None)
    runs = records(tmp_path)
    assert sampled.runs == 5 and len(runs) == 5 and not (m.out / measure.RUNS).exists()
    assert most_at_once(runs) == 1 and [r["argv"] for r in runs] == [["--check"]] + [[]] * 4


def test_the_pooled_result_of_repeats_at_once_equals_that_of_repeats_in_a_row(tmp_path, program):
    _, together_ms, together = measured(tmp_path, token=program)
    _, in_row_ms, in_row = measured(tmp_path, token=None)
    assert together_ms == in_row_ms
    same = {f.name for f in dataclasses.fields(together)} - {"elapsed_s", "stopped"}
    assert {k: getattr(together, k) for k in same} == {k: getattr(in_row, k) for k in same}
    assert {k: v for k, v in together.stopped.items() if k != "elapsed_s"} == \
           {k: v for k, v in in_row.stopped.items() if k != "elapsed_s"}
    assert together.runs == 5 and together.samples == 5 and together.adaptive


def test_a_repeat_out_of_gpu_memory_beside_the_others_runs_again_alone_holding_the_lock(tmp_path, program,
                                                                                        monkeypatch):
    monkeypatch.setenv("FAIL_OOM_IN", f"{measure.RUNS}/3/")
    m, _, sampled = measured(tmp_path, token=program)
    assert sampled.runs == 5 and "1 of 4 runs taken at once ran out of GPU memory" in sampled.note
    alone = [r for r in records(tmp_path) if r["token"] is None]
    assert len(alone) == 1 and alone[0]["lock_free"] is False     # no token: it held the lock instead
    assert m.untokened is False and m.inv.env.get("TEST_TOKEN") == str(program)   # the token again after it


def test_a_failure_other_than_memory_in_a_repeat_ends_the_job():
    def crash():
        raise JobFailed(Status.RUNTIME_FAILED, "profile", "prog exit 139: segmentation fault")

    with pytest.raises(JobFailed, match="segmentation"):
        at_once([lambda: 1, crash], 2, lambda i: 0)


def test_out_of_memory_without_a_way_to_run_alone_is_raised():
    def oom():
        raise JobFailed(Status.RUNTIME_FAILED, "profile", "prog exit 2: out of memory")

    with pytest.raises(JobFailed, match="out of memory"):
        at_once([oom], 2)
    assert at_once([lambda: 1, oom], 2, lambda i: f"alone {i}") == ([1, "alone 1"], [1])


def test_repeat_slots_share_the_cpus_among_the_jobs_measuring_on_the_node(tmp_path):
    lock, other = tmp_path / "gpu0.lock", tmp_path / "gpu1.lock"
    with overlap.holding(lock):
        assert overlap.repeat_slots(lock, cpus=8) == 8
        parent = os.getppid()                       # a live process: another job measuring on GPU 1
        Path(f"{other}.{parent}{overlap.HOLDER}").touch()
        assert overlap.repeat_slots(lock, cpus=8) == 4
        assert overlap.repeat_slots(lock, cpus=1) == 1
        assert overlap.repeat_slots(lock, cpus=64) == 16      # the GPU's cap on programs at once
        Path(f"{lock}.{parent}{overlap.HOLDER}").touch()     # and on GPU 0 beside this one
        assert overlap.repeat_slots(lock, cpus=64) == overlap.gpus.MAX_OVERLAP_SLOTS // 2


def race_entrant(tmp_path: Path, token: Path | None, fallback: bool = False) -> measure.Measuring:
    """A race entrant's Measuring (unchecked), its backend with a fallback window where `fallback`."""
    d = tmp_path / "race" / "T1"
    m = measure.Measuring(FakeJob(d, token), measure.Spec(DEFAULT, 1, 1, 1, 0, (), ("prog",)), d, check=False)
    m.program = lambda extra=(), iterations=None, warmup=None, check=None: []  # noqa: E731
    if fallback:
        def with_window(req: profile.Request) -> Invocation:
            return dataclasses.replace(invocation(req), fallback=invocation(req))
        m.job.backend = dataclasses.replace(BACKEND, invocation=with_window, timed=lambda inv: True)
    return m


def rounds_at_once(m: measure.Measuring, n: int, apart: bool = True) -> list:
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda _: m.once(None, {}, apart=apart), range(n)))


def test_a_race_entrants_runs_taken_at_once_each_capture_into_files_of_their_own(tmp_path, program):
    m = race_entrant(tmp_path, token=program)
    got = rounds_at_once(m, 4)
    runs = records(tmp_path)
    assert len(got) == 4 and all(ms for ms, _ in got)
    assert len({r["out"] for r in runs}) == 4             # shared files: a run truncated another's capture (H200)
    assert most_at_once(runs) == 4 and m.runs == 4
    assert sorted(p.parent.name for p in (m.out / measure.RUNS).glob("*/capture.json")) == ["1", "2", "3", "4"]


def test_a_race_entrant_whose_window_is_unknown_runs_first_alone_in_its_own_files_then_the_rest_at_once(
        tmp_path, program):
    m = race_entrant(tmp_path, token=program, fallback=True)
    rounds_at_once(m, 4)
    first, *rest = sorted(records(tmp_path), key=lambda r: r["start"])
    assert first["out"] == str(m.out / "capture.json") and all(first["end"] <= r["start"] for r in rest)
    assert most_at_once(rest) == 3 and len({r["out"] for r in rest}) == 3
