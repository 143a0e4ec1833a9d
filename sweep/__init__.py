"""Sweep CUDA kernel launch configurations and pick the fastest, with evidence.

Stages, each a module of plain functions over small frozen dataclasses; data
flows one way and later stages import earlier ones, never the reverse:

    space -> strategies -> render -> build -> job (verify, profile) -> dispatch
          -> collect -> select -> report

The CLI (`config_sweep.py`, `sweep.cli`) only parses arguments and calls them.
"""

__version__ = "0.1.0"
