"""config-sweep (or `python config_sweep.py` in a checkout): find the fastest launch sizes for every kernel of a CUDA program.

With no arguments it sweeps spaces/seed.yaml (seed 004's thread-count table) on
the embedded GPT-2 engine, on this machine's GPUs, profiling with Nsight Systems,
and prints each kernel's best launch size. Subcommands only parse their
arguments and call the pipeline (sweep.pipeline); a user error prints one line and exits 1.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from pathlib import Path

from sweep.core import paths
from sweep.decide import select as select_mod
from sweep.pipeline import driver as pipeline, manage
from sweep.core.errors import DiskFull, SweepError
from sweep.dispatch import EXECUTORS, INTERRUPTED, Interrupted
from sweep.profile import BACKENDS
from sweep.records import Best, load_record
from sweep.plan import STRATEGIES
from sweep.core.paths import COMMAND
from sweep.core.text import terminal_safe

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
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__, epilog=EPILOG.format(cmd=COMMAND),
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
    r.add_argument("--strategy", choices=STRATEGIES, help="override the space's strategy")
    r.add_argument("--samples", type=int, help="points for random / trials for optuna")
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
    v = sub.add_parser("validate", help="check a space file: grid, legal points, the plan, the kernel globs",
                       description="Load a space file and print its grid, how many points are legal (and the first "
                                   "rule each illegal one breaks), what the strategy would build, and its kernel "
                                   "globs against a build's kernel names. Writes nothing; exit 1 on a bad file or a "
                                   "glob that matches no kernel of the build.")
    v.add_argument("space", type=Path, help="space file")
    v.add_argument("--build", type=Path, help="a dry run's job folder or a folder of built programs (default: a "
                                              "job folder of this space's earlier dry run under --jobs-dir)")
    _add_common(v)


def run(args: argparse.Namespace) -> int:
    tools = {}
    for tool in ("nsys", "ncu"):  # into every job's config.json: a job folder reruns by hand with the same profiler
        if getattr(args, tool):
            path = Path(getattr(args, tool)).expanduser()
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise SweepError(f"--{tool} {path}: no executable there; give the path to the {tool} program")
            tools[tool] = str(path.resolve())
    slurm = {k[len("slurm_"):]: v for k, v in vars(args).items() if k.startswith("slurm_") and v is not None}
    if "extra_sbatch" in slurm:
        slurm["extra_sbatch"] = tuple(slurm["extra_sbatch"])
    opts = pipeline.Options(executor=args.executor, jobs_root=args.jobs_dir, results_root=args.results_dir,
                            dry_run=args.dry_run, arch=args.arch, retry_failed=args.retry_failed,
                            confirm=not args.no_confirm, certify=args.certify, report=not args.no_report,
                            replay_from=args.replay_from.expanduser().resolve() if args.replay_from else None, **tools)
    s = pipeline.run(paths.shipped_file(args.space), opts, name=args.name, strategy=args.strategy, backend=args.backend,
                     samples=args.samples, slurm=slurm or None)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(s.counts.items()))
    print(f"\n{s.sweep}: {counts or 'nothing new to run'} in {s.seconds:.0f} s")
    if s.best:
        print("best launch sizes per kernel (" + ("weighted over the workloads: the sum of weight x per-iteration "
              "kernel time; then each workload's own pick" if s.best.workloads else "per-iteration kernel time") + "):")
        for line in select_mod.summary_lines(s.best):
            print("  " + terminal_safe(line))   # kernel names are a program's words
        for n in s.best.notes:
            print("  note: " + terminal_safe(n))
        conf = s.confirmation
        if conf.best_total_ns:
            print(f"combined best end to end: {conf.best_total_ns / 1e3:.1f} "
                  f"{'us weighted' if s.best.workloads else 'us/iter'} of swept kernels "
                  f"(sum of per-kernel bests {conf.sum_of_group_bests_ns / 1e3:.1f} us)"
                  + (f", {conf.speedup_vs_default:.2f}x the default launch sizes" if conf.speedup_vs_default else ""))
            for name, w in conf.workloads.items():
                print(f"  {name}: " + (f"{w['best_ns'] / 1e3:.1f} us/iter, {w['speedup_vs_default']:.2f}x the default "
                                       "launch sizes" if w.get("speedup_vs_default") else "not measured in both jobs"))
        print(f"results: {s.results_dir}/ (best/conf.cuh, best.json, measurements.parquet, report.html)")
    for model, entry in by_gpu_picks(s.results_dir).items():
        print(f"best launch sizes on {model} (results/{entry['results']}/, {s.results_dir / str(entry['conf'])}):")
        for line in select_mod.summary_lines(Best.from_dict(entry["best"])) if entry.get("best") else ["nothing measured"]:
            print("  " + terminal_safe(line))
    if s.no_legal:
        print(s.no_legal, file=sys.stderr)
        return EXIT_NOTHING_MEASURED
    if args.dry_run:
        failed = {k: v for k, v in s.counts.items() if k not in ("ok", "built")}
        return EXIT_NOTHING_MEASURED if failed and not (s.counts.get("built") or s.counts.get("ok")) else EXIT_OK
    if not s.measured and not s.best:
        print(f"nothing was measured: see `{COMMAND} status {s.sweep}` and "
              f"{s.results_dir / 'report.html'} for why", file=sys.stderr)
        return EXIT_NOTHING_MEASURED
    return EXIT_OK


def status(args: argparse.Namespace) -> int:
    names = [args.sweep] if args.sweep else sorted(d.name for d in args.jobs_dir.glob("*") if (d / "sweep.json").is_file())
    if not names:
        print(f"no sweeps under {args.jobs_dir}")
        return 0
    out = [manage.status(n, args.jobs_dir) for n in names]
    if args.format == "json":
        print(json.dumps(out, indent=2, default=str))
        return 0
    for s in out:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(s["counts"].items()))
        print(f"{s['sweep']}: {counts}  ({s['manifest'].get('strategy')}, {s['manifest'].get('backend')}, "
              f"{s['manifest'].get('executor')})")
        d = s["driver"]
        if d:
            state = "running" if d.get("alive") else "gone (the next run takes over)"
            print(f"  driver: host {d.get('host')}, pid {d.get('pid')}, started {d.get('started')}: {state}")
        for r in s["running"]:
            print(f"  running {r['tag']}: {r.get('stage')} on {r.get('host')} since {r.get('started')}"
                  + (f" (Slurm job {r['slurm_job']})" if r.get("slurm_job") else ""))
        for f in s["failures"]:   # a failure's reason is a program's last words: escapes spelled out
            print(terminal_safe(f"  {f['tag']}: {f['status']} ({f['stage']}: {f['reason']}) {f['log']}"))
        for b in s.get("built", []):
            print(terminal_safe(f"  {b['tag']}: built (dry run), " + (b["resources"] or "no ptxas lines in its build.log")))
        for line in array_lines(s["arrays"]):
            print("  " + line)
    return 0


def array_lines(arrays: list[dict]) -> list[str]:
    """Slurm arrays with tasks in the queue, one line each; those done summed in one line."""
    if arrays and "pending" not in arrays[0]:
        return [f"{len(arrays)} Slurm array(s), {sum(a['tasks'] for a in arrays)} tasks (squeue not found here: "
                "run status on a login node for their state)"]
    lines, done = [], [a for a in arrays if a["done"] == a["tasks"]]
    for a in arrays:
        if a in done:
            continue
        reasons = ", ".join(f"{k} {v}" for k, v in a["reasons"].items())
        after = f" after build array {a['after']}" if a["after"] else ""
        lines.append(f"array {a['array_id']} ({a['kind']}{after}, {a['tasks']} tasks): {a['pending']} pending"
                     + (f" ({reasons})" if reasons else "") + f", {a['running']} running, {a['done']} done")
    if done:
        lines.append(f"{len(done)} array(s) done ({sum(a['tasks'] for a in done)} tasks)")
    return lines


def need_sweep(args: argparse.Namespace) -> str:
    """The sweep name a command was given, else one line naming the fix."""
    if not args.sweep:
        raise SweepError(f"{args.command} needs a sweep name: `{COMMAND} {args.command} SWEEP` "
                         f"(`{COMMAND} status` lists them)")
    return args.sweep


def collect(args: argparse.Namespace) -> int:
    need_sweep(args)
    best, _ = manage.recollect(args.sweep, args.jobs_dir, args.results_dir)
    print(f"collected {args.sweep} into {args.results_dir / args.sweep}/")
    if best:
        for line in select_mod.summary_lines(best):
            print("  " + terminal_safe(line))
    return 0


def by_gpu_picks(results_dir: Path) -> dict:
    """A sweep measured on several GPU models: model -> its results folder, conf.cuh and picks ({} otherwise)."""
    path = results_dir / "best_by_gpu.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def best(args: argparse.Namespace) -> int:
    need_sweep(args)
    path = args.results_dir / args.sweep / "best.json"
    per_model = by_gpu_picks(args.results_dir / args.sweep)
    if per_model and not path.is_file():   # one conf.cuh per GPU model
        if args.format == "json":
            print(json.dumps(per_model, indent=2))
            return 0
        for model, entry in per_model.items():
            if entry.get("conf"):
                print(f"// {model}: {args.results_dir / args.sweep / entry['conf']}")
                print((args.results_dir / args.sweep / entry["conf"]).read_text())
        return 0
    if not path.is_file():
        raise SweepError(f"no {path}: run `{COMMAND} collect {args.sweep}` (or finish the sweep) first")
    data = load_record(Best, path)
    if args.format == "json":
        print(json.dumps(data.to_dict(), indent=2))
        return 0
    print((args.results_dir / args.sweep / "best" / "conf.cuh").read_text())
    return 0


def report(args: argparse.Namespace) -> int:
    """Re-collect from the jobs dir when there is one (else the results as collected), write
    report.html and report.md, and print the path (text), report.md, the summary (json) or
    the path of measurements.csv (csv)."""
    from sweep import report as report_mod

    need_sweep(args)
    jobs_dir, results_dir = args.jobs_dir / args.sweep, args.results_dir / args.sweep
    if (jobs_dir / "sweep.json").is_file():
        # collected without the report, which is written here once: a failure to write it is
        # this command's error, not a warning, so a stale report.html never passes for this one
        manage.recollect(args.sweep, args.jobs_dir, args.results_dir, report=False)
        per_model = by_gpu_picks(results_dir)
        if per_model:   # measured on several GPU models: a report per model (picks across them mean nothing)
            for entry in per_model.values():
                report_mod.write_report(args.results_dir / entry["results"])
                out = args.results_dir / entry["results"]
                print((out / "report.md").read_text() if args.format == "markdown" else out / "report.html")
            return 0
        report_mod.write_report(results_dir, jobs_dir=jobs_dir)
    elif (results_dir / "configs.parquet").is_file():
        report_mod.write_report(results_dir)
    else:
        raise SweepError(f"no sweep {args.sweep!r}: neither {jobs_dir} nor collected results in {results_dir}; run "
                         f"`{COMMAND} run SPACE.yaml --name {args.sweep}` first (or pass --jobs-dir / "
                         "--results-dir where it ran)")
    if args.format == "markdown":
        print((results_dir / "report.md").read_text(), end="")
    elif args.format == "json":
        print(json.dumps(report_mod.summary_json(results_dir), indent=2, default=str))
    elif args.format == "csv":
        print(results_dir / "measurements.csv")
    elif args.format == "t4":
        from sweep.report import t4

        print(t4.write_t4(results_dir))
    else:
        print(results_dir / "report.html")
    return 0


def compare(args: argparse.Namespace) -> int:
    """Two collected sweeps side by side: writes results/compare-A-vs-B.html and .md."""
    from sweep import report as report_mod

    html = report_mod.write_compare(args.results_dir, args.a, args.b)
    if args.format == "markdown":
        print(html.with_suffix(".md").read_text(), end="")
    elif args.format == "json":
        print(json.dumps(report_mod.compare_summary(args.results_dir, args.a, args.b), indent=2, default=str))
    else:
        print(html)
    return 0


def clean(args: argparse.Namespace) -> int:
    removed = manage.clean(args.sweep, args.jobs_dir, args.results_dir, everything=args.all)
    for p in removed:
        print(f"removed {p}")
    print(f"removed {len(removed)} path(s)" + ("" if args.all else "; measurements (result.json) kept"))
    return 0


def init(args: argparse.Namespace) -> int:
    from sweep.pipeline import adopt

    text = adopt.init(args.program_dir, args.output, args.build)
    if args.output is None:
        print(text, end="")
    else:
        print(f"wrote {args.output}: fill in what its comments say, then `{COMMAND} validate {args.output}`")
    return 0


def validate(args: argparse.Namespace) -> int:
    from sweep.pipeline import adopt
    from sweep.plan import validate as validate_mod

    v = adopt.validate(paths.shipped_file(args.space), args.build, args.jobs_dir)
    for line in validate_mod.lines(v):
        print(line)
    return EXIT_BAD_INPUT if v.unmatched else 0


COMMANDS = {"run": run, "status": status, "collect": collect, "best": best, "report": report, "compare": compare, "clean": clean,
            "init": init, "validate": validate}


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            rc = _main(argv)
        finally:   # argparse's --help and usage errors exit from inside _main
            sys.stdout.flush()   # here, not at exit: a reader gone by then is handled below
        return rc
    except BrokenPipeError:
        # `config-sweep best seed | head`: the reader took what it wanted. Output to it stops
        # quietly (stdout onto /dev/null, so the interpreter's last flush cannot fail either).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if not argv or argv[0] not in COMMANDS and argv[0] not in ("-h", "--help"):
        argv = ["run", *argv]  # `config_sweep.py [space] [options]` means run
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except DiskFull as e:
        print(f"error: {terminal_safe(e)}", file=sys.stderr)
        return EXIT_DISK_FULL
    except BrokenPipeError:
        raise
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        folders = {f"--{k.replace('_', '-')}": getattr(args, k) for k in ("jobs_dir", "results_dir")
                   if getattr(args, k, None) is not None} or {"--jobs-dir": "."}
        if e.filename:   # the file named: its folder's flag (results or jobs)
            flag = next((f for f, d in folders.items() if Path(e.filename).resolve().is_relative_to(Path(d).resolve())),
                        "--jobs-dir")
            print(f"error: {DiskFull.at(e.filename, flag=flag)}", file=sys.stderr)
        else:            # a flush names no file: the folder of the two whose filesystem is fullest
            print(f"error: {DiskFull.fullest(folders)}", file=sys.stderr)
        return EXIT_DISK_FULL
    except SweepError as e:
        print(f"error: {terminal_safe(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as e:   # the executor says what became of its jobs (local: stopped; Slurm: running)
        print("\n" + (e.args[0] if isinstance(e, Interrupted) and e.args else INTERRUPTED), file=sys.stderr)
        return EXIT_INTERRUPTED

if __name__ == "__main__":
    sys.exit(main())
