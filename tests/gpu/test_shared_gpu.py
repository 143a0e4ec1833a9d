"""Another process on the measuring GPU, for real: a CUDA program nobody in the sweep started
(a context, a kernel every 0.1 s) is seen through NVML's process list while a configuration
measures, the measurement is repeated and result.json's env["gpu_shared"] names its pid;
without it, no measurement says the GPU was shared (the sweep's own programs, in overlap
mode several at once, are never taken for strangers)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.gpu.test_byop_gpu import ROWS, example_space, run

pytest.importorskip("pynvml", reason="NVML's Python binding (nvidia-ml-py) is not installed")

# A stranger on the GPU: it holds a context and keeps using it until it is killed.
STRANGER = r"""
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void touch(float* x) { x[threadIdx.x] += 1.0f; }
int main(int argc, char** argv) {
    int seconds = argc > 1 ? atoi(argv[1]) : 60;
    float* x = nullptr;
    if (cudaMalloc(&x, 256 * sizeof(float)) != cudaSuccess) return 1;
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < seconds * 10; ++i) {
        touch<<<1, 256>>>(x);
        cudaDeviceSynchronize();
        usleep(100000);
    }
    return 0;
}
"""


@pytest.fixture
def stranger(tmp_path, monkeypatch):
    """The stranger and the sweep on one GPU: on a machine of several, the sweep would measure
    some configurations on a GPU the stranger never touched."""
    from sweep.node.build import detect_arch

    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", first)

    src = tmp_path / "stranger.cu"
    src.write_text(STRANGER)
    exe = tmp_path / "stranger"
    arch = detect_arch().split()[0]
    p = subprocess.run(["nvcc", "-O2", f"-arch={arch}", str(src), "-o", str(exe)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    proc = subprocess.Popen([str(exe), "120"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def shared_notes(sweep_dir: Path) -> dict[str, dict]:
    out = {}
    for result in sweep_dir.glob("*/result.json"):
        r = json.loads(result.read_text())
        if "gpu_shared" in r.get("env", {}):
            out[result.parent.name] = r["env"]["gpu_shared"]
    return out


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "exclusive"])
def test_a_measurement_beside_a_foreign_cuda_process_is_repeated_and_names_its_pid(tmp_path, sweep_roots, stranger,
                                                                                    overlap):
    space = example_space(tmp_path, f"shared-{'overlap' if overlap else 'exclusive'}", rows=ROWS[:2],
                          profile={"backend": "cupti", "overlap": overlap})
    s = run(space, sweep_roots, confirm=False, certify=False)
    assert s.counts == {"ok": 2}
    notes = shared_notes(s.sweep_dir)
    assert len(notes) == 2, f"expected both jobs to have seen pid {stranger.pid}: {notes}"
    for tag, note in notes.items():
        assert note["repeated"] is True, tag
        assert stranger.pid in note["pids"], f"{tag}: NVML listed {note['pids']}, not the stranger {stranger.pid}"


def test_concurrent_measurements_of_one_sweep_alone_on_the_gpu_are_never_flagged_as_shared(tmp_path, sweep_roots):
    # Overlap mode (cupti, one GPU: the default) runs several of these programs on the GPU at once.
    space = example_space(tmp_path, "alone-overlap", profile={"backend": "cupti"})
    s = run(space, sweep_roots, confirm=False, certify=False)
    assert s.counts == {"ok": len(ROWS)}
    assert shared_notes(s.sweep_dir) == {}
    modes = {json.loads(r.read_text())["env"].get("gpu_mode") for r in s.sweep_dir.glob("*/result.json")}
    assert modes == {"overlap"}


def overlap_sweep_captures(tmp_path, sweep_roots, name: str) -> list:
    """An overlap-mode sweep whose jobs measured at the same time, with the checks of issue 34's
    exclusion on the GPU's own timeline: no kernel, copy or memset of one program ran while
    another's did, and every one ran inside its token window. Its captures."""
    from itertools import combinations

    from sweep.profile.cupti import CAPTURE_FILE
    from sweep.profile.cupti_file import read_capture
    from sweep.profile.cupti_tokens import cross_overlaps, outside

    space = example_space(tmp_path, name, profile={"backend": "cupti"})
    s = run(space, sweep_roots, confirm=False, certify=False)
    assert s.counts == {"ok": len(ROWS)}
    spans, gpu_of = [], {}   # the exclusion is per GPU: on a machine of several, jobs on two GPUs overlap
    for result in s.sweep_dir.glob("*/result.json"):
        r = json.loads(result.read_text())
        gpu_of[result.parent.name] = r["env"].get("gpu_uuid", "")
        spans.append((gpu_of[result.parent.name], *r["intervals"]["gpu"][:2]))
    concurrent = sum(1 for (g, a0, a1), (h, b0, b1) in combinations(spans, 2) if g == h and a0 < b1 and b0 < a1)
    assert concurrent > 0, f"no two jobs measured at once on one GPU, nothing was checked: {spans}"
    paths = sorted(s.sweep_dir.rglob(CAPTURE_FILE))
    caps = [read_capture(p) for p in paths]
    gpus = [gpu_of.get(p.relative_to(s.sweep_dir).parts[0], "") for p in paths]
    assert len(caps) >= len(ROWS)
    assert all(c.tokens for c in caps), "a capture without token windows: overlap mode did not run"
    assert sum(len(outside(c)) for c in caps) == 0
    crossing = [(i, j, cross_overlaps(a, b)) for (i, a), (j, b) in combinations(enumerate(caps), 2)
                if gpus[i] == gpus[j]]
    assert [x for x in crossing if x[2]] == []
    return caps


def test_overlapping_jobs_gpu_work_never_overlaps_on_the_cupti_timelines_of_both(tmp_path, sweep_roots, monkeypatch):
    """Issue 34's exclusion, checked on the GPU's own timeline (overlap_sweep_captures); with
    SWEEP_GPU_TOKEN_CONTEXT=1 each program creates its context under the token."""
    monkeypatch.setenv("SWEEP_GPU_TOKEN_CONTEXT", "1")
    caps = overlap_sweep_captures(tmp_path, sweep_roots, "timelines-overlap")
    inside = [any(w.acquired <= c.start and c.end <= w.released for w in cap.tokens) for cap in caps
              for c in cap.contexts]
    assert inside and all(inside)


def test_by_default_contexts_are_made_through_the_gate_one_at_a_time_outside_the_token(tmp_path, sweep_roots,
                                                                                      monkeypatch):
    """The default (SWEEP_GPU_TOKEN_CONTEXT=gate): each program creates its context beside the
    others' GPU work, holding no token, but one at a time on the node; their GPU work is still
    excluded."""
    monkeypatch.delenv("SWEEP_GPU_TOKEN_CONTEXT", raising=False)
    caps = overlap_sweep_captures(tmp_path, sweep_roots, "timelines-gate")
    made = []
    for cap in caps:
        to_wall = cap.realtime()
        assert to_wall is not None
        for c in cap.contexts:
            assert not any(w.acquired <= c.start and c.end <= w.released for w in cap.tokens)
            made.append((to_wall(c.start), to_wall(c.end)))
    made.sort()
    assert len(made) >= len(ROWS)
    slack_ns = 1_000_000       # the two clocks' mapping: well under a context's 0.1-0.3 s
    assert all(b0 >= a1 - slack_ns for (_, a1), (b0, _) in zip(made, made[1:])), made
    # the gate's lock is the host's own, beside the GPUs' (a shared lock folder keeps nodes apart)
    assert (Path(os.environ["SWEEP_LOCK_DIR"]) / f"cuda-contexts.{socket.gethostname()}.lock").is_file()
