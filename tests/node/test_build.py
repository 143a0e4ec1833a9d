"""Building a job folder: make through the cache, and what a failure means."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sweep.node import build, group
from sweep.core.errors import SweepError

NVCC_STATIC_ASSERT = """\
/work/main/tests/data/toy_target/alpha.cu(3): error: static assertion failed with "ALPHA_BLOCK must be <= 512 (toy rule)"
  static_assert(1024 <= 512, "ALPHA_BLOCK must be <= 512 (toy rule)");
  ^
1 error detected in the compilation of "/work/main/tests/data/toy_target/alpha.cu".
make[1]: *** [Makefile:13: alpha.o] Error 1
"""
NVCC_ERROR = """\
nvcc -std=c++17 -O3 -c units/matmul.cu -o obj/matmul.o
kernels/matmul.cuh(42): error: identifier "acc" is undefined
      acc += 1;
      ^
1 error detected in the compilation of "kernels/units/matmul.cu".
make[1]: *** [Makefile:78: obj/matmul.o] Error 1
make: *** [Makefile:20: all] Error 2
"""
GCC_ERROR = "prog.cpp:3:5: error: expected ';' before '}' token\nmake: *** [Makefile:2: all] Error 1\n"
MAKE_ONLY = "make: *** No rule to make target 'units/nope.cu', needed by 'obj/nope.o'.  Stop.\n"


@pytest.mark.parametrize("log, status, reason", [
    (NVCC_STATIC_ASSERT, "skipped", "static_assert: ALPHA_BLOCK must be <= 512 (toy rule)"),
    (NVCC_ERROR, "compile_failed", 'kernels/matmul.cuh(42): error: identifier "acc" is undefined'),
    (GCC_ERROR, "compile_failed", "prog.cpp:3:5: error: expected ';' before '}' token"),
    (MAKE_ONLY, "compile_failed", "make: *** No rule to make target 'units/nope.cu', needed by 'obj/nope.o'.  Stop."),
], ids=["static-assert-is-an-illegal-config", "nvcc-error", "gcc-error", "make-error"])
def test_failed_build_log_is_classified_with_its_most_telling_line(log, status, reason):
    assert build.classify_failure(log) == (status, reason)


def test_auto_arch_without_nvidia_smi_says_what_to_set(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SweepError, match="set build.arch .*--arch sm_90"):
        build.resolve_arch(["auto"])


def test_explicit_arch_list_needs_no_gpu():
    assert build.resolve_arch(["sm_80", "sm_90"]) == "sm_80 sm_90"


# A recipe make runs directly (no shell metacharacters: make execs it), as it runs a compiler.
SLOW_RECIPE = "all:\n\tsleep {s}\n"


def _slow_job(tmp_path, seconds: int, recipe: str = SLOW_RECIPE):
    job = tmp_path / "job"
    job.mkdir()
    (job / "Makefile").write_text(recipe.format(s=seconds))
    return job


def _sleeping(seconds: int) -> list[str]:
    return subprocess.run(["pgrep", "-f", f"sleep {seconds}"], capture_output=True, text=True).stdout.split()


def test_a_build_told_to_stop_is_interrupted_whatever_make_exits_with_and_leaves_no_process(tmp_path):
    job = _slow_job(tmp_path, 3711)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    with pytest.raises(build.BuildInterrupted, match="stopped"):
        build.build(job, "sm_90", timeout_s=60, stop=stop.wait)
    assert not _sleeping(3711), "make's child outlived the stopped build"


def _stopped_build_ends_its_stubborn_process(job: Path, seconds: int, stop_after_s: float, match: str) -> None:
    """Builds `job`, whose recipe leaves `sleep seconds` ignoring SIGTERM and SIGINT, telling it to
    stop after stop_after_s: the build is interrupted and that sleep is gone with it."""
    stop = threading.Event()
    threading.Timer(stop_after_s, stop.set).start()
    try:
        with pytest.raises(build.BuildInterrupted, match=match):
            build.build(job, "sm_90", timeout_s=60, stop=stop.wait)
        assert not _sleeping(seconds), "a process the stopped build started outlived it"
    finally:    # it ignores SIGTERM: a failed run would leave it for the next to find
        subprocess.run(["pkill", "-KILL", "-f", f"sleep {seconds}"])


def test_a_stopped_builds_processes_that_outlast_makes_signal_are_ended_with_it(tmp_path, monkeypatch):
    """A process under make that its signal does not end (here one ignoring SIGTERM and SIGINT; in
    the full suite, a sub-make started just after the Ctrl-C) is ended itself once make's grace is
    over: before, make alone was killed and the rest built on, orphaned."""
    monkeypatch.setattr(group, "GRACE_S", 0.5)
    job = _slow_job(tmp_path, 3716, "all:\n\tsh -c \"trap '' TERM INT; sleep {s} & wait\"\n")
    _stopped_build_ends_its_stubborn_process(job, 3716, 0.5, "stopped")


def test_what_an_interrupted_make_left_running_when_it_exited_is_ended_with_the_build(tmp_path, monkeypatch):
    """make exits 2 at once (GNU make interrupted while reaping can), leaving a process it started
    orphaned, its parent now 1, out of reach of parent links (the full suite's Ctrl-C test found a
    sub-make so, alive after its driver exited 130): the build's mark finds and ends it."""
    monkeypatch.setattr(group, "GRACE_S", 0.5)
    job = _slow_job(tmp_path, 3718, "all:\n\tsh -c \"trap '' TERM INT; sleep {s} &\"; "
                                    "echo 'make: *** wait: No child processes.  Stop.'; exit 2\n")
    _stopped_build_ends_its_stubborn_process(job, 3718, 0.3, "interrupted")


def test_a_build_that_ends_by_itself_leaves_what_it_started_alone(tmp_path):
    """A finished build is not an interrupted one: a process its recipe left on purpose (a compile
    server's daemon) is the user's, not the sweep's to end."""
    job = _slow_job(tmp_path, 3719, "all:\n\tsh -c \"sleep {s} > /dev/null 2>&1 &\"\n")
    try:
        assert build.build(job, "sm_90", timeout_s=60).status == "ok"
        assert _sleeping(3719)
    finally:
        subprocess.run(["pkill", "-f", "sleep 3719"])


def test_a_build_told_to_stop_before_it_starts_never_starts_make(tmp_path):
    job = _slow_job(tmp_path, 3717)
    stop = threading.Event()
    stop.set()
    with pytest.raises(build.BuildInterrupted, match="before it started"):
        build.build(job, "sm_90", timeout_s=60, stop=stop.wait)
    assert not (job / "build.log").exists() and not _sleeping(3717)


def test_a_compile_failure_while_the_driver_is_interrupted_is_no_result(tmp_path):
    """make exits 2 as if the configuration failed (GNU make interrupted while reaping can), and the
    driver's word that it was interrupted comes just after: the build records nothing."""
    job = _slow_job(tmp_path, 0, "all:\n\t@echo 'make: *** wait: No child processes.  Stop.'; exit 2\n")
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    with pytest.raises(build.BuildInterrupted, match="interrupted"):
        build.build(job, "sm_90", timeout_s=60, stop=stop.wait)
    assert build.build(job, "sm_90", timeout_s=60).status == "compile_failed"      # no driver: a failure


def test_a_build_past_its_deadline_is_a_compile_failure_and_make_ends_its_compiler(tmp_path):
    job = _slow_job(tmp_path, 3712)
    out = build.build(job, "sm_90", timeout_s=1)
    assert (out.status, out.reason) == ("compile_failed", "make did not finish in 1 s")
    time.sleep(0.5)
    assert not _sleeping(3712), "make's child outlived the build's deadline"


def test_an_interrupt_on_the_building_thread_ends_make_and_goes_on(tmp_path):
    job = _slow_job(tmp_path, 3713)
    calls = []

    def interrupt_on_second_look(timeout: float = 0.0) -> bool:   # Ctrl-C on a process's main thread
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        build.build(job, "sm_90", timeout_s=60, stop=interrupt_on_second_look)
    assert not _sleeping(3713), "make's child outlived the interrupted build"


def test_a_build_whose_driver_is_killed_outright_ends_with_it(tmp_path):
    """make runs in its driver's process group, so kill -9 of that group ends it too (in a group of
    its own it outlived the driver, and the rerun's make built in the same folder beside it)."""
    job = _slow_job(tmp_path, 3714)
    driver = subprocess.Popen([sys.executable, "-c", (
        "import threading, sys; sys.path.insert(0, %r); from sweep.node import build; "
        "t = threading.Thread(target=build.build, args=(%r, 'sm_90'), kwargs={'timeout_s': 60}); t.start(); t.join()"
    ) % (str(Path(__file__).resolve().parents[2]), str(job))], start_new_session=True)
    t0 = time.monotonic()
    while not _sleeping(3714) and time.monotonic() - t0 < 30:
        time.sleep(0.05)
    assert _sleeping(3714), "the build never started"
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    t0 = time.monotonic()
    while _sleeping(3714) and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    assert not _sleeping(3714), "the killed driver's build still runs"
