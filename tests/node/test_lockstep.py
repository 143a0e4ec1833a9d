"""Lockstep races (sweep.node.lockstep) on CPU: the coordinator's side of the turn protocol, driven
against tests/data/fakes/turn_program.py, which speaks the injection library's side of it
(cupti_inject.cpp, turn mode) and writes what the library writes. The library itself takes
turns on the H100 in tests/gpu/test_lockstep_gpu.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.node import clocks, race
from sweep.core.errors import SweepError
from sweep.node.lockstep import Lockstep, LockstepUnavailable, Program
from sweep.profile import cupti
from sweep.profile.cupti_file import Follower, read_capture
from sweep.stats import Entrant

FAKE = Path(__file__).resolve().parents[1] / "data" / "fakes" / "turn_program.py"
H100 = Path(__file__).resolve().parents[1] / "data" / "h100" / "lockstep"      # a real round (README there)


@pytest.fixture
def library(tmp_path) -> Path:
    """A stand-in for the injection library: environment() needs its facts file beside it."""
    lib = tmp_path / "libsweep_cupti-fake.so"
    lib.write_bytes(b"")
    lib.with_suffix(".json").write_text('{"cupti_lib_dir": "/nowhere", "libcupti": "/nowhere/libcupti.so"}')
    return lib


def program(tmp_path: Path, library: Path, key: str, *args: str) -> Program:
    return Program(key, (str(FAKE), *args), library, tmp_path / key)


def programs(tmp_path, library, **args_by_key) -> dict[str, Program]:
    return {k: program(tmp_path, library, k, *a) for k, a in args_by_key.items()}


def test_a_follower_reads_whole_lines_as_the_capture_grows(tmp_path):
    cap = tmp_path / "c.txt"
    cap.write_text("sweep-cupti/2\tpid=1\n" "clock\t100\t5000\n" "name\t0\t_Z1kv\tvoid k()\n" "kern\t1\t1")
    f = Follower(cap)
    f.poll()
    assert f.records.clock_pairs[0].realtime_ns == 5000 and not f.records.kernels     # the torn line waits
    with open(cap, "a") as out:
        out.write("10\t120\t0\t1\t7\t1\t1\t1\t32\t1\t1\t16\t0\t0\t0\t0\n" "turn\t0\t105\t130\n")
    f.poll()
    assert [k.start for k in f.records.kernels] == [110] and f.records.turns[0].done_ns == 130


def test_a_follower_refuses_a_file_that_is_not_a_capture(tmp_path):
    cap = tmp_path / "c.txt"
    cap.write_text("hello\n")
    with pytest.raises(SweepError, match="not a capture"):
        Follower(cap).poll()


def test_the_h100_round_took_its_turns_one_at_a_time_each_holding_its_nvtx_iteration():
    windows = []
    for k in "ab":
        path = H100 / f"gemm_{k}_turns.txt"
        cap = read_capture(path)
        assert cap.complete and [t.index for t in cap.turns] == list(range(6))
        wall = cap.realtime()
        windows += [(wall(t.go_ns), wall(t.done_ns), k) for t in cap.turns]
        per_turn = [{"x".join(map(str, x.grid)): x.end - x.start for x in cap.kernels if t.go_ns <= x.start < x.end <= t.done_ns}
                    for t in cap.turns]
        parsed = cupti.parse(path)          # the backend's own attribution, by NVTX range
        assert parsed.iterations == 6 and parsed.unclosed_ranges == 1     # stopped at its 7th iteration's start
        for m in parsed.measurements:
            assert [turn["x".join(map(str, m.grid))] for turn in per_turn] == list(m.iter_total_ns)
    windows.sort()
    assert "".join(k for *_, k in windows) == "ab" * 6 and all(a[1] <= b[0] for a, b in zip(windows, windows[1:]))


def test_a_round_recorded_on_the_h100_reads_back_turn_by_turn_as_the_coordinator_read_it(tmp_path, library):
    seen = {(x["key"], x["index"]): x["ns"] for x in json.loads((H100 / "turns.json").read_text())}
    ps = programs(tmp_path, library, **{k: ("--replay", str(H100 / f"gemm_{k}_turns.txt")) for k in "ab"})
    with Lockstep(ps, timeout_s=30, turns=6) as ls:
        turns = ls.round(["a", "b"])
        got = {(t.key, t.index): {"x".join(map(str, m.grid)): m.iter_total_ns[0] for m in ls.sample([t])}
               for ts in turns.values() for t in ts}
    assert got == seen and len(got) == 12


def test_a_round_is_a_fresh_process_of_each_program_taking_its_turns_pass_after_pass(tmp_path, library):
    log = tmp_path / "turns.log"
    ps = programs(tmp_path, library, **{k: ("--iterations", "3", "--turn-log", str(log), "--kernel", "k=200000")
                                        for k in "ABC"})
    with Lockstep(ps, timeout_s=30, turns=2, max_processes=6) as ls:
        rounds = [ls.round(race.rotated(list("ABC"), r), rounds_left=3 - r) for r in range(3)]
        got = {k: ls.sample(turns) for r in rounds for k, turns in r.items()}
        assert ls.batches == 2 and ls.starts == 9 and len(ls.start_s) == 2   # rounds 0-1 together, then 2
    for r, turns in enumerate(rounds):
        assert list(turns) == race.rotated(list("ABC"), r)
        assert all([t.index for t in ts] == [0, 1] for ts in turns.values())
        assert len({t.start for ts in turns.values() for t in ts}) == 3      # one process each
    assert len({t.start for r in rounds for ts in r.values() for t in ts}) == 9
    by_time = sorted((t.go_ns, t.key) for t in (x for r in rounds for ts in r.values() for x in ts))
    assert [k for _, k in by_time[:6]] == list("ABCABC")                      # pass after pass
    spans = sorted(tuple(map(int, line.split()[1:])) for line in log.read_text().splitlines())
    assert len(spans) == 18 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))   # never two at once
    assert all(len(ms) == 1 and len(ms[0].iter_total_ns) == 2 and ms[0].iter_total_ns[0] >= 200000
               for ms in got.values())
    assert not ls.done and not ls.waiting          # every process ended with the block


def test_a_sample_counts_only_the_kernels_that_ran_in_its_turns(tmp_path, library):
    ps = programs(tmp_path, library, A=("--kernel", "k=50000", "--kernel", "j=20000"),
                  B=("--kernel", "k=50000", "--kernel", "j=20000", "--scale", "2"))
    with Lockstep(ps, timeout_s=30, turns=3) as ls:
        turns = ls.round(["A", "B"])
        a = {m.kernel: m for m in ls.sample(turns["A"])}
        b = {m.kernel: m for m in ls.sample(turns["B"])}
    assert set(a) == set(b) == {"k", "j"} and all(m.calls == 1 and len(m.iter_total_ns) == 3 for m in a.values())
    assert b["k"].total_median_ns == pytest.approx(2 * a["k"].total_median_ns, rel=0.01)
    assert a["j"].total_median_ns == pytest.approx(20000, rel=0.01)
    assert all(x.window[0] < x.window[1] for x in turns["A"] + turns["B"])


def test_kernels_a_process_holds_back_are_read_once_it_flushes(tmp_path, library):
    ps = programs(tmp_path, library, A=("--kernel", "k=50000"))
    with Lockstep(ps, timeout_s=30, turns=2) as ls:
        turns = ls.round(["A"])["A"]
        capture = ls.started[turns[0].start].capture
        assert "kern" not in capture.read_text()           # CUPTI holds them until asked
        (m,) = ls.sample(turns)
        assert capture.read_text().count("\nkern") == 2 and m.total_median_ns >= 50000


def test_a_program_of_fewer_iterations_than_turns_gives_what_it_ran(tmp_path, library):
    ps = programs(tmp_path, library, A=("--iterations", "1"), B=("--iterations", "5"))
    with Lockstep(ps, timeout_s=30, turns=3) as ls:
        turns = ls.round(["A", "B"])
        assert [len(turns["A"]), len(turns["B"])] == [1, 3]
        assert len(ls.sample(turns["A"])[0].iter_total_ns) == 1


def test_processes_of_a_program_no_longer_raced_are_stopped_with_their_batch(tmp_path, library):
    ps = programs(tmp_path, library, A=(), B=())
    with Lockstep(ps, timeout_s=30, max_processes=4) as ls:
        ls.round(["A", "B"], rounds_left=5)                       # a batch of two rounds
        spare_b = ls.waiting["B"][0]
        ls.round(["A"], rounds_left=4)
        ls.round(["A"], rounds_left=3)                            # a new batch: B's spare process ends
        assert spare_b.ended and spare_b.proc.returncode == 0 and "B" not in ls.waiting
        assert spare_b.capture.read_text().splitlines()[-1].startswith("end")


def test_a_program_without_an_iteration_range_cannot_take_turns(tmp_path, library):
    ps = programs(tmp_path, library, A=(), B=("--no-range",))
    with pytest.raises(LockstepUnavailable, match=r"B: turn_program.py ended \(exit 0\) before it opened an NVTX"):
        with Lockstep(ps, timeout_s=30) as ls:
            ls.round(["A", "B"])
    assert not ls.waiting and all(p.ended for p in ls.started)


def test_a_batch_too_large_for_the_gpu_is_started_again_as_one_round(tmp_path, library):
    alive = tmp_path / "alive"
    alive.mkdir()
    ps = programs(tmp_path, library, **{k: ("--max-alive", "3", "--alive-dir", str(alive)) for k in "AB"})
    with Lockstep(ps, timeout_s=30, max_processes=8) as ls:
        ls.round(["A", "B"], rounds_left=10)        # 4 rounds of 2 do not fit; 1 round does
        assert ls.batches == 1 and ls.starts == 8 + 2 and not ls.waiting.get("A")


def test_the_librarys_error_ends_lockstep_with_its_words(tmp_path, library):
    ps = programs(tmp_path, library, A=("--error", "no current CUDA context on the thread"))
    with pytest.raises(LockstepUnavailable, match="A: no current CUDA context on the thread"):
        with Lockstep(ps, timeout_s=30) as ls:
            ls.round(["A"])


def test_a_program_that_dies_in_its_turn_fails_the_race_naming_it(tmp_path, library):
    ps = programs(tmp_path, library, A=(), B=("--crash-in", "1"))
    with pytest.raises(SweepError, match=r"B: .*ended during its timed iteration in the race \(exit 3"):
        with Lockstep(ps, timeout_s=30, turns=3) as ls:
            ls.round(["A", "B"])


def test_a_program_that_hangs_before_its_first_turn_ends_at_the_time_limit(tmp_path, library):
    ps = programs(tmp_path, library, A=("--startup-s", "30"))
    with pytest.raises(SweepError, match="no word from turn_program.py in turn mode before the job's time limit"):
        with Lockstep(ps, timeout_s=0.5) as ls:
            ls.round(["A"])


class Clock:
    """A clock reader whose SM clock reads under the threshold while `low()` says so."""

    def __init__(self, low):
        self.low, self.interval_s = low, 0.005

    def read(self) -> clocks.Reading:
        return clocks.Reading(sm_mhz=1000.0 if self.low() else 1980.0)

    def facts(self) -> dict:
        return {"default_sm_mhz": 1980.0}


def test_a_round_that_ran_throttled_is_dropped_and_taken_again_after_a_pause(tmp_path, library):
    ps = programs(tmp_path, library, A=("--kernel", "k=60000000"), B=("--kernel", "k=60000000"))   # 60 ms turns
    pauses, ls = [], None
    reader = Clock(low=lambda: ls is not None and ls.turns < 2)      # the clock is low through the first round
    ls = Lockstep(ps, timeout_s=30, turns=1, max_processes=2, reader=reader, facts=reader.facts(),
                  sleep=pauses.append)
    with ls:
        for _ in range(3):
            ls.round(["A", "B"])
    assert ls.throttled_rounds == 1 and pauses == [ls.pause_s] and ls.kept_throttled == 0
    assert ls.turns == 2 * (3 + 1) and ls.starts == ls.turns


def lockstep_rounds(ls: Lockstep):
    """A race's rounds (sweep.node.race.Rounds) taken by `ls`."""
    def rounds(tags, r, left):
        turns = ls.round(race.rotated(tags, r), left)
        return lambda: {k: ls.sample(ts) for k, ts in turns.items()}
    return rounds


def race_of(tmp_path, library, a_args, b_args, b_default=False, **lockstep):
    ps = programs(tmp_path, library, A=a_args, B=b_args)
    lane = race.Lane(("X",), ("k",), (Entrant("A", 64), Entrant("B", 128, b_default)), {"A": {"X": 64}, "B": {"X": 128}})
    plan = race.RacePlan((lane,), {"A": "", "B": ""}, {}, 60.0, 30, lockstep=True)
    with Lockstep(ps, timeout_s=30, **lockstep) as ls:
        return race.race(plan, lockstep_rounds(ls)).results[("X",)], ls


def test_a_lockstep_race_certifies_a_program_three_percent_faster_at_the_first_look_that_can(tmp_path, library):
    noisy = ("--kernel", "k=100000", "--noise", "0.002", "--process-sd", "0.002")
    res, ls = race_of(tmp_path, library, (*noisy, "--seed", "1"), (*noisy, "--seed", "2", "--scale", "1.03"))
    assert res.status == "certified" and res.pick == "A" and res.rounds == 9
    assert res.margin == pytest.approx(0.03, abs=0.005) and ls.starts == 18


def test_what_each_process_adds_is_weighed_so_copies_of_one_program_tie(tmp_path, library):
    """Copies whose processes differ by 2% (sd) while their iterations differ by 0.1%: paired turn by
    turn inside one process each, the offsets would separate them; a process a round weighs them."""
    copy = ("--kernel", "k=100000", "--noise", "0.001", "--process-sd", "0.02")
    res, ls = race_of(tmp_path, library, (*copy, "--seed", "3"), (*copy, "--seed", "3"), b_default=True)
    assert res.status == "tie" and res.rounds == 30 and res.pick == "B" and ls.starts == 60
