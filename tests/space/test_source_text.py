"""sweep.space.source_text: a program's files read once inside a command, afresh outside one."""

from __future__ import annotations

from pathlib import Path

from sweep.space.source_text import reads_once, source_text


def test_outside_a_reading_each_call_sees_the_file_as_it_is_now(tmp_path):
    f = tmp_path / "k.cu"
    f.write_text("#define A 1\n")
    assert source_text(f) == "#define A 1\n"
    f.write_text("#define A 2\n")
    assert source_text(f) == "#define A 2\n"


def test_inside_a_reading_a_file_is_read_from_disk_once_and_an_inner_reading_shares_it(tmp_path, monkeypatch):
    f = tmp_path / "k.cu"
    f.write_text("x")
    reads = []
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self) or real(self, *a, **k))

    @reads_once
    def inner():
        return source_text(tmp_path / "." / "k.cu")

    @reads_once
    def outer():
        return [source_text(f), inner(), source_text(f)]

    assert outer() == ["x", "x", "x"] and len(reads) == 1
    assert outer() == ["x", "x", "x"] and len(reads) == 2     # a new call reads afresh


def test_a_file_that_cannot_be_read_raises_as_read_text_does_and_is_tried_again(tmp_path):
    missing = tmp_path / "gone.cuh"

    @reads_once
    def twice():
        out = []
        for _ in range(2):
            try:
                out.append(source_text(missing))
            except OSError:
                out.append(None)
                missing.write_text("y")
        return out

    assert twice() == [None, "y"]
