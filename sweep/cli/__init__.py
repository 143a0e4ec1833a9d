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
import signal
import sys
import threading
from pathlib import Path

from sweep.core import paths
from sweep.decide import select as select_mod
from sweep.pipeline import driver as pipeline, manage
from sweep.core.errors import DiskFull, SweepError
from sweep.dispatch import INTERRUPTED, Interrupted
from sweep.records import Best, load_record
from sweep.core.paths import COMMAND
from sweep.core.text import terminal_safe
from sweep.cli.parser import (EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_DISK_FULL, EXIT_INTERRUPTED,  # noqa: F401
                              EXIT_NOTHING_MEASURED, EXIT_OK, build_parser)


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
    options = dict(o.partition("=")[::2] for o in args.strategy_option)
    s = pipeline.run(paths.shipped_file(args.space), opts, strategy_options=options or None, name=args.name, strategy=args.strategy, backend=args.backend,
                     samples=args.samples, budget=args.budget, start_from=args.start_from, slurm=slurm or None,
                     overlap=args.overlap)
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
                  + (f", {conf.speedup_vs_default:.2f}x the default launch sizes" if conf.speedup_vs_default else "")
                  + (f" ({words})" if (words := select_mod.end_to_end_words(conf.vs_default)) else ""))
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
            print(terminal_safe(f"  {b['tag']}: built, not measured (a dry run, or an interrupted one), " + (b["resources"] or "no ptxas lines in its build.log")))
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
                print(terminal_safe((out / "report.md").read_text()) if args.format == "markdown" else out / "report.html")
            return 0
        report_mod.write_report(results_dir, jobs_dir=jobs_dir)
    elif (results_dir / "configs.parquet").is_file():
        report_mod.write_report(results_dir)
    else:
        raise SweepError(f"no sweep {args.sweep!r}: neither {jobs_dir} nor collected results in {results_dir}; run "
                         f"`{COMMAND} run SPACE.yaml --name {args.sweep}` first (or pass --jobs-dir / "
                         "--results-dir where it ran)")
    if args.format == "markdown":    # programs' messages in it: escapes spelled out on a terminal
        print(terminal_safe((results_dir / "report.md").read_text()), end="")
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
        print(terminal_safe(html.with_suffix(".md").read_text()), end="")
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

    v = adopt.validate(paths.shipped_file(args.space), args.build, args.jobs_dir, args.strategy, args.budget,
                       args.start_from)
    for line in validate_mod.lines(v):
        print(terminal_safe(line))      # globs are the space file's words, kernel names a build's
    return EXIT_BAD_INPUT if v.unmatched else 0


def choose(args: argparse.Namespace) -> int:
    from sweep.pipeline import choose as choose_mod

    names = tuple(n.strip() for n in args.strategies.split(",") if n.strip())
    for line in choose_mod.run(paths.shipped_file(args.space), args.replay_from, names, args.seeds, args.budgets,
                               args.parallel, args.jobs, args.json, args.start_from, args.each_budget):
        print(terminal_safe(line))      # a recording's device and a program's kernel names are its own words
    return 0


COMMANDS = {"run": run, "status": status, "collect": collect, "best": best, "report": report, "compare": compare, "clean": clean,
            "init": init, "validate": validate, "choose": choose}


def main(argv: list[str] | None = None) -> int:
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # A shell script's background job starts with SIGINT ignored, and the local executor's workers
        # handle it (sweep.dispatch.workers): a driver ignoring it would watch them stop and record
        # their jobs as failed. An interrupt stops a sweep the same however it was started.
        signal.signal(signal.SIGINT, signal.default_int_handler)
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
