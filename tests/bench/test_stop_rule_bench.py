"""bench/stop_rule.py: where the learning strategy's stop by itself would have ended a replayed run,
and what that cost against the same run carried on to the budget."""

from __future__ import annotations

from pathlib import Path

from bench import stop_rule

SPACE = Path(__file__).resolve().parents[1] / "data" / "benchmark_spaces" / "convolution_A4000.json.gz"


def test_the_stop_is_read_off_the_told_times_failures_counting_as_evaluations():
    assert stop_rule.stop_at([2.0] * 100, 20) == 21                  # 20 held after the first
    assert stop_rule.stop_at([2.0, None] + [2.0] * 98, 20) == 21
    gaining = [2.0 * 0.99 ** i for i in range(50)]                   # 1% better each time, to the 50th
    assert stop_rule.stop_at(gaining + gaining[-1:] * 60, 20) == 100        # 50 held of 100: half of all
    assert stop_rule.stop_at([2.0] * 100, 0) is None


def test_a_run_that_gains_after_the_stop_counts_as_ended_short_by_that_gain():
    flat = [2.0] * 100
    late = [2.0] * 60 + [1.9] * 40                                   # 5% better at evaluation 61
    lines = stop_rule.table([("a.json", 0, flat), ("a.json", 1, late)], [20], [50, 100])
    rows = {tuple(line.split()[1:3]): line.split() for line in lines[1:]}
    assert rows[("20", "50")][3:8] == ["2", "of", "2", "29.0", "0"]   # both stop at 21: nothing lost by 50
    assert rows[("20", "100")][3:9] == ["2", "of", "2", "79.0", "1", "5.3%"]


def test_the_bench_replays_a_cache_file_and_prints_a_row_per_patience_and_budget(capsys):
    assert stop_rule.main(["--spaces", str(SPACE), "--seeds", "2", "--patience", "0,10", "--budgets", "20,30"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("2 runs of up to 30 evaluations, each result told before the next ask")
    assert [line.split()[1:3] for line in out[2:]] == [["0", "20"], ["0", "30"], ["10", "20"], ["10", "30"]]
    assert out[2].split()[3:5] == ["0", "of"]                       # patience 0 never stops
