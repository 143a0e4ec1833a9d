"""A program's source files read once per command (init's starter, validate's readings of the sources).

init and validate read a program's sources several ways: its `#ifndef` macros, its kernels and
rules (sweep.space.source_facts), its timing flags and the headers it includes
(sweep.space.run_flags), whether it includes conf.cuh. Inside a function marked @reads_once each
file is read from disk once, at its first reading; anywhere else every reading is fresh, since
files change between commands (and between a test's steps).
"""

from __future__ import annotations

import functools
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, TypeVar

_texts: ContextVar[dict[Path, str] | None] = ContextVar("source_texts", default=None)
F = TypeVar("F", bound=Callable)


def source_text(path: Path) -> str:
    """The file's text, undecodable bytes replaced; OSError as Path.read_text raises it (a file
    that could not be read is tried again at its next reading)."""
    texts = _texts.get()
    if texts is None:
        return Path(path).read_text(errors="replace")
    key = Path(path).resolve()
    if key not in texts:
        texts[key] = key.read_text(errors="replace")
    return texts[key]


def reads_once(fn: F) -> F:
    """`fn`, each source file it reads through source_text read from disk once per call (a call
    inside another such call shares the outer one's texts)."""

    @functools.wraps(fn)
    def reading(*args, **kwargs):
        if _texts.get() is not None:
            return fn(*args, **kwargs)
        token = _texts.set({})
        try:
            return fn(*args, **kwargs)
        finally:
            _texts.reset(token)

    return reading     # type: ignore[return-value]
