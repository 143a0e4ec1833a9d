"""Sweep CUDA kernel launch configurations and pick the fastest, with evidence.

The stages are packages, each importing only those below it (tests/test_layers.py
keeps it so; docs/design.md draws it):

    core -> stats -> profile -> records -> space -> plan -> node -> dispatch
         -> decide -> report -> pipeline -> api, cli

`from sweep import run` runs a sweep from a script or notebook (sweep.api); the
CLI (`config-sweep`, or `python config_sweep.py` in a checkout) only parses
arguments and calls the same functions.
"""

from __future__ import annotations

from typing import Any

from sweep import plan as _plan  # noqa: F401  (registers the strategies' declarations with the space loader)

__version__ = "0.1.0"
__all__ = ["run", "__version__"]


def __getattr__(name: str) -> Any:
    """`run` (sweep.api.run) on first use, so a job process importing a stage pays
    nothing for the pipeline's imports."""
    if name == "run":
        from sweep.api import run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
