"""bench/overlap_check.py: the comparison of the two modes prints and returns its figures (a GPU run
once lost them to a KeyError in the printing); the sweeps themselves need a GPU and are stubbed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import bench.overlap_check as oc  # noqa: E402
import agreement  # noqa: E402  (bench/agreement.py, as bench/overlap_check.py imports it)


def test_the_comparison_prints_and_returns_each_modes_ratio_medians_picks_and_repeats_at_once(monkeypatch, tmp_path,
                                                                                           capsys):
    def sweep_mode(space, mode, *args):   # 1.0 s of GPU-busy time in both modes
        rows = [{"tag": "T32", "status": "ok", "repeats_at_once": mode == "overlap", "interval": [0, 1],
                 "dir": str(tmp_path), "busy_s": 1.0, "runs": 5, "outside": 0, "mode": mode}]
        wall = 20.0 if mode == "exclusive" else 4.0
        return {"name": mode, "sweep": "s", "jobs": 1, "statuses": {"ok": 1}, "measure_wall_s": wall,
                "wall_per_config_s": wall, "busy_per_config_s": 1.0, "ratio": wall, "rows": rows,
                "results": str(tmp_path / mode)}

    index = pd.MultiIndex.from_tuples([(32, "k", "4x4x1", "32x1x1"), (32, "k", "64x64x1", "32x1x1")],
                                      names=["T", "kernel", "grid", "block"])
    times = {"overlap": [1000.0, 10500.0], "exclusive": [1000.0, 10000.0]}
    monkeypatch.setattr(oc, "sweep_mode", sweep_mode)
    monkeypatch.setattr(agreement, "medians", lambda results: pd.DataFrame(
        {"median_ns": times[Path(results).name], "noise": [0.002, 0.002]}, index=index))
    monkeypatch.setattr(agreement, "picks", lambda results: {"T": 32})
    monkeypatch.setattr(oc, "keep_pairs", lambda *args: ["T32"])
    monkeypatch.setattr(oc, "token_check", lambda rows: {"captures": 1, "outside_token": 0,
                                                         "cross_process_overlaps": 0, "windows": 3})
    space = tmp_path / "space.yaml"
    space.write_text("name: hh\n")
    r = oc.compare(space, 1, 4, tmp_path, tmp_path, tmp_path / "lock", tmp_path)
    out = capsys.readouterr().out
    assert "= 4.00x (target <= 1.5x); jobs whose repeats ran at once: 1/1" in out
    assert "= 20.00x; jobs whose repeats ran at once: 0/1" in out
    assert "exclusive GPU-busy per configuration = 4.00x" in out
    assert "(+5.00%, allowed 1.00%)  <-- differs" in out and "1/2 within max(1%, noise)" in out
    assert r["modes"]["overlap"]["repeats_at_once"] == 1 and "rows" not in r["modes"]["overlap"]
    assert r["medians"]["same"] == 1 and r["picks"]["same"]
    json.dumps(r, default=str)      # what main() writes
