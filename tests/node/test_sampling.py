"""How a job samples its program: repeats, adaptive stopping, throttled runs, clocks (no GPU)."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from sweep.node import clocks, sampling
from sweep.profile import Measurement, Parsed
from sweep.space.model import Run, Stopping

RUN = {"batch": 1, "seq_len": 1, "warmup": 1, "iterations": 20, "args": [], "verify": True}


def meas(samples, kernel="k", block=128) -> Measurement:
    s = tuple(float(x) for x in samples)
    return Measurement(kernel, (4, 1, 1), (block, 1, 1), 1, float(np.median(s)), min(s), max(s), float(np.mean(s)),
                       float(np.std(s)), s)


class FakeReader:
    """Two readings per run (the monitor's first and last: a long interval), one for a fingerprint."""

    interval_s = 60.0

    def __init__(self, sm_clocks):
        self.sm = iter(sm_clocks)

    def read(self) -> clocks.Reading:
        return clocks.Reading(next(self.sm, 1980.0), 2619.0, 40.0, 120.0)

    def facts(self):
        return {"gpu": "H100", "gpu_uuid": "GPU-1", "driver": "580", "default_sm_mhz": 1980.0, "max_sm_mhz": 1980.0}


class Clock:
    def __init__(self, step: float = 1.0):
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def stream_sampler(plan, stream, **kw):
    """A Sampler whose runs return the next `plan.iterations` values of `stream` for kernel k."""
    it = iter(stream)
    return sampling.Sampler(plan, lambda: [next(it) for _ in range(plan.iterations)], lambda cap: Parsed([meas(cap)]),
                            **kw)


@pytest.mark.parametrize("iterations, profile, repeats, adaptive", [
    (1, {}, 5, True), (2, {}, 3, True), (3, {}, 1, False), (20, {}, 1, False)])
def test_plan_repeats_a_program_whose_run_cannot_measure_its_noise(iterations, profile, repeats, adaptive):
    plan = sampling.Plan.of(RUN | {"iterations": iterations}, profile)
    assert (plan.repeats, plan.adaptive, plan.single) == (repeats, adaptive, repeats == 1 and not adaptive)


def test_plan_follows_the_space_settings_and_the_backend_iterations():
    run = RUN | {"repeats": 4, "stopping": {"when": "always", "max_noise": 0.01, "budget_s": 3.0}}
    plan = sampling.Plan.of(run, {"kernels": ["gelu*"]}, iterations=3)
    assert plan.repeats == 4 and plan.adaptive and plan.iterations == 3 and plan.kernels == ("gelu*",)
    assert plan.rule.max_noise == 0.01 and plan.rule.budget_s == 3.0
    assert Run(stopping=Stopping(when="never"), iterations=1).runs_for(1) == (5, False)


def test_pool_concatenates_runs_and_keeps_each_runs_samples():
    a = [meas([10, 11]), meas([5, 5], kernel="other")]
    b = [meas([12, 13, 14])]
    (k, other) = sampling.pool([a, b])
    assert k.iter_total_ns == (10, 11, 12, 13, 14) and k.runs == (2, 3) and k.per_run == ((10, 11), (12, 13, 14))
    assert other.iter_total_ns == (5, 5, 0, 0, 0) and other.per_run == ((5, 5), (0, 0, 0))   # missed run: zeros
    assert k.min_ns == 10 and k.max_ns == 14
    assert sampling.pool([a]) == a                                                         # one run: as it is


def test_one_iteration_program_runs_five_times_and_stops_converged_on_a_tight_stream():
    rng = np.random.default_rng(1)
    plan = sampling.Plan.of(RUN | {"iterations": 1}, {})
    s = stream_sampler(plan, 1000 * (1 + 0.0005 * rng.standard_normal(1000)), clock=Clock(0.1))
    ms, rec = s.finish(s.take())
    assert rec.runs == 5 and rec.samples == 5 and rec.source == "runs" and rec.adaptive
    assert rec.stopped["reason"] == "converged" and rec.noise < 0.005
    assert ms[0].runs == (1,) * 5


def test_noisy_one_iteration_program_stops_at_its_time_budget():
    rng = np.random.default_rng(2)
    plan = sampling.Plan.of(RUN | {"iterations": 1, "stopping": {"budget_s": 10.0}}, {})
    s = stream_sampler(plan, 1000 * (1 + 0.05 * rng.standard_normal(1000)), clock=Clock(1.0))
    _, rec = s.finish(s.take())
    assert rec.stopped["reason"] == "budget" and rec.stopped["elapsed_s"] == 10.0 and rec.noise > 0.005
    assert rec.runs > 5 and rec.stopped["samples"] == rec.runs


def test_stopping_watches_only_the_governed_kernels():
    rng = np.random.default_rng(3)
    plan = sampling.Plan.of(RUN | {"iterations": 1}, {"kernels": ["tight*"]})

    def run():
        return [meas([1000 + rng.normal(0, 0.1)], "tight_kernel"), meas([1000 * (1 + rng.normal(0, 0.2))], "wild")]

    s = sampling.Sampler(plan, run, Parsed, clock=Clock(0.1))
    _, rec = s.finish(s.take())
    assert rec.stopped["reason"] == "converged" and rec.runs == 5 and rec.noisiest.startswith("tight_kernel")


def test_a_program_with_enough_iterations_runs_once_and_is_parsed_after_the_gpu_is_released():
    plan = sampling.Plan.of(RUN, {})
    parsed = []
    s = sampling.Sampler(plan, lambda: "capture", lambda cap: parsed.append(cap) or Parsed([meas(range(1, 21))]))
    taken = s.take()
    assert taken.pending == "capture" and parsed == []
    ms, rec = s.finish(taken)
    assert parsed == ["capture"] and rec.runs == 1 and rec.source == "iterations" and rec.stopped is None


def test_a_throttled_run_is_dropped_counted_and_run_again_after_a_pause():
    pauses = []
    reader = FakeReader([1000.0, 1100.0])          # first run peaks at 1100 MHz < 75% of 1980
    plan = sampling.Plan.of(RUN, {})
    s = sampling.Sampler(plan, lambda: "cap", lambda cap: Parsed([meas(range(1, 21))]), reader=reader,
                         facts=reader.facts(), sleep=pauses.append)
    ms, rec = s.finish(s.take())
    assert rec.throttled_runs == 1 and rec.throttled_samples == 20 and rec.threshold_mhz == pytest.approx(1485.0)
    assert pauses == [sampling.PAUSE_S] and rec.runs == 1 and rec.clocks[0]["sm_mhz"] == 1980.0


def test_a_gpu_throttled_run_after_run_is_kept_at_last_and_said_so():
    reader = FakeReader([900.0] * 100)
    s = sampling.Sampler(sampling.Plan.of(RUN, {}), lambda: "cap", lambda cap: Parsed([meas(range(1, 21))]),
                         reader=reader, facts=reader.facts(), sleep=lambda s: None)
    _, rec = s.finish(s.take())
    assert rec.throttled_runs == sampling.MAX_THROTTLED and "stayed throttled" in rec.note


def test_unknown_clocks_throttle_nothing():
    assert not clocks.throttled(float("nan"), 1980.0) and not clocks.throttled(100.0, None)
    assert clocks.throttled(1400.0, 1980.0) and not clocks.throttled(1500.0, 1980.0)
    assert clocks.default_clock({"default_sm_mhz": None, "max_sm_mhz": 1980.0}) == 1980.0


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """An nvidia-smi on PATH that answers --query-gpu from a table (N/A for power, as some GPUs do)."""
    values = {"clocks.sm": "1755", "clocks.mem": "2619", "temperature.gpu": "41", "power.draw": "[N/A]",
              "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-abc", "driver_version": "580.159.04",
              "clocks.default_applications.graphics": "1755", "clocks.max.sm": "1980"}
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/usr/bin/env python3\nimport sys\nv = %r\n"
                   "q = [a for a in sys.argv if a.startswith('--query-gpu=')][0].split('=', 1)[1].split(',')\n"
                   "print(', '.join(v[x] for x in q))\n" % values)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc")
    return smi


def test_nvidia_smi_reader_reads_clocks_and_fingerprints_the_node(fake_smi):
    r = clocks.SmiReader(str(fake_smi), clocks.device_id())
    reading = r.read()
    assert (reading.sm_mhz, reading.mem_mhz, reading.temperature_c) == (1755, 2619, 41)
    assert reading.to_dict()["power_w"] is None                   # [N/A] is unknown, not an error
    fp = clocks.fingerprint(r)
    assert fp["gpu_uuid"] == "GPU-abc" and fp["driver"] == "580.159.04" and fp["default_sm_mhz"] == 1755
    assert fp["start_sm_mhz"] == 1755 and fp["host"]


def test_monitor_keeps_the_peak_reading_of_a_run():
    with clocks.Monitor(FakeReader([345.0, 1980.0])) as mon:
        pass
    assert mon.peak().sm_mhz == 1980.0 and len(mon.readings) == 2
    with clocks.Monitor(None) as none:
        pass
    assert none.readings == [] and not np.isfinite(none.peak().sm_mhz)
