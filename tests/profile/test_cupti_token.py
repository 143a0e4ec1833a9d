"""The GPU token's policy and the node's context gate (sweep/profile/cupti_token.h), compiled
with g++ into a small program (tests/profile/token/harness.cpp) and run without a GPU: when
the token is taken and given back, that processes holding it never hold it at once, and that
context creations through the gate run one at a time on the node without a deadlock against
the tokens."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sweep.profile.cupti import HEADERS

HARNESS = Path(__file__).with_name("token") / "harness.cpp"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")]


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("token") / "harness"
    subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-pthread", f"-I{HEADERS[0].parent}", str(HARNESS),
                    "-o", str(out)], check=True)
    return out


def test_the_token_is_released_only_when_nothing_is_in_progress_and_the_queue_drained(harness, tmp_path):
    r = subprocess.run([str(harness), "policy", str(tmp_path / "gpu.lock")], capture_output=True, text=True)
    assert r.stdout.strip() == "ok", r.stdout + r.stderr


def test_a_drained_token_lingers_for_more_work_and_goes_back_after_the_linger(harness, tmp_path):
    r = subprocess.run([str(harness), "linger", str(tmp_path / "gpu.lock")], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "ok", r.stdout + r.stderr


def one_at_a_time(commands: list[list[str]], windows_each: int) -> list[list[int]]:
    """Runs the harness processes at once; the windows they print (a b ..., one a line) never
    overlap across processes, and the processes took turns (else nothing was tested). A deadlock
    between them ends in communicate's timeout. Every line printed, as numbers."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True) for c in commands]
    windows, lines = [], []
    for n, p in enumerate(procs):
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        lines += [[int(x) for x in line.split()] for line in out.splitlines()]
        windows += [(int(a), int(b), n) for a, b, *_ in (line.split() for line in out.splitlines())]
    assert len(windows) == windows_each * len(commands)
    windows.sort()
    for (a0, b0, p0), (a1, b1, p1) in zip(windows, windows[1:]):
        assert a0 < b0 <= a1, f"process {p0}'s window {a0}-{b0} overlaps process {p1}'s {a1}-{b1}"
    switches = sum(1 for (*_, p0), (*_, p1) in zip(windows, windows[1:]) if p0 != p1)
    assert switches >= 3, "the processes never took turns: nothing was tested"
    return lines


def test_three_processes_taking_one_token_never_hold_it_at_once_and_each_window_says_how_long_it_waited(
        harness, tmp_path):
    # 60 rounds of 1 ms held, 1 ms not: each process runs about 120 ms, far longer than the three
    # start apart on a loaded machine (20 rounds, 40 ms, once ran so nobody ever waited in CI)
    lines = one_at_a_time([[str(harness), "hold", str(tmp_path / "gpu.lock"), "60", "1000"]] * 3, 60)
    assert all(requested <= acquired < released for acquired, released, requested in lines)
    assert any(acquired - requested > 100_000 for acquired, _, requested in lines), "nobody ever waited"


def test_the_context_gate_is_held_until_the_outermost_context_call_on_a_thread_ends(harness, tmp_path):
    r = subprocess.run([str(harness), "gate-policy", str(tmp_path / "cuda-contexts.lock")], capture_output=True,
                       text=True, timeout=60)
    assert r.stdout.strip() == "ok", r.stdout + r.stderr


def test_context_creations_through_the_gate_run_one_at_a_time_also_beside_token_holders_without_deadlock(harness,
                                                                                                         tmp_path):
    gate, lock = tmp_path / "cuda-contexts.lock", tmp_path / "gpu.lock"
    # Two processes create contexts holding nothing; two hold their GPU's token around theirs
    # (the order a program creating a second context takes them in: token, then gate).
    one_at_a_time([[str(harness), "context", str(gate), str(lock), "15", "2000", under]
                   for under in ("0", "1", "0", "1")], 15)
