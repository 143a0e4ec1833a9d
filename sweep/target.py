"""Targets: the embedded GPT-2 engine, and what identifies any target's sources.

The engine is an instance of the generic target contract (see space.Target):
its Makefile (kernels/Makefile) takes CONF_DIR, BUILD_DIR, NVCC, ARCH and
NVCCFLAGS; it verifies with gpt2_verify (logits against transformers, every
matmul/fusion/attention path) and gpt2_generate --check (the KV-cache decoding
path, token for token), and it is timed by gpt2_forward, which prints the
engine-timing/1 JSON with --kernel-timing.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any, Mapping

from sweep import space as space_mod
from sweep.errors import SweepError

ROOT = Path(__file__).resolve().parents[1]
ENGINE_DIR = ROOT / "kernels"
DEFAULT_SPACE = ROOT / "spaces" / "seed.yaml"
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".c")
MAX_DIGEST_BYTES = 64 << 20


def engine_target(model: Mapping[str, Any] | None = None) -> space_mod.Target:
    model = dict(model or {})
    model.setdefault("preset", "124M")
    model.setdefault("seed", 0)
    return space_mod.Target(
        name="gpt2-engine",
        source_dir=ENGINE_DIR,
        verify=(
            ("{build}/gpt2_verify", "--weights", "{weights}", "--ref", "{reference}"),
            ("{build}/gpt2_generate", "--weights", "{weights}", "--ref", "{reference}", "--check", "--repeats", "1"),
        ),
        profile=("{build}/gpt2_forward", "--weights", "{weights}", "-b", "{batch}", "-t", "{seq_len}",
                 "-n", "{iterations}", "-w", "{warmup}", "{args}"),
        events=("--kernel-timing", "--json", "{events_json}"),
        model=model,
    )


def load(path: Path | str) -> space_mod.Space:
    """Load a space file, with the embedded engine available as `target: engine`."""
    return space_mod.load_space(path, engine_target=engine_target)


def source_digest(target: space_mod.Target) -> str:
    """sha256 over the target's source files (and Makefile): results measured on
    other sources are not reused."""
    h = hashlib.sha256()
    total = 0
    files = sorted(p for p in target.source_dir.rglob("*")
                   if p.is_file() and (p.suffix in SOURCE_SUFFIXES or p.name == "Makefile"))
    for p in files:
        data = p.read_bytes()
        total += len(data)
        if total > MAX_DIGEST_BYTES:
            raise SweepError(f"target {target.source_dir} holds over {MAX_DIGEST_BYTES >> 20} MiB of sources; "
                             "point the target's dir at the folder with the kernels and their Makefile")
        h.update(str(p.relative_to(target.source_dir)).encode() + b"\0" + data)
    return h.hexdigest()[:16]


def commit(path: Path) -> str:
    """The git commit of `path` (with -dirty when modified), or 'unknown' outside git."""
    try:
        rev = subprocess.run(["git", "-C", str(path), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        if rev.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no", "."],
                               capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
