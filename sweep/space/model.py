"""The space model: what a sweep varies, what is legal, how it builds and runs.

A Space holds its Parameters (each a conf.cuh macro with the values to try, a
tag letter for job names and the kernels it governs), the Constraints that say
which combinations are legal, the Strategy that picks combinations, and the
Build, Run, Profile and Slurm settings. A Config is one point of a space.

The functions over them (completing a point, its legality, its tag and hash, the
parameter groups) are in sweep.space.configs.

These are plain frozen data; the YAML loader (sweep.space.loader) builds them.
"""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from sweep.profile import BACKENDS as _BACKEND_REGISTRY
from sweep.space import declared as declarations, expr


MAX_VALUE = 2**31 - 1
BACKENDS = tuple(_BACKEND_REGISTRY)     # the profile backends' registry is the one list


@dataclass(frozen=True, slots=True)
class Parameter:
    """One macro of conf.cuh and the values a sweep tries for it."""

    macro: str
    tag: str
    values: tuple[int, ...]
    kernels: tuple[str, ...] = ()        # glob patterns over kernel names
    default: int | None = None           # the target's own default (used to pad factorized builds)
    equals: str | None = None            # derived: always the value of this other macro
    doc: str = ""
    floor: int = 1                       # the smallest value it loads with: 1, or 0 where it declares min
    kind: str = "size"                   # size (a launch size) | flag (0/1) | choice (an enumeration from 0)

    @property
    def derived(self) -> bool:
        return self.equals is not None

    def governs(self, kernel: str) -> bool:
        return any(fnmatch.fnmatchcase(kernel, p) for p in self.kernels)


@dataclass(frozen=True, slots=True)
class Constraint:
    """A boolean expression over macro names; combinations where it is false are skipped."""

    expr: str
    why: str = ""

    def holds(self, values: Mapping[str, int]) -> bool:
        return bool(expr.evaluate(self.expr, values))


@dataclass(frozen=True, slots=True)
class Build:
    arch: tuple[str, ...] = ("auto",)      # sm_XY targets, or "auto": the GPU's own, detected on the node
    nvcc_flags: tuple[str, ...] = ("-O3", "-lineinfo")
    make_targets: tuple[str, ...] = ("all",)
    jobs: int = 0                          # make -j; 0: the job's CPUs
    macros: str = "header"                 # header: conf.cuh on the include path; define: also -DNAME=value to nvcc


STOPPING_WHEN = ("auto", "always", "never")


@dataclass(frozen=True, slots=True)
class Stopping:
    """Adaptive stopping of one configuration's profiled runs (sweep.stats.StoppingRule's settings).

    when: "auto" (only when one run has fewer timed iterations than it takes to measure
    their noise, MIN_SAMPLES_FOR_NOISE), "always" or "never". max_noise: target
    relative noise (IQR / median, a fraction: 0.005 is 0.5%). budget_s: seconds of
    profiled runs per configuration. min_samples / max_samples: per kernel shape.
    """

    when: str = "auto"
    max_noise: float = 0.005
    budget_s: float = 15.0
    min_samples: int = 5
    max_samples: int = 1000


@dataclass(frozen=True, slots=True)
class Run:
    batch: int = 4
    seq_len: int = 64
    warmup: int = 5
    iterations: int = 20
    args: tuple[str, ...] = ()             # extra arguments to the profiled program
    verify: bool = True
    repeats: int = 0                       # profiled runs per configuration; 0: stats.default_repeats (auto)
    stopping: Stopping = field(default_factory=Stopping)

    def runs_for(self, iterations: int) -> tuple[int, bool]:
        """(runs at least, adaptive?) for a profiled program of `iterations` timed iterations per run:
        one run when its iterations measure their own noise, else enough runs for 5 samples
        (stats.default_repeats), and the stopping rule on when `stopping.when` says so."""
        from sweep.stats import MIN_SAMPLES_FOR_NOISE, default_repeats

        repeats = self.repeats or default_repeats(iterations)
        when = self.stopping.when
        return repeats, when == "always" or (when == "auto" and iterations < MIN_SAMPLES_FOR_NOISE)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Run":
        """The Run a job reads back from config.json's run: (keys this version does not know are ignored)."""
        names = set(cls.__dataclass_fields__)
        stop = d.get("stopping") or {}
        stopping = Stopping(**{k: v for k, v in stop.items() if k in Stopping.__dataclass_fields__})
        kw = {k: v for k, v in d.items() if k in names and k != "stopping"}
        return cls(**{**kw, "args": tuple(kw.get("args", ())), "stopping": stopping})


def iterations_per_run(run: Run, profile: "Profile") -> int:
    """Timed iterations one profiled run gives: ncu replays only ncu_iterations of them."""
    return profile.ncu_iterations if profile.backend == "ncu" else run.iterations


@dataclass(frozen=True, slots=True)
class Certify:
    """The race that certifies each group's pick after the sweep (sweep.decide.certify).

    top: the fastest candidates raced (plus the default). The race runs by default when
    its estimated cost (the rounds up to its first decisive look, sweep.decide.race_cost)
    is at most its cap, max(budget_share of the sweep's own GPU seconds (verify + profile
    of its jobs), cap_s), and may hold the GPU up to the cap; above it, it is not raced
    and `run` says what it would cost and which cap_s allows it. budget_s (the older
    setting, kept): when > 0, the cap is budget_s exactly, budget_share and cap_s aside.
    max_rounds: rounds at most. lockstep: take the rounds in lockstep
    (sweep.node.lockstep: a fresh process of each entrant a round, the processes of several
    rounds started at once, taking turns of one timed iteration) where the sweep measured
    per-iteration samples; false takes a run of each a round. turns: a lockstep round's
    process of each entrant takes this many turns (its sample is their median);
    processes: the most lockstep processes started at once (on the GPU together; fewer
    when a batch does not fit). combine: when racing a run a
    sample (or more jobs than lockstep starts at once), race the groups together, one
    configuration per rank holding every group's entrant of that rank (top + 1 programs
    a round instead of one per entrant); false races each entrant's own job.
    """

    enabled: bool = True
    top: int = 3
    budget_s: float = 0.0
    budget_share: float = 0.2
    cap_s: float = 60.0
    max_rounds: int = 30
    combine: bool = True           # race every group at once on combined configurations (sweep.decide.race_combined.combined)
    lockstep: bool = True          # the entrants take turns, an iteration each (sweep.node.lockstep)
    turns: int = 3                 # lockstep: a round's process of each entrant takes this many turns
    processes: int = 16            # lockstep: most processes started at once (their GPU memory must fit)


@dataclass(frozen=True, slots=True)
class Profile:
    backend: str = "nsys"
    ncu_iterations: int = 3                # ncu replays every launch: fewer iterations keep it quick
    overlap: bool = True                   # cupti: programs share the GPU, each holding it only for its GPU work


@dataclass(frozen=True, slots=True)
class Slurm:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    gpus_per_job: int = 1
    cpus_per_job: int = 4
    mem: str | None = None                 # e.g. "16G"
    time_min: int = 20
    array_parallelism: int = 16            # at most this many of the sweep's tasks run at once
    extra_sbatch: tuple[str, ...] = ()     # more "#SBATCH ..." options, e.g. "--exclusive"
    setup: tuple[str, ...] = ()            # shell lines before the job, e.g. "module load cuda/13.0"
    log_dir: str | None = None             # default jobs/<sweep>/_slurm
    max_submit: int = 0                    # at most this many tasks of the user queued at once (0: the cluster's limits only)
    build_partition: str | None = None     # builds go out as a CPU-only array there; measure tasks depend on them
    build_cpus: int = 4                    # CPUs per build task
    build_time_min: int = 15               # time limit per build task, minutes
    partitions: tuple[str, ...] = ()       # measure every configuration on each (one per GPU model); () : partition

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


VERIFY_IN_PROFILE = "profile"   # Target.verify of a program that checks itself before it times


@dataclass(frozen=True, slots=True)
class Program:
    """One more program of a target the sweep can profile besides its default one (a
    workload names it: `program: generate`). Fields as Target's: the command with its
    placeholders, what makes it print engine-timing/1 JSON (the events backend), what
    makes it check itself before it times (with verify: profile)."""

    profile: tuple[str, ...]
    events: tuple[str, ...] = ()
    check_args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Target:
    """What is built and measured: any folder whose Makefile takes CONF_DIR, BUILD_DIR,
    NVCC, ARCH and NVCCFLAGS, plus the commands that verify and time it (placeholders:
    {build} {job} {batch} {seq_len} {iterations} {warmup} {events_json}, and those a
    plugin's prepare step names, e.g. the engine's {weights} {reference}; {args}
    expands to run.args). A plugin target (sweep.space.target) also carries its options
    and its prepare step.

    `verify` is the check commands, or VERIFY_IN_PROFILE ("profile"): the timing
    program checks its results itself before it times, so one run does both, and a
    non-zero exit before its timed part is verify_failed. `check_args` are added to
    the timing command then, while run.verify is true (the engine: --ref {reference})."""

    name: str
    source_dir: Path
    verify: tuple[tuple[str, ...], ...] | str
    profile: tuple[str, ...]
    events: tuple[str, ...] = ()           # extra profile arguments that make it print engine-timing/1 JSON
    check_args: tuple[str, ...] = ()       # with verify: profile, what makes the timing program check itself
    model: Mapping[str, Any] | None = None  # a plugin target's options (the engine: preset, seed, model_dir)
    plugin: Any = None                     # a plugin target's prepare step (sweep.space.target.Prepare)
    programs: Mapping[str, Program] = field(default_factory=dict)  # more profilable programs, by name
    build: str = "make"                    # make: the Makefile contract; cmake: CMakeLists.txt (sweep.node.cmake)
    cmake_target: str = ""                 # build: cmake, the target `cmake --build` builds (its program lands in {build}/)
    cmake_args: tuple[str, ...] = ()       # build: cmake, -DNAME=value words for the one configure

    def program(self, name: str | None = None) -> Program:
        """The named program, or the default one (profile, events, check_args) for None."""
        if name is None:
            return Program(self.profile, self.events, self.check_args)
        if name not in self.programs:
            known = ", ".join(sorted(self.programs)) or "none besides the default"
            raise KeyError(f"the target {self.name} has no program {name!r} (it has: {known})")
        return self.programs[name]

    @property
    def replay_only(self) -> bool:
        """No timing command (a T1 space's target, sweep.space.t1): it can only be replayed."""
        return not self.profile


@dataclass(frozen=True, slots=True)
class Replay:
    """How a replay (`--executor replay --from FILE`, sweep.dispatch.replay) finds a configuration in a
    recording: `params` maps a macro to its recorded parameter name (absent: the macro's own name);
    `fixed` holds recorded parameters the space does not sweep at one value; `kernel` names the kernel
    a T4 file's times are of (T4 names none; "": the one kernel the space's parameters govern)."""

    params: Mapping[str, str] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    kernel: str = ""

    def name_of(self, macro: str) -> str:
        return self.params.get(macro, macro)


@dataclass(frozen=True, slots=True, init=False)
class Strategy:
    """The strategy a space names and the options its file gave it.

    Which options a strategy takes, with their types, defaults and docs, is
    declared by the strategy's own module (sweep.plan: each module's SPEC),
    and the loader refuses any other. `options` holds what was given, as sorted
    (name, value) pairs; reading one as an attribute (`strategy.samples`) falls
    back to the named strategy's declared default. Keywords set options, so
    Strategy("random", samples=10) and dataclasses.replace(s, seed=3) both work;
    an option the strategy does not declare is kept but never read (a --strategy
    override may pick a strategy that reads it).
    """

    name: str
    options: tuple[tuple[str, Any], ...]

    def __init__(self, name: str = "grid", options: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
                 **values: Any):
        merged = dict(options)
        merged.update(values)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "options", tuple(sorted(merged.items())))

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_") or key in ("name", "options"):   # slots not set yet (copy, unpickling)
            raise AttributeError(key)
        given = dict(self.options)
        if key in given:
            return given[key]
        spec = declarations.STRATEGIES.get(self.name)   # the strategies' declarations (registered by sweep.plan)
        declared = {o.name: o.default for o in spec.options} if spec else {}
        if key not in declared:
            raise AttributeError(f"strategy {self.name!r} has no option {key!r}; "
                                 f"it takes: {', '.join(declared) or 'no options'}")
        return declared[key]


@dataclass(frozen=True, slots=True)
class Workload:
    """One named run: its program (None: the target's default one), its sizes and extra
    arguments, and its weight in the overall objective (how often it happens)."""

    name: str
    weight: float = 1.0
    batch: int = 4
    seq_len: int = 64
    iterations: int = 20
    warmup: int = 5
    args: tuple[str, ...] = ()
    program: str | None = None

    def identity(self) -> list[Any]:
        """What a job measures of it (for the config hash): everything but the weight."""
        return [self.name, self.program, self.batch, self.seq_len, self.iterations, self.warmup, list(self.args)]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"args": list(self.args)}


@dataclass(frozen=True, slots=True)
class Space:
    name: str
    path: Path
    parameters: tuple[Parameter, ...]
    target: Target
    constraints: tuple[Constraint, ...] = ()
    strategy: Strategy = field(default_factory=Strategy)
    build: Build = field(default_factory=Build)
    run: Run = field(default_factory=Run)
    profile: Profile = field(default_factory=Profile)
    slurm: Slurm = field(default_factory=Slurm)
    description: str = ""
    certify: Certify = field(default_factory=Certify)
    workloads: tuple[Workload, ...] = ()   # named runs (sweep.space.workloads); (): run:'s one run
    replay: Replay = field(default_factory=Replay)   # matching a recording's parameters (`replay:`)

    def parameter(self, macro: str) -> Parameter:
        for p in self.parameters:
            if p.macro == macro:
                return p
        raise KeyError(macro)

    def declared_defaults(self, macros: Iterable[str]) -> dict[str, int] | None:
        """These parameters' declared defaults by macro (the launch sizes of the baseline job, which
        renders no macros); None when one of them declares none."""
        d = {m: self.parameter(m).default for m in macros}
        return d if all(v is not None for v in d.values()) else None

    @property
    def swept(self) -> tuple[Parameter, ...]:
        """The parameters a strategy chooses values for (derived ones follow)."""
        return tuple(p for p in self.parameters if not p.derived)

    @property
    def followers(self) -> dict[str, str]:
        """Each derived parameter's macro and the swept macro whose value it takes (`equals:`)."""
        return {p.macro: p.equals for p in self.parameters if p.derived}

    def size(self) -> tuple[int, str]:
        """The full grid's size and its product, e.g. (960, "4*4*4*3*5")."""
        n, parts = 1, []
        for p in self.swept:
            n *= len(p.values)
            parts.append(str(len(p.values)))
        return n, "*".join(parts) or "1"


@dataclass(frozen=True, slots=True)
class Config:
    """One point of a space: a value for every macro (derived ones included), in declaration order."""

    values: tuple[tuple[str, int], ...]

    def as_dict(self) -> dict[str, int]:
        return dict(self.values)

    def __getitem__(self, macro: str) -> int:
        return self.as_dict()[macro]
