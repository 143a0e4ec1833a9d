"""The one error type users see.

A SweepError is a mistake the user can fix (a bad space file, a missing tool, a
sweep that does not exist). Its message names the file or value, what is
allowed and what to do; the CLI prints it on one line and exits 1. Anything else
is a bug and keeps its traceback.
"""

from __future__ import annotations


class SweepError(Exception):
    """A user-facing error whose message says what is wrong and how to fix it."""
