"""A program's output (ANSI escapes, NUL bytes) never reaches the terminal raw: `run`'s
progress lines and `status` spell control characters out (newline and tab stay)."""

from __future__ import annotations

import io
import json

from sweep import cli
from sweep.core.text import terminal_safe
from sweep.dispatch.progress import Progress
from sweep.records import JobConfig, JobResult, Manifest, write_result

REASON = "toy_bench exit 1: \x1b[2J\x1b[31mboom\x00 \x9b6n"


def _config(tag: str = "A64") -> JobConfig:
    return JobConfig(sweep="s", tag=tag, macros={"A": 64}, config_hash="h", space_path="/x.yaml", commit="c",
                     target={}, build={}, run={}, profile={"backend": "events"})


def test_control_characters_are_spelled_out_but_newline_and_tab_stay():
    assert terminal_safe("a\x1b[0mb\x00c\td\ne\x7f") == "a\\x1b[0mb\\x00c\td\ne\\x7f"


def test_a_failure_reason_with_escapes_is_printed_spelled_out_by_run_progress():
    out = io.StringIO()
    p = Progress("s", total=1, stream=out)
    p.finished(JobResult.ended(_config(), "runtime_failed", "profile", REASON, "/j/profile.log"))
    text = out.getvalue()
    assert "\x1b" not in text and "\x00" not in text and "\x9b" not in text
    assert "\\x1b[2J\\x1b[31mboom\\x00 \\x9b6n" in text


def test_status_prints_a_failure_reason_with_escapes_spelled_out(tmp_path, capsys):
    jobs = tmp_path / "jobs"
    d = jobs / "s" / "A64"
    d.mkdir(parents=True)
    Manifest("s", "/x.yaml", "grid", "events", "local", 1, "1", "c", "d", "t", tags=("A64",)).save(jobs / "s")
    (d / "config.json").write_text(json.dumps(_config().to_dict()))
    write_result(d, JobResult.ended(_config(), "runtime_failed", "profile", REASON, d / "profile.log"))
    assert cli.main(["status", "s", "--jobs-dir", str(jobs)]) == 0
    text = capsys.readouterr().out
    assert "boom" in text and "\x1b" not in text and "\x00" not in text, text
