"""Progress: a live bar on a terminal, sparse lines in a log."""

from __future__ import annotations

import io
import os

import pytest

from sweep.dispatch.progress import Progress
from sweep.records import JobResult


def _result(tag: str, status: str = "ok", **kw) -> JobResult:
    return JobResult(sweep="s", tag=tag, config_hash="h", macros={}, status=status, **kw)


def test_off_a_terminal_state_lines_come_at_most_every_interval_and_once_at_close():
    out = io.StringIO()
    p = Progress("s", 200, stream=out, interval_s=10.0)
    for i in range(150):
        p.finished(_result(f"t{i}"))
        p.show(running=i % 3)
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2                        # the first state, and the last at close
    assert lines[-1].startswith("[s] 150/200 done (ok 150, failed 0, skipped 0)")


def test_off_a_terminal_every_failure_gets_its_own_line_at_once():
    out = io.StringIO()
    p = Progress("s", 3, stream=out, interval_s=10.0)
    p.finished(_result("a"))
    p.finished(_result("b", "compile_failed", stage="build", reason="nvcc: error", log="/j/b/build.log"))
    assert "  b: compile_failed (build: nvcc: error) -> /j/b/build.log" in out.getvalue()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs a pseudo-terminal")
def test_on_a_terminal_a_live_bar_shows_the_counts():
    import fcntl
    import pty
    import struct
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # the child draws on its terminal
        try:
            fcntl.ioctl(2, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
            p = Progress("demo", 3, stream=os.fdopen(os.dup(2), "w"))   # fd 2 is the terminal (pytest holds sys.stderr)
            p.finished(_result("a"))
            p.finished(_result("b", "verify_failed", stage="verify", reason="wrong"))
            p.close()
        finally:
            os._exit(0)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert "demo:  67%|" in text and "2/3" in text and "ok 1, failed 1" in text
    assert "b: verify_failed (verify: wrong)" in text
