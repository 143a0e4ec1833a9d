"""bench/separable.py: two kernels timed apart, searched by one model or a model each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import separable
from bench.cache_spaces import cached_space


def _cache(tmp_path: Path, name: str, times: dict[int, float | str]) -> Path:
    """A one-parameter Kernel Tuner cache: x -> time (ms), or a failure's error string."""
    data = {"tune_params_keys": ["x"], "tune_params": {"x": sorted(times)}, "objective": "time",
            "cache": {str(x): {"x": x, "time": t} for x, t in times.items()}}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def _kernels(tmp_path: Path) -> tuple[separable.Kernel, separable.Kernel]:
    a = _cache(tmp_path, "a", {x: 1.0 + abs(x - 5) for x in range(1, 9)})                  # optimum at 5
    b = _cache(tmp_path, "b", {**{x: 2.0 + x for x in range(1, 9)}, 3: "RuntimeFailedConfig"})   # at 1
    return separable.Kernel(cached_space(str(a)), "a."), separable.Kernel(cached_space(str(b)), "b.")


def test_a_model_each_measures_a_new_point_of_each_kernel_in_every_build_and_tells_each_its_own_time(tmp_path):
    a, b = _kernels(tmp_path)
    ta, tb = separable.run("a model each", a, b, seed=0, budget=8)
    assert len(ta) == len(tb) == 8                       # 8 points each: every one measured once
    failed = [i for i, t in enumerate(tb) if t is None]
    assert len(failed) == 1 and ta[failed[0]] is None    # B's x=3 fails its build: neither kernel is timed
    assert separable.score(tb, 8) == 1.0                 # B's optimum, x=1, was measured


def test_the_joint_search_measures_one_point_of_the_product_a_build_and_a_failure_fails_the_build(tmp_path):
    a, b = _kernels(tmp_path)
    ta, tb = separable.run("joint", a, b, seed=0, budget=20)
    assert len(ta) == len(tb) == 20
    assert all((x is None) == (y is None) for x, y in zip(ta, tb))   # a failed build times neither kernel
    assert separable.score(ta, 20) >= 1.0 and separable.score(tb, 20) >= 1.0


def test_the_bench_prints_a_row_per_strategy_with_a_column_per_budget(tmp_path, capsys):
    a = _cache(tmp_path, "a", {x: 1.0 + abs(x - 5) for x in range(1, 9)})
    b = _cache(tmp_path, "b", {x: 2.0 + x for x in range(1, 9)})
    separable.main([str(a), str(b), "--seeds", "2", "--budgets", "8,4"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("kernel A: a.json, kernel B: b.json; 2 seeds")
    assert out[1].split()[:3] == ["strategy", "@4", "@8"]
    each = next(line for line in out if line.startswith("a model each"))
    assert each.split()[6] == "1.000"                    # @8: both 8-point spaces measured whole


def test_a_missing_file_or_a_bad_budget_is_one_line(tmp_path):
    with pytest.raises(SystemExit) as e:
        separable.main([str(tmp_path / "none.json"), str(tmp_path / "none.json")])
    assert "no such file" in str(e.value)
    with pytest.raises(SystemExit) as e:
        separable.main(["a", "b", "--budgets", "x"])
    assert "comma list of positive integers" in str(e.value)
