"""The report's "GPU held" row: how the sweep's configurations held the GPU while they measured
(sweep.node.overlap: "exclusive", the whole run; "overlap", only around each program's GPU work)
and what they cost in GPU-seconds (each one's share of the measuring phase's wall time,
sweep.records.gpu_time), with their GPU-busy time where the capture says it, and a warning
when a capture held GPU work outside its token windows (the token missed a call)."""

from __future__ import annotations

import pandas as pd

# sweep.node.overlap.context_mode: how overlap-mode programs created their CUDA contexts
CONTEXTS = {"gate": "created through the node's gate (one at a time, beside other programs' GPU work)",
            "token": "created under the GPU's token", "beside": "created beside other programs' GPU work, no gate"}


def row(done: pd.DataFrame) -> tuple[str, str] | None:
    """("GPU held", text) for the ok configurations, None when no result says its mode."""
    if "gpu_mode" not in done or done["gpu_mode"].dropna().empty:
        return None
    counts = done["gpu_mode"].dropna().value_counts()
    text = ", ".join(f"{mode} ({n})" for mode, n in counts.items())
    if "gpu_contexts" in done and done["gpu_contexts"].notna().any():   # overlap mode's CUDA contexts
        ways = done["gpu_contexts"].dropna().unique()
        text += "; CUDA contexts " + ", ".join(CONTEXTS.get(w, w) for w in ways)
    if "gpu_s" in done and done["gpu_s"].notna().any():
        text += f"; {done['gpu_s'].sum():.1f} GPU-s in all, median {done['gpu_s'].median():.2f} s a configuration"
    if "gpu_busy_s" in done and done["gpu_busy_s"].notna().any():
        text += f" (GPU busy a run: median {done['gpu_busy_s'].median():.2f} s)"
    outside = int(done["gpu_outside"].fillna(0).sum()) if "gpu_outside" in done else 0
    if outside:
        text += (f"; WARNING: {outside} kernel(s)/copies ran outside their program's GPU token: those "
                 "measurements may have shared the GPU; measure again with --no-overlap")
    return "GPU held", text
