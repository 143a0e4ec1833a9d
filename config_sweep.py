#!/usr/bin/env python3
"""Find the fastest CUDA launch sizes for every kernel of a program: `python config_sweep.py --help`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sweep.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
