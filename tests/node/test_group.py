"""A job's programs run in a process group of their own, within the job's own deadline: a
program that never exits ends the job as `timeout` with the stage; one that exits leaving a
child on its output is not waited for; no process of its group outlives it (checked in /proc)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from sweep.node import group
from sweep.node.process import JobFailed, run_program

LEAVES_A_CHILD = """#!/bin/sh
echo $$ > "$PIDS"
sleep 1000 &
echo $! >> "$PIDS"
echo started
exit 0
"""
NEVER_EXITS = """#!/bin/sh
echo $$ > "$PIDS"
sleep 1000 &
echo $! >> "$PIDS"
while true; do sleep 1; done
"""


def _script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_program_that_never_exits_ends_as_timeout_and_no_process_of_its_group_survives(tmp_path, monkeypatch):
    monkeypatch.setenv("PIDS", str(tmp_path / "pids"))
    t0 = time.monotonic()
    with pytest.raises(JobFailed) as info:
        run_program([str(_script(tmp_path, "never_exits.sh", NEVER_EXITS))], tmp_path / "log", "profile", timeout_s=1.5)
    assert time.monotonic() - t0 < 10
    assert info.value.status == "timeout" and info.value.stage == "profile" and "ran past its" in info.value.reason
    pids = [int(x) for x in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 2 and not any(_alive(p) for p in pids)
    assert not group.group_members(pids[0])


def test_a_program_that_exits_leaving_a_child_on_its_output_is_not_waited_for_and_the_child_is_killed(
        tmp_path, monkeypatch):
    monkeypatch.setenv("PIDS", str(tmp_path / "pids"))
    monkeypatch.setattr(group, "LINGER_S", 0.5)
    t0 = time.monotonic()
    ran = run_program([str(_script(tmp_path, "leaves_a_child.sh", LEAVES_A_CHILD))], tmp_path / "log", "profile",
                      timeout_s=600)
    assert time.monotonic() - t0 < 10                     # not the 600 s limit, nor forever
    assert ran.returncode == 0 and ran.stdout == "started\n"
    pids = [int(x) for x in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 2 and not any(_alive(p) for p in pids)
    assert "still held its output" in (tmp_path / "log").read_text()


def test_the_jobs_deadline_shortens_a_programs_own_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("PIDS", str(tmp_path / "pids"))
    group.time_limit(2.0)            # a 2 s job (no scheduler's limit: those count minutes) gives its programs 2 s
    try:
        t0 = time.monotonic()
        with pytest.raises(JobFailed, match="ran past its 2 s limit"):
            run_program([str(_script(tmp_path, "n.sh", NEVER_EXITS))], tmp_path / "log", "verify", timeout_s=600)
        assert time.monotonic() - t0 < 8
    finally:
        group.time_limit(None)


def test_a_jobs_programs_end_before_the_schedulers_signal():
    for minutes, at_most in ((1, 30), (2, 90), (30, 1770)):      # submitit signals 30 s before the limit
        group.time_limit(minutes * 60.0)
        try:
            assert group.remaining() < at_most
        finally:
            group.time_limit(None)


def test_the_schedulers_warning_ends_the_running_program_as_its_deadline_would_with_its_output_logged(
        tmp_path, monkeypatch):
    monkeypatch.setenv("PIDS", str(tmp_path / "pids"))
    script = _script(tmp_path, "says_then_hangs.sh", "#!/bin/sh\necho $$ > \"$PIDS\"\necho working\n"
                                                     "while true; do sleep 1; done\n")
    threading.Timer(1.0, group.expire).start()          # what the USR2 handler does, from elsewhere
    try:
        t0 = time.monotonic()
        with pytest.raises(JobFailed) as info:
            run_program([str(script)], tmp_path / "profile.log", "profile", timeout_s=600)
        assert time.monotonic() - t0 < 10
        assert info.value.status == "timeout" and info.value.log == tmp_path / "profile.log"
        assert "working" in (tmp_path / "profile.log").read_text()    # what it printed is kept
        assert not group.group_members(int((tmp_path / "pids").read_text()))
        assert group.remaining() == 0.0                 # later programs of the job get no time either
    finally:
        group._expired.clear()


def test_a_program_that_ends_is_read_whole_and_its_exit_code_kept(tmp_path):
    ran = run_program(["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x; echo; echo err >&2; exit 3"],
                      tmp_path / "log", "verify", timeout_s=30)
    assert ran.returncode == 3 and len(ran.stdout) == 200001 and ran.stderr == "err\n"


@pytest.mark.slow
def test_a_job_whose_profiled_program_hangs_records_timeout_and_leaves_no_process(job_for, tmp_path, monkeypatch):
    """The fault injected as the toy target's profile command, through a whole job: it records
    `timeout` at the profile stage (not the scheduler's kill), and its program and child are gone."""
    from sweep.node.job import Job

    monkeypatch.setenv("PIDS", str(tmp_path / "pids"))
    script = _script(tmp_path, "never_exits.sh", NEVER_EXITS)
    d = job_for(target={"profile": [str(script), "{iterations}"]})
    Job(d).run("build")                          # the build outside the short limit (nvcc is slow on a busy CI)
    r = Job(d, timeout_s=20).run("measure")
    assert r.status == "timeout" and r.stage == "profile", r.reason
    pids = [int(x) for x in (tmp_path / "pids").read_text().split()]
    assert pids and not any(_alive(p) for p in pids)
    assert not (d / "state.json").exists()
