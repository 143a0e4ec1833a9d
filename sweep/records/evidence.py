"""The evidence records: how a job's program was sampled, how a pick was certified,
and how the pick fares at each launch shape.

    Sampled        result.json's `sampling`: runs kept, samples, noise reached and its
                   source, why sampling stopped, throttled runs dropped, clocks per run
    Certification  best.json's choice.certification: the race of a group's top
                   candidates on one GPU (sweep.decide.certify, sweep.node.race)
    ShapeBest      best.json's choice.shapes: per kernel x launch shape, the fastest
                   value there and the overall pick's regret (pick / best - 1)
    WorkloadPick   best.json's choice.workloads: per workload, its own pick and the
                   overall pick's regret there (sweep.decide.objective)

They sit in a module of their own, below sweep.records (the contract that holds
them), so the stages that produce them (sweep.node.sampling, sweep.node.race, sweep.decide.select)
and the contract all import them without a cycle. Times are nanoseconds per
iteration, clocks MHz, temperatures degrees C, power watts; fractions are plain
(0.005 is 0.5%).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

NOISE_SOURCES = ("iterations", "runs", "race", "unknown")
VERDICTS = ("faster", "tie", "unknown")


def verdict_words(verdict: str | None, noise_source: str | None = None) -> str:
    """How a pick's verdict reads (terminal, report). A margin beyond the noise of one run's
    timed iterations has not weighed what a run itself adds: on an H100, copies of one build
    in separate processes had residual_kernel medians 2.4-7.5% apart while one process's
    iterations varied by 0.8% (tests/data/h100/lockstep). Only samples from several runs,
    or a certification race, make a margin "beyond noise"."""
    if verdict == "faster":
        return "beyond one run's noise" if noise_source == "iterations" else "beyond noise"
    if verdict == "tie":
        return "within noise"
    return "noise unknown"


def _pick(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of `d` that are fields of `cls` (a record of a later minor version reads)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


@dataclass(frozen=True, slots=True)
class Sampled:
    """How one job's profiled program was sampled.

    runs: profiled runs kept (throttled ones are not). samples: per-iteration samples of
    the watched kernel shape with the fewest. source: where the noise comes from
    ("iterations": one run's iterations; "runs": several runs pooled; "unknown": fewer
    than 3 samples). noise: the largest relative noise (IQR / median) over the watched
    shapes, None when unknown; noisiest: that shape ("kernel grid block"). adaptive: the
    stopping rule decided how many runs; stopped: its record (samples, noise, reason,
    elapsed_s), None for a fixed number of runs. throttled_runs: runs dropped and run
    again because the SM clock was under threshold_mhz (75% of the default clock; None
    when no clock is known); throttled_samples: the samples dropped for it, those runs'
    and the timed iterations dropped alone from runs kept (sweep.node.sampling). clocks: per
    kept run, the peak readings while it ran (sm_mhz, mem_mhz, temperature_c, power_w).
    elapsed_s: seconds of profiled runs, pauses included. reason: why the runs are as many as
    they are when the plan changed after the first run (its program showed fewer timed
    iterations than the space said), else "".
    """

    runs: int = 1
    samples: int = 0
    source: str = "unknown"
    noise: float | None = None
    noisiest: str = ""
    adaptive: bool = False
    stopped: dict[str, Any] | None = None
    throttled_runs: int = 0
    throttled_samples: int = 0
    threshold_mhz: float | None = None
    clocks: tuple[dict[str, float | None], ...] = ()
    elapsed_s: float = 0.0
    note: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["clocks"] = [dict(c) for c in self.clocks]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Sampled":
        d = _pick(cls, d)
        return cls(**{**d, "clocks": tuple(dict(c) for c in d.get("clocks", ()))})


@dataclass(frozen=True, slots=True)
class Certification:
    """A group's race: its top candidates run interleaved on one GPU until they separate.

    status: "certified" (the pick is faster than every other entrant beyond the noise)
    or "tie" (the budget ran out first). pick: the values chosen; rule: how ("certified",
    "default in tied set", "fewest threads"). tied: the tied set's values (just the pick
    when certified). leader: the tag with the lowest race median (the pick, unless a
    tie was settled by the rule). runner_up: the entrant closest to the leader; margin,
    ci_low, ci_high: its relative margin over the leader (runner-up / leader - 1) and the
    interval at `confidence` (paired signed-rank, Bonferroni over comparisons and looks;
    None where unbounded). comparisons: per other entrant tag, the leader against it
    (margin, ci_low, ci_high, verdict). rounds, elapsed_s, stopped: how long it ran and
    why it ended ("separated", "max_rounds", "budget"). entrants: tag, values, threads,
    is_default and median_ns of each. host, gpu_uuid: the one GPU it ran on.
    throttled_runs: runs repeated because the GPU throttled. decisive_from: the first round
    at which the race could have decided anything (a race stopped sooner says nothing; 3 in
    races recorded before it was kept).
    """

    status: str
    pick: dict[str, int]
    rule: str
    tied: tuple[dict[str, int], ...] = ()
    runner_up: dict[str, int] | None = None
    margin: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float = 0.95
    rounds: int = 0
    elapsed_s: float = 0.0
    stopped: str = ""
    entrants: tuple[dict[str, Any], ...] = ()
    host: str = ""
    gpu_uuid: str = ""
    throttled_runs: int = 0
    leader: str = ""
    comparisons: dict[str, dict[str, Any]] = field(default_factory=dict)
    decisive_from: int = 3

    @property
    def certified(self) -> bool:
        return self.status == "certified"

    @property
    def verdict(self) -> str:
        """faster (certified), unknown (stopped before decisive_from rounds, the first at which it
        could have decided anything: no evidence) or tie."""
        if self.certified:
            return "faster"
        return "unknown" if self.rounds < self.decisive_from else "tie"

    def tag_of(self, values: Mapping[str, int]) -> str:
        """The entrant (job tag) that raced with these values ("" when none did)."""
        return next((e["tag"] for e in self.entrants if e["values"] == dict(values)), "")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tied"] = [dict(t) for t in self.tied]
        d["entrants"] = [dict(e) for e in self.entrants]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Certification":
        d = _pick(cls, d)
        return cls(**{**d, "tied": tuple(dict(t) for t in d.get("tied", ())),
                      "entrants": tuple(dict(e) for e in d.get("entrants", ()))})


@dataclass(frozen=True, slots=True)
class ShapeBest:
    """One kernel at one launch shape of a group: its fastest value and the overall pick's regret.

    shape: which of the kernel's shapes (the index-th, by threads launched; shapes are
    matched across configurations that way because grid and block change with the launch
    size) and its grid/block in the pick's job. best: values fastest at this shape;
    best_ns / pick_ns: that value's and the overall pick's time at this shape (per
    iteration, median over jobs). regret: pick_ns / best_ns - 1 (0 where the pick is
    this shape's best too). workload: the run the shape was launched in (with workloads:
    the overall pick's regret at each shape of each workload; "" without them).
    """

    kernel: str
    index: int
    shape: str
    best: dict[str, int]
    best_ns: float
    pick_ns: float
    regret: float
    workload: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ShapeBest":
        return cls(**_pick(cls, d))


@dataclass(frozen=True, slots=True)
class WorkloadPick:
    """A group on one workload: the values fastest there, and what the overall pick costs there.

    workload, weight: the run and its weight in the overall objective. values, tag, ns: the
    workload's own pick (its fastest candidate there alone), the job that measured it fastest,
    and its per-iteration time there (ns, median over the jobs of those values). runner_up,
    margin, verdict: that pick's own evidence on the workload (as a Choice's: runner-up / pick
    - 1 and "faster", "tie" or "unknown", from noise_source's samples). candidates: value
    combinations measured there.
    overall_ns: the overall pick's time on this workload (None where it has none, e.g. a
    default raced from the baseline job); regret: overall_ns / ns - 1 (0 where the overall
    pick is this workload's own; None with no overall_ns).
    """

    workload: str
    weight: float
    values: dict[str, int]
    tag: str
    ns: float
    overall_ns: float | None
    regret: float | None
    runner_up: dict[str, int] | None = None
    margin: float | None = None
    verdict: str = "unknown"
    candidates: int = 0
    noise_source: str = "unknown"     # where the verdict's samples came from (NOISE_SOURCES)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "WorkloadPick":
        return cls(**_pick(cls, d))
