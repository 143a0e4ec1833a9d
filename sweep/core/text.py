"""Text from programs, made safe for a terminal.

A program's output (a failure's last line, a kernel name a profiler read) may hold ANSI
escapes or NUL bytes; printed raw they recolour, move or clear the user's terminal, or
hide what follows. The report escapes them as HTML; the terminal gets them spelled out.
"""

from __future__ import annotations

import re

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")   # C0 but newline and tab, DEL, C1


def terminal_safe(text: object) -> str:
    """`text` with each control character but newline and tab written as \\xNN."""
    return CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", str(text))
