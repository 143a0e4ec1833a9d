"""The command line's parser: every subcommand and option, the examples and the exit codes
(`config-sweep --help`). sweep.cli parses with it and calls the stages."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from sweep.core import paths
from sweep.core.paths import COMMAND
from sweep.dispatch import EXECUTORS
from sweep.plan import STRATEGIES
from sweep.profile import BACKENDS

DESCRIPTION = """config-sweep (or `python config_sweep.py` in a checkout): find the fastest launch sizes for every kernel of a CUDA program.

With no arguments it sweeps spaces/seed.yaml (seed 004's thread-count table) on
the embedded GPT-2 engine, on this machine's GPUs, profiling with Nsight Systems,
and prints each kernel's best launch size. Subcommands only parse their
arguments and call the pipeline (sweep.pipeline); a user error prints one line and exits 1.
"""

EXIT_OK = 0                 # something was measured (or a dry run built everything)
EXIT_BAD_INPUT = 1          # a bad space file, option or sweep name; one line says which and the fix
EXIT_NOTHING_MEASURED = 3   # the run ended, but no configuration was measured
EXIT_DISK_FULL = 4          # the filesystem under the sweep is full; what was measured is kept
EXIT_INTERRUPTED = 130      # Ctrl-C / SIGINT: what ran is kept, the same command resumes
EXIT_BROKEN_PIPE = 141      # stdout's reader stopped early (`| head`): quiet, as a tool killed by SIGPIPE exits

EPILOG = """examples:
  {cmd}                                   seed 004's sweep on this machine's GPUs
  {cmd} run spaces/full.yaml --executor slurm --partition gpu --time 30
  {cmd} run spaces/seed.yaml --dry-run --arch sm_90   render and compile only (no GPU)
  {cmd} status seed                        from any shell, while it runs
  {cmd} best seed                          the per-kernel picks and best/conf.cuh
  {cmd} report seed                        results/seed/report.html
  {cmd} compare seed-a40 seed-h100         two sweeps side by side
  {cmd} choose SPACE --from results/seed  which strategy and budget, replayed (no GPU)

exit codes:
  0    something was measured (a dry run: every configuration built)
  1    bad input: the message names the file or value and the fix
  3    nothing was measured (every configuration failed or was skipped, or no
       configuration is legal: the message names the constraint that rejects most)
  4    the disk under the sweep is full: the message names it; what was measured is kept
  130  interrupted: what ran is kept; the same command resumes
  141  the output's reader stopped early (`... | head`): nothing more is printed, as
       for any tool ended by SIGPIPE; a sweep run this way keeps what it measured
"""


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs-dir", type=Path, default=paths.JOBS, help="where job folders go (default: jobs/)")
    p.add_argument("--results-dir", type=Path, default=paths.RESULTS, help="where results go (default: results/)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=COMMAND, description=DESCRIPTION, epilog=EPILOG.format(cmd=COMMAND),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    r = sub.add_parser("run", help="sweep a space file (the default command)", formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Render, build, verify and profile every configuration the space's strategy picks, "
                                   "then pick each kernel's best launch sizes and confirm them end to end.")
    r.add_argument("space", nargs="?", type=Path, default=paths.DEFAULT_SPACE, help="space file (default: spaces/seed.yaml)")
    r.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local: this machine's GPUs, one job per GPU; slurm: a job array; debug: in-process, one by one; "
                        "replay: no GPU, each configuration answered from --from's recording")
    r.add_argument("--from", dest="replay_from", type=Path, metavar="FILE",
                   help="replay: a Kernel Tuner cache or T4 results file (.json/.json.gz), or a sweep's results/<name>/ "
                        "folder (docs/replay.md)")
    r.add_argument("--backend", choices=BACKENDS, help="profile backend (overrides the space file): nsys, ncu, cupti "
                   "(an injection library, no profiler; a custom target's default) or events (the program's own timing)")
    r.add_argument("--no-overlap", dest="overlap", action="store_false", default=None,
                   help="cupti: hold the GPU for each program's whole run, not only around its GPU work "
                        "(the space's profile.overlap: false; docs/guide/overlap.md)")
    r.add_argument("--strategy", choices=STRATEGIES, help="override the space's strategy")
    r.add_argument("--samples", type=int, help="points for random / trials for optuna")
    r.add_argument("--budget", type=int, help="evaluations at most, for learning and auto")
    r.add_argument("--start-from", type=Path, metavar="RECORDING",
                   help="learning, auto: propose first the fastest configurations of this recording of the space "
                        "(a Kernel Tuner cache, T4 results or a sweep's results/<name>/, e.g. another GPU's)")
    r.add_argument("--strategy-option", action="append", default=[], metavar="KEY=VALUE",
                   help="set one of the strategy's options (repeatable), e.g. whole=20 for auto")
    r.add_argument("--name", help="sweep name (default: the space's name); results go to results/<name>/")
    r.add_argument("--dry-run", action="store_true", help="render and compile every configuration; run nothing on a GPU")
    r.add_argument("--arch", help="GPU architecture to compile for, e.g. sm_90 (default: the space's build.arch)")
    r.add_argument("--retry-failed", action="store_true", help="run failed configurations again (not those that failed the same way twice)")
    r.add_argument("--no-confirm", action="store_true", help="skip the end-to-end run of the combined best and the defaults")
    r.add_argument("--certify", action=argparse.BooleanOptionalAction, default=None,
                   help="race each group's top candidates and the default on one GPU to certify the picks "
                        "(default: when confirming)")
    r.add_argument("--no-report", action="store_true", help="do not write report.html")
    r.add_argument("--nsys", metavar="PATH", help="the nsys to profile with (default: $NSYS, else PATH)")
    r.add_argument("--ncu", metavar="PATH", help="the ncu to profile with (default: $NCU, else PATH)")
    g = r.add_argument_group("slurm (override the space file's slurm: settings)")
    for flag, key, typ, hlp in (
        ("--partition", "partition", str, "partition"), ("--account", "account", str, "account"),
        ("--qos", "qos", str, "quality of service"), ("--constraint", "constraint", str, "node features, e.g. h100"),
        ("--gpus", "gpus_per_job", int, "GPUs per job (gres gpu:N)"), ("--cpus", "cpus_per_job", int, "CPUs per job"),
        ("--mem", "mem", str, "memory per job, e.g. 16G"), ("--time", "time_min", int, "time limit per job in minutes"),
        ("--parallel", "array_parallelism", int, "at most this many array tasks at once"),
        ("--max-submit", "max_submit", int, "at most this many of your tasks queued at once (where sacctmgr cannot say)"),
        ("--build-partition", "build_partition", str, "build as a CPU-only array there; measure tasks follow each build"),
        ("--log-dir", "log_dir", str, "where Slurm logs go (default jobs/<sweep>/_slurm)"),
    ):
        g.add_argument(flag, dest=f"slurm_{key}", type=typ, help=hlp, metavar=flag[2:].upper())
    g.add_argument("--sbatch", dest="slurm_extra_sbatch", action="append", metavar="OPTION",
                   help="extra sbatch option, e.g. --sbatch=--exclusive (repeatable)")
    _add_common(r)

    for name, hlp in (("status", "show a sweep's state from its files"), ("collect", "re-collect results and re-pick the best"),
                      ("best", "print the per-kernel picks (and best/conf.cuh)"), ("report", "write results/<sweep>/report.html")):
        p = sub.add_parser(name, help=hlp, description=hlp)
        p.add_argument("sweep", nargs="?", help="sweep name (default: every sweep under --jobs-dir)" if name == "status" else "sweep name")
        p.add_argument("--format", choices=("text", "json", "markdown", "csv") + (("t4",) if name == "report" else ()),
                       default="text", help="t4: write results/<sweep>/results_T4.json (the T4 results format)"
                       if name == "report" else None)
        _add_common(p)
    c = sub.add_parser("compare", help="two sweeps side by side (HTML and markdown)",
                       description="Compare two collected sweeps (two GPUs, or before/after a kernel change): each "
                                   "group's picks and best times, the ratio B/A, common values side by side. Writes "
                                   "results/compare-A-vs-B.html and .md.")
    c.add_argument("a", help="first sweep name (the reference: ratios are B/A)")
    c.add_argument("b", help="second sweep name")
    c.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                   help="text: the HTML's path; markdown: the .md on stdout; json: the comparison")
    _add_common(c)
    cl = sub.add_parser("clean", help="remove a sweep's build products (its measurements stay)")
    cl.add_argument("sweep")
    cl.add_argument("--all", action="store_true", help="also remove its results and measurements")
    _add_common(cl)
    add_adopt_commands(sub)
    add_choose_command(sub)
    return ap


def add_adopt_commands(sub: argparse._SubParsersAction) -> None:
    """init and validate: bringing a program to the tool (sweep.pipeline.adopt)."""
    i = sub.add_parser("init", help="write a starter space file from a program's folder",
                       description="Read a program's folder (its #ifndef macro defaults, Makefile or CMakeLists.txt, "
                                   "and the kernels of a build when there is one) and write a starter space file, "
                                   "with comments saying what to fill in.")
    i.add_argument("program_dir", type=Path, help="the folder with the program's sources and build file")
    i.add_argument("-o", "--output", type=Path, help="write it here (never overwrites); default: stdout")
    i.add_argument("--build", type=Path, help="a folder of built programs (or a dry run's job folder) to read "
                                              "kernel names from (default: PROGRAM_DIR/build)")
    v = sub.add_parser("validate", help="check a space file: grid, legal points, plan, kernel globs",
                       description="Load a space file and print its grid, how many points are legal (and the first "
                                   "rule each illegal one breaks), what the strategy would build, and its kernel "
                                   "globs against a build's kernel names. Writes nothing; exit 1 on a bad file or a "
                                   "glob that matches no kernel of the build.")
    v.add_argument("space", type=Path, help="space file")
    v.add_argument("--build", type=Path, help="a dry run's job folder or a folder of built programs (default: a "
                                              "job folder of this space's earlier dry run under --jobs-dir)")
    v.add_argument("--strategy", choices=STRATEGIES, help="plan with this strategy instead of the space's, as run's "
                                                          "--strategy does (a T1 file names none)")
    v.add_argument("--budget", type=int, help="evaluations at most, for learning and auto (as run's --budget)")
    v.add_argument("--start-from", type=Path, metavar="RECORDING", help="as run's --start-from")
    _add_common(v)


def _numbers(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give whole numbers separated by commas, e.g. 25,50,100") from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every budget must be at least 1")
    return values


def add_choose_command(sub: argparse._SubParsersAction) -> None:
    """choose: which strategy and budget, from a replay of a recording (sweep.pipeline.choose)."""
    from sweep.pipeline.choose import DEFAULT_BUDGETS, DEFAULT_STRATEGIES

    c = sub.add_parser("choose", help="compare strategies and budgets on a recording, no GPU",
                       description="Replay each strategy over several seeds on a recording of this space (a Kernel "
                                   "Tuner cache, T4 results, or an earlier sweep's results/<name>/ folder), as "
                                   "--executor replay answers a sweep, and print per strategy its best-found / the "
                                   "recording's best at each budget and what coming within 1%% and 5%% cost. "
                                   "Builds, runs and writes nothing (but --json).")
    c.add_argument("space", type=Path, help="space file (YAML, or a T1 JSON file)")
    c.add_argument("--from", dest="replay_from", type=Path, required=True, metavar="FILE",
                   help="the recording: a Kernel Tuner cache, T4 results, or results/<name>/ of an earlier sweep")
    c.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                   help=f"comma list (default {','.join(DEFAULT_STRATEGIES)})")
    c.add_argument("--seeds", type=int, default=10, help="runs per strategy that takes a seed (default 10)")
    c.add_argument("--budgets", type=_numbers, default=DEFAULT_BUDGETS,
                   help=f"evaluations, comma list (default {','.join(map(str, DEFAULT_BUDGETS))}); runs go to the largest")
    c.add_argument("--each-budget", action="store_true",
                   help="a run of its own for every budget, the strategy told that budget, as a sweep with that budget "
                        "runs it (default: the smaller budgets read off the first evaluations of runs to the largest)")
    c.add_argument("--parallel", type=int, default=10,
                   help="proposals awaiting results at most, as a sweep's executor keeps them (default 10)")
    c.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                   help="runs replayed at once, a process each (default: the CPUs, at most 8); the same runs "
                        "whatever the number")
    c.add_argument("--json", type=Path, metavar="FILE", help="also write every run's answers here (a new file)")
    c.add_argument("--start-from", type=Path, metavar="RECORDING",
                   help="also run each strategy that takes a warm start (learning, auto) from this other recording of "
                        "the space (e.g. another GPU's), as <name>+start, beside its cold runs")
