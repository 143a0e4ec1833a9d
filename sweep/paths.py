"""Where the framework finds its own files, installed (`pip install .`) or in a checkout.

Installed, the templates are package data (sweep/templates/); in a checkout they
sit at the repository's top level (templates/), which the package data is built
from. Jobs, results and the default space are the checkout's when the framework
runs from one (config_sweep.py beside the package), else the working directory's.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent
IN_CHECKOUT = (CHECKOUT / "config_sweep.py").is_file()
TEMPLATES = PACKAGE / "templates" if (PACKAGE / "templates").is_dir() else CHECKOUT / "templates"
OBJCACHE = PACKAGE / "objcache.py"          # run by each job's Makefile as a script
IMPORT_ROOT = CHECKOUT                      # the folder that makes `import sweep` work in a job process
WORK_ROOT = CHECKOUT if IN_CHECKOUT else Path.cwd()
JOBS = WORK_ROOT / "jobs"
RESULTS = WORK_ROOT / "results"
SPACES = CHECKOUT / "spaces"
DEFAULT_SPACE = SPACES / "seed.yaml"
