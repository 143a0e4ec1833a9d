"""results/<sweep>/best.json and confirmation.json: each group's pick, its evidence, the end-to-end check."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from sweep.records.evidence import Certification, ShapeBest, WorkloadPick
from sweep.records.base import Damaged, build_record, check_schema, read_json
from sweep.core.paths import COMMAND

BEST_SCHEMA = "sweep-best/4"
BEST_OLDER = ("sweep-best/2", "sweep-best/3")   # read as /4 without workloads (/2: it measured one run) and
# without the evidence on the speed-up over the defaults (/2, /3)
CONFIRMATION_SCHEMA = "sweep-confirmation/3"
CONFIRMATION_OLDER = ("sweep-confirmation/1", "sweep-confirmation/2")   # read as /3 without per-workload
# totals (/1) and without the end-to-end comparison's evidence (/1, /2)
RECOLLECT = f"rewrite it with `{COMMAND} collect SWEEP`"
# A pick (candidate, race entrant, tied set) with no values: the baseline job's, the program's own launch
# sizes, raced where the space declares no defaults (sweep.decide.certify.lane); best/conf.cuh leaves its
# macros unset, so the program's own #ifndef values apply
OWN_SIZES = "the program's own launch sizes"


def values_words(values: Mapping[str, int], sep: str = ",", names: bool = False) -> str:
    """A pick's values for a line of text ("8,8,8"; with names "X=8, Y=8"), or OWN_SIZES for none."""
    return sep.join(f"{k}={v}" if names else str(v) for k, v in values.items()) or OWN_SIZES


@dataclass(frozen=True, slots=True)
class Candidate:
    values: dict[str, int]
    tag: str          # the job that measured it fastest
    ns: float         # per-iteration time of the group's kernels (median over jobs with these values)
    std_ns: float     # spread over iterations (standard deviation; 0 with one sample)
    jobs: int
    samples: int = 0              # per-iteration samples pooled over its jobs (0: the table had none)
    iqr_ns: float | None = None   # their interquartile range (None: fewer than 3 samples)
    threads: int = 0              # threads per block of the group's kernels (the largest)
    node: str = ""                # GPU (uuid, else host) of the job that measured it fastest


@dataclass(frozen=True, slots=True)
class Choice:
    """A group's pick and the evidence for it (see sweep.decide.select).

    margin: runner-up / pick - 1 (a fraction). verdict: "faster" (the pick is faster than
    the runner-up beyond the noise), "tie" or "unknown" (too few samples: never beyond
    noise); beyond_noise is verdict == "faster". noise_source: where the samples came
    from ("iterations", "runs", "race" or "unknown"). margin_ci_low/high: the margin's
    interval at `confidence` (rank-based, sweep.stats.compare; None where unbounded or
    unknown). noise_ns: the noise the margin was weighed against (ns): the interval's
    half-width, or 2 x the combined std for tables without samples.

    With workloads (sweep.decide.objective), the pick, its candidates' times and the evidence are
    on the weighted objective (the sum over workloads of weight x the group's time there),
    and `workloads` holds each workload's own pick and the overall pick's regret there.
    """

    macros: tuple[str, ...]
    kernels: tuple[str, ...]          # kernel names measured for this group
    values: dict[str, int]
    best: Candidate                   # the picked candidate
    runner_up: Candidate | None
    margin: float | None
    noise_ns: float | None
    beyond_noise: bool
    default_ns: float | None = None
    speedup_vs_default: float | None = None
    candidates: tuple[Candidate, ...] = ()
    note: str = ""
    noise_source: str = "unknown"
    verdict: str = "unknown"
    margin_ci_low: float | None = None
    margin_ci_high: float | None = None
    confidence: float | None = None
    certification: Certification | None = None
    shapes: tuple[ShapeBest, ...] = ()
    nodes: tuple[str, ...] = ()       # the GPUs (uuid, else host) the compared candidates were measured on
    workloads: tuple[WorkloadPick, ...] = ()   # per workload: its own pick, the overall pick's regret there
    not_raced: str = ""               # why no certification race ran for it (sweep.decide.certify.unraced)
    # the pick is the space's declared defaults, or the program's own (values {}, OWN_SIZES), the default
    # configuration's own launch sizes: its speed-up is 1 by identity (the ratio of the two jobs' times
    # would be their run-to-run noise)
    is_default: bool = False
    # the pick's samples against the baseline job's (sweep.decide.select.end_to_end_verdict): "faster",
    # "slower", "tie", "equivalent" (within 1% either way) or "unknown"; "" where not compared
    default_verdict: str = ""

    @property
    def certified(self) -> bool:
        return self.certification is not None and self.certification.certified

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: Path | str) -> "Choice":
        try:
            cert = d.get("certification")
            return build_record(cls, d, path, RECOLLECT, macros=tuple(d["macros"]), kernels=tuple(d["kernels"]),
                          best=Candidate(**d["best"]),
                          runner_up=Candidate(**d["runner_up"]) if d.get("runner_up") else None,
                          candidates=tuple(Candidate(**c) for c in d.get("candidates", ())),
                          certification=Certification.from_dict(cert) if cert else None,
                          shapes=tuple(ShapeBest.from_dict(x) for x in d.get("shapes", ())),
                          nodes=tuple(d.get("nodes", ())),
                          workloads=tuple(WorkloadPick.from_dict(x) for x in d.get("workloads", ())))
        except (KeyError, TypeError) as e:
            raise Damaged(f"{path}: a choice is not valid ({type(e).__name__}: {e}); {RECOLLECT}") from None


@dataclass(frozen=True, slots=True)
class Best:
    sweep: str
    choices: tuple[Choice, ...]
    config: dict[str, int]            # the combined pick: every macro but those a group leaves to the program (OWN_SIZES)
    unmeasured: tuple[str, ...] = ()  # parameters whose kernels never appeared in a profile
    notes: tuple[str, ...] = ()
    workloads: tuple[dict[str, Any], ...] = ()  # the space's workloads (name, weight, program, sizes); (): run:'s one
    schema: str = BEST_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, path: Path | str = "best.json") -> "Best":
        if isinstance(data, dict) and data.get("schema") in BEST_OLDER:
            data = {**data, "schema": BEST_SCHEMA}
        d = check_schema(data, path, BEST_SCHEMA, RECOLLECT)
        choices = d.get("choices")
        if not isinstance(choices, (list, tuple)):
            raise Damaged(f"{path}: 'choices' must be a list; {RECOLLECT}")
        return build_record(cls, d, path, RECOLLECT, choices=tuple(Choice.from_dict(c, path) for c in choices),
                      unmeasured=tuple(d.get("unmeasured", ())), notes=tuple(d.get("notes", ())),
                      workloads=tuple(dict(w) for w in d.get("workloads", ())))


@dataclass(frozen=True, slots=True)
class Confirmation:
    """The combined pick and the target's defaults, end to end (ns: governed kernels per iteration).

    With workloads, the totals are the weighted objective, and `workloads` holds each
    workload's own: name -> {"best_ns", "default_ns", "speedup_vs_default"} (None where a
    job measured nothing there), so a pick that serves the weighted sum but costs one
    workload shows it. `vs_default` is the evidence on the two jobs' own samples
    (sweep.stats.compare, best against the defaults, unpaired): its verdict "slower" says
    the combined pick lost to the defaults end to end beyond the noise."""

    sum_of_group_bests_ns: float | None = None
    best_total_ns: float | None = None
    default_total_ns: float | None = None
    best_forward_ms: float | None = None
    default_forward_ms: float | None = None
    best_vs_sum_of_bests: float | None = None
    speedup_vs_default: float | None = None
    forward_speedup_vs_default: float | None = None
    workloads: dict[str, dict[str, float | None]] = field(default_factory=dict)
    vs_default: dict[str, Any] | None = None   # sweep.stats.Comparison.to_dict() of the two jobs' samples
    schema: str = CONFIRMATION_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, path: Path | str = "confirmation.json") -> "Confirmation":
        if isinstance(data, dict) and data.get("schema") in CONFIRMATION_OLDER:
            data = {**data, "schema": CONFIRMATION_SCHEMA}
        return build_record(cls, check_schema(data, path, CONFIRMATION_SCHEMA, RECOLLECT), path, RECOLLECT)


def load_record(cls: type, path: Path) -> Any | None:
    """A Best or Confirmation from its file, or None when there is none."""
    try:
        data = read_json(path)
    except OSError:
        return None
    return cls.from_dict(data, path)
