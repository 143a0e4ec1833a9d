"""Overlap mode's evidence from captures (sweep/profile/cupti_tokens.py), on synthetic
sweep-cupti/2 files: every kernel, copy and memset inside a token window, GPU-busy time,
and GPU work of two processes that overlapped on the wall clock."""

from __future__ import annotations

import json
from pathlib import Path

from sweep.profile import cupti
from sweep.profile.cupti_file import read_capture
from sweep.profile.cupti_parse import parse
from sweep.core.spans import covered
from sweep.profile.cupti_tokens import cross_overlaps, gpu_spans, outside, summary


def capture(path: Path, *, kernels=(), copies=(), tokens=(), contexts=(), wall_offset: int = 0) -> Path:
    """A capture with kernels (start, end), copies (kind, start, end), token windows and context
    creations (start, end); its CUPTI clock reads the wall clock minus `wall_offset`."""
    lines = ["sweep-cupti/2\tpid=7\tcupti_api=1\tstart_ns=0\texe=/x",
             f"clock\t1000\t{1000 + wall_offset}", "name\t0\t_Z1kv\tk()"]
    lines += ["ctx\t" + "\t".join(map(str, c)) for c in contexts]      # (start, end[, requested])
    lines += [f"kern\t{n}\t{a}\t{b}\t0\t1\t7\t1\t1\t1\t32\t1\t1\t16\t0\t0\t0\t0" for n, (a, b) in enumerate(kernels, 1)]
    lines += [f"copy\t{kind}\t{n}\t{a}\t{b}\t0\t1\t7\t4096" for n, (kind, a, b) in enumerate(copies, 100)]
    lines += ["tok\t" + "\t".join(map(str, t)) for t in tokens]      # (acquired, released[, requested])
    lines += [f"clock\t2000000000\t{2000000000 + wall_offset}", "end\tkernels=1\tcalls=0\tmarks=0\tdropped=0\tfails=0"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_work_inside_the_token_windows_is_not_outside(tmp_path):
    cap = read_capture(capture(tmp_path / "c.txt", kernels=[(100, 200), (300, 400)], copies=[("M", 310, 320)],
                               tokens=[(90, 250), (290, 450)]))
    assert outside(cap) == []
    assert summary(cap)["outside"] == 0 and summary(cap)["windows"] == 2


def test_a_kernel_or_copy_past_its_window_is_outside_and_named(tmp_path):
    cap = read_capture(capture(tmp_path / "c.txt", kernels=[(100, 260)], copies=[("S", 500, 510)],
                               tokens=[(90, 250)]))
    assert [what for *_, what in outside(cap)] == ["kernel k", "memset"]
    assert summary(cap)["outside"] == 2 and summary(cap)["outside_first"] == "kernel k"


def test_gpu_busy_time_merges_overlapping_work_and_adds_context_creation(tmp_path):
    us = 1000
    cap = read_capture(capture(tmp_path / "c.txt", kernels=[(100 * us, 200 * us), (150 * us, 300 * us)],
                               copies=[("M", 400 * us, 450 * us)], contexts=[(0, 1000 * us)]))
    assert covered([(100, 200), (150, 300), (400, 450)]) == 250
    assert summary(cap) == {"busy_s": 0.00125, "context_s": 0.001}


def test_an_exclusive_capture_says_nothing_of_windows(tmp_path):
    cap = read_capture(capture(tmp_path / "c.txt", kernels=[(100, 200)]))
    assert "windows" not in summary(cap) and "outside" not in summary(cap)


def test_the_parse_carries_the_gpu_summary_for_result_json(tmp_path):
    parsed = parse(capture(tmp_path / "c.txt", kernels=[(100, 200)], tokens=[(50, 250)]))
    assert parsed.gpu_use["windows"] == 1 and parsed.gpu_use["outside"] == 0


def test_two_processes_whose_gpu_work_interleaves_do_not_overlap(tmp_path):
    a = read_capture(capture(tmp_path / "a.txt", kernels=[(100, 200), (500, 600)]))
    b = read_capture(capture(tmp_path / "b.txt", kernels=[(250, 450), (700, 800)]))
    assert cross_overlaps(a, b) == [] and cross_overlaps(b, a) == []


def test_overlapping_work_is_found_on_the_wall_clock_not_on_each_cupti_clock(tmp_path):
    # b's CUPTI clock runs 1000 ns behind the wall clock: its kernel at CUPTI 1100-1200 ran at wall 100-200
    a = read_capture(capture(tmp_path / "a.txt", kernels=[(150, 160)]))
    b = read_capture(capture(tmp_path / "b.txt", kernels=[(1100, 1200)], wall_offset=-1000))
    assert [(x[2], y[2]) for x, y in cross_overlaps(a, b)] == [("kernel k", "kernel k")]
    apart = read_capture(capture(tmp_path / "c.txt", kernels=[(150, 160)], wall_offset=-1000))
    assert cross_overlaps(a, apart) == []


def fake_library(tmp_path: Path) -> Path:
    lib = tmp_path / "libsweep_cupti-x.so"
    lib.write_bytes(b"")
    lib.with_suffix(".json").write_text(json.dumps({"cupti_lib_dir": "/cuda/lib", "libcupti": "/cuda/lib/libcupti.so"}))
    return lib


def test_overlap_mode_gives_the_program_its_gpus_lock_file_as_the_token(tmp_path):
    lib = fake_library(tmp_path)
    env = cupti.environment(lib, tmp_path / "out.txt", base={}, token=tmp_path / "GPU-1.lock")
    assert env["SWEEP_GPU_TOKEN"] == str(tmp_path / "GPU-1.lock") and env["SWEEP_CUPTI_OUT"] == str(tmp_path / "out.txt")
    assert "SWEEP_GPU_TOKEN" not in cupti.environment(lib, tmp_path / "out.txt", base={})


def test_token_only_mode_records_nothing(tmp_path):
    env = cupti.environment(fake_library(tmp_path), None, base={}, token="/locks/gpu0.lock")
    assert "SWEEP_CUPTI_OUT" not in env and env["SWEEP_GPU_TOKEN"] == "/locks/gpu0.lock"


def test_the_backends_invocation_carries_the_requests_token(tmp_path, monkeypatch):
    from sweep.profile.base import Request

    monkeypatch.setattr(cupti, "_library_for", lambda req: fake_library(tmp_path))
    req = Request(tmp_path, lambda extra=(), iterations=None: ["prog"], gpu_token=tmp_path / "g.lock")
    assert cupti.BACKEND.invocation(req).env["SWEEP_GPU_TOKEN"] == str(tmp_path / "g.lock")
    req = Request(tmp_path, lambda extra=(), iterations=None: ["prog"])
    assert "SWEEP_GPU_TOKEN" not in cupti.BACKEND.invocation(req).env


H200 = Path(__file__).resolve().parents[1] / "data" / "h200"


def _inside_a_window(cap, start: int, end: int) -> bool:
    return any(w.acquired <= start and end <= w.released for w in cap.tokens)


def test_with_SWEEP_GPU_TOKEN_CONTEXT_1_a_real_programs_context_creation_runs_inside_a_token_window():
    cap = read_capture(H200 / "overlap" / "host-heavy" / "overlap" / "T32x8_P0_U0.txt")
    assert cap.contexts and all(_inside_a_window(cap, c.start, c.end) for c in cap.contexts)
    assert outside(cap) == []


def test_with_SWEEP_GPU_TOKEN_CONTEXT_0_the_context_is_created_outside_every_window_and_still_counted_busy():
    cap = read_capture(H200 / "context_token" / "host-heavy_T32x8_P0_U0_context_outside.txt")
    assert cap.contexts and not any(_inside_a_window(cap, c.start, c.end) for c in cap.contexts)
    assert outside(cap) == []            # the GPU work itself still all ran under the token
    s = summary(cap)
    assert s["context_s"] > 1.0 and s["busy_s"] > s["context_s"]


def test_through_the_gate_the_default_real_contexts_never_overlap_and_none_is_made_under_a_token():
    """host_heavy's programs on one H200 (tests/data/h200/context_token/README.md): thirteen contexts
    made back to back, each holding no token, some beside another program's GPU work."""
    caps = [read_capture(p) for p in sorted((H200 / "context_token" / "gate").glob("*.txt"))]
    assert len(caps) == 13
    made, work = [], []
    for n, cap in enumerate(caps):
        to_wall = cap.realtime()
        assert outside(cap) == [] and cap.contexts
        assert not any(_inside_a_window(cap, c.start, c.end) for c in cap.contexts)
        made += [(to_wall(c.start), to_wall(c.end), n) for c in cap.contexts]
        work += [(to_wall(a), to_wall(b), n) for a, b, _ in gpu_spans(cap)]
    made.sort()
    slack_ns = 1_000_000       # the clocks' mapping: well under a context's 0.2-0.4 s
    assert all(b0 >= a1 - slack_ns for (_, a1, _), (b0, _, _) in zip(made, made[1:]))
    beside = [c for c in made if any(w0 < c[1] and c[0] < w1 and m != c[2] for w0, w1, m in work)]
    assert len(beside) >= 5
    assert all(not cross_overlaps(a, b) for i, a in enumerate(caps) for b in caps[i + 1:])


def test_a_runs_wait_for_the_context_gate_is_added_to_its_token_waits(tmp_path):
    cap = read_capture(capture(tmp_path / "gate.txt", contexts=[(500000000, 700000000, 200000000)],
                               tokens=[(1000000000, 1100000000, 900000000)]))
    assert cap.contexts[0].requested == 200000000
    s = summary(cap)
    assert s["wait_s"] == 0.4 and s["context_s"] == 0.2
    old = read_capture(capture(tmp_path / "old.txt", contexts=[(500000000, 700000000)],
                               tokens=[(1000000000, 1100000000, 900000000)]))
    assert old.contexts[0].requested is None and summary(old)["wait_s"] == 0.1


def test_a_runs_waits_for_the_token_are_summed_from_its_windows_and_unknown_from_an_older_library(tmp_path):
    cap = read_capture(capture(tmp_path / "new.txt", tokens=[(1000000000, 1100000000, 400000000),
                                                             (2000000000, 2050000000, 2000000000)]))
    assert [w.requested for w in cap.tokens] == [400000000, 2000000000]
    assert summary(cap)["wait_s"] == 0.6
    old = read_capture(capture(tmp_path / "old.txt", tokens=[(1000000000, 1100000000)]))
    assert old.tokens[0].requested is None and "wait_s" not in summary(old)
