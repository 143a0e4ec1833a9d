"""Lockstep on a GPU: programs under the CUPTI library in turn mode take turns, one timed
iteration each, and no kernel of one runs while another has its turn; examples/tiled_gemm
(a program written for the purpose, with NVTX iteration ranges) raced in a sweep."""

from __future__ import annotations

import json
from pathlib import Path

from sweep.decide import certify
from sweep.node import race
from sweep.node.lockstep import Lockstep, Program
from sweep.profile import cupti
from sweep.profile.cupti_file import read_capture

from test_byop_gpu import example_space, run


def lockstep_run(lib: Path, exe: Path, folder: Path, keys: str, turns: int, *args: str) -> dict[str, list]:
    """One lockstep round of tiled_gemm copies (one process per key, `turns` turns each):
    key -> each turn's Measurements."""
    progs = {k: Program(k, (str(exe), "--nvtx", "--iters", "20", "--warmup", "1", *args), lib, folder / k)
             for k in keys}
    with Lockstep(progs, timeout_s=120, turns=turns) as ls:
        taken = ls.round(list(keys))
        return {k: [ls.sample([t]) for t in ts] for k, ts in taken.items()}


def test_programs_in_lockstep_never_run_a_kernel_while_another_has_its_turn(tiled_gemm, tmp_path):
    lib, exe = tiled_gemm
    lockstep_run(lib, exe, tmp_path, "ABC", 6, "--sizes", "512,1024")     # one process each, 6 turns
    spans, windows = [], []
    for k in "ABC":
        (path,) = (tmp_path / k).glob("lockstep_*.txt")
        cap = read_capture(path)
        assert cap.complete and len(cap.turns) == 6, path        # stopped at its 7th iteration's start, flushed
        wall = cap.realtime()
        windows += [(wall(t.go_ns), wall(t.done_ns), k) for t in cap.turns]
        first_go = cap.turns[0].go_ns
        spans += [(wall(x.start), wall(x.end), k) for x in cap.kernels if x.start >= first_go]
    windows.sort()
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:]))            # one turn at a time
    assert len(spans) == 3 * 6 * 2                                           # two sizes a turn, nothing else
    for start, end, k in spans:                                              # each kernel inside a turn of its own
        assert any(w0 <= start and end <= w1 and wk == k for w0, w1, wk in windows), (start, end, k)


def test_a_turn_measures_what_the_nvtx_iteration_it_was_measures(tiled_gemm, tmp_path):
    lib, exe = tiled_gemm
    turns = lockstep_run(lib, exe, tmp_path, "AB", 5)
    for k in "AB":
        (path,) = (tmp_path / k).glob("lockstep_*.txt")
        parsed = cupti.parse(path)                  # the backend's own attribution, by NVTX range
        assert parsed.iterations == 5 and parsed.unclosed_ranges == 1
        by_shape = {m.grid: m.iter_total_ns for m in parsed.measurements}
        for i, ms in enumerate(turns[k]):
            assert {m.grid: m.iter_total_ns[0] for m in ms} == {g: v[i] for g, v in by_shape.items()}


def test_a_sweep_of_the_example_races_its_picks_in_lockstep(tmp_path, sweep_roots):
    s = run(example_space(tmp_path, "byop-lockstep", rows=[[64, 64, 16, 4, 4], [32, 32, 8, 4, 4], [64, 64, 8, 4, 4]],
                          run={"warmup": 2, "iterations": 20}, certify={"budget_s": 30}), sweep_roots)
    out = certify.latest_outcome(s.sweep_dir)
    assert out["mode"] == "lockstep" and "fallback" not in out
    (choice,) = s.best.choices
    cert = choice.certification
    assert cert is not None and cert.rounds >= 5 and out["gpu_s"] < 40
    assert out["turns"] % 3 == 0 and out["runs"] >= out["turns"] // 3 >= 2 * cert.rounds    # a process a round
    race_json = json.loads(next(s.sweep_dir.glob(f"{certify.RACES}/*/{race.OUTCOME}")).read_text())
    assert race_json["lanes"][0]["result"]["rounds"] == choice.certification.rounds
