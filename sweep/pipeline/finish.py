"""After the sweep: collect, select, certify, confirm, write the results (per GPU model).

    finish(space, sw, results_dir, confirm, certify_picks)
        collect -> select each group's pick -> certify it (a race on one GPU,
        sweep.decide.certify) -> confirm the combined best against the defaults end to end
        -> results_dir: tables, best.json, best/conf.cuh, confirmation.json, report

A sweep measured on several GPU models (slurm.partitions, sweep.decide.by_gpu) does all of
this once per model, on that model's jobs alone and on its own partition: the
race, the baseline and the combined best run there, so each model's picks are
certified and confirmed on the GPU they are for, and its results folder
(results/<sweep>.<model>/) holds what a one-model sweep's does.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, Callable, Protocol

from sweep.core import atomic
from sweep.decide import by_gpu, certify, collect as collect_mod, select as select_mod
from sweep.node import render
from sweep.pipeline import folders
from sweep.plan import validate
from sweep.space import target
from sweep.records import Best, Confirmation
from sweep.space import Space, pick_config
from sweep.core.paths import COMMAND



class Sweep(certify.Sweep, Protocol):
    """What finishing needs of the sweep being run (sweep.pipeline.driver.Sweep): a race's
    needs, and the run's options."""

    opts: Any
    digest: str


def finish(space: Space, sw: Sweep, results_dir: Path, confirm: bool,
           certify_picks: bool | None = None) -> tuple[Best | None, Confirmation]:
    """Collect, select, certify each pick in a race (sweep.decide.certify), confirm the combined best
    against the defaults, write results and the report. certify_picks (default: confirm) runs
    the race; without it a race already run for the same candidates still counts, so
    collecting again (confirm=False) runs nothing on a GPU."""
    certify_picks = confirm if certify_picks is None else certify_picks
    folders.claim_results(results_dir)      # `collect` comes here without the driver's claim
    keep = collect_mod.in_space(space, sw.digest)   # a narrowed space's old points stay on disk, unread

    def collect() -> collect_mod.Collected:
        return collect_mod.collect(sw.sweep_dir, keep)

    c = collect()
    models = by_gpu.models(c.configs)
    if len(space.slurm.partitions) > 1 and len(models) > 1:   # several GPU models: picks per model, not across them
        write_collected(c, sw.sweep_dir, results_dir)
        picks = {}
        for model, part in by_gpu.partitions_of(space, c).items():
            def sub(m: str = model) -> collect_mod.Collected:
                return by_gpu.split(collect()).get(m) or by_gpu.empty(c)
            out = folders.claim_results(by_gpu.results_dir(results_dir, space, model))
            best, _ = _finish_one(space, sw, sub, out, confirm, certify_picks, part, several_models=False)
            picks[model] = best
        by_gpu.write_index(space, results_dir, picks)
        names = [f"{space.name}.{by_gpu.slug(m)}" for m in models]
        print(f"{len(names)} GPU models ({', '.join(picks)}): results and picks per model in {', '.join(names)}; "
              f"side by side: {COMMAND} compare {names[0]} {names[1]}", file=sys.stderr)
        return None, Confirmation()
    return _finish_one(space, sw, collect, results_dir, confirm, certify_picks, "",
                       several_models=len(models) > 1, collected=c)


def _finish_one(space: Space, sw: Sweep, collect: Callable[[], collect_mod.Collected], results_dir: Path,
                confirm: bool, certify_picks: bool, partition: str, several_models: bool,
                collected: collect_mod.Collected | None = None) -> tuple[Best | None, Confirmation]:
    """finish() for one GPU model: `collect` gives its jobs' tables (again after each GPU step);
    the race, the baseline and the combined best run on `partition` ("" : slurm.partition)."""
    c = collected if collected is not None else collect()
    best, conf = None, Confirmation()

    def job(config, tag: str, role: str):
        return sw.render(config, by_gpu.partition_tag(tag, partition) if partition else tag, role=role,
                         partition=partition)

    if c.measurements.empty:
        print(collect_mod.nothing_measured(c.configs), file=sys.stderr)
    else:
        best = select_mod.select(space, c.measurements)
        if confirm or certify_picks:   # GPU steps follow: a sweep stopped in them still leaves its picks
            _write_provisional(space, sw, c, best, results_dir)
        baseline = job(None, render.BASELINE_TAG, "baseline") if confirm or certify_picks else None
        certified, why = {}, "certify.enabled is false"
        if space.certify.enabled and certify_picks and best.choices:
            if certify.needs_baseline(space, best):   # the default entrant of some group's race
                _confirm(space, sw, [baseline])
                c = collect()
            certified, why = certify.run(space, sw, best, c, partition)
        elif space.certify.enabled:
            certified = certify.recorded(space, sw.sweep_dir, best, c)
            why = "not asked (--no-certify, or --no-confirm without --certify)"
        best = select_mod.select(space, c.measurements, certified)
        if confirm and best.choices:
            _confirm(space, sw, [baseline, job(_config_of(space, best), "best", "best")])
            c = collect()
            best = select_mod.select(space, c.measurements, certified)
        best = certify.unraced(space, best, c, certified, why)
        conf = select_mod.confirmation(space, c.measurements, c.configs, best)
        warning = select_mod.end_to_end_note(conf, best)
        best = dataclasses.replace(best, notes=(*best.notes, *([warning] if warning else []),
                                                *_notes(space, c, several_models)))
    write_collected(c, sw.sweep_dir, results_dir)
    if best is not None:
        _write_picks(space, sw, best, conf, results_dir)
    if sw.opts.report:
        try:
            from sweep import report

            report.write_report(results_dir, space=space)
        except Exception as e:  # the report is a view: the results above are already written
            print(f"warning: {results_dir / 'report.html'} not written ({type(e).__name__}: {e}); the tables and "
                  f"best/conf.cuh are; retry with `{COMMAND} report {results_dir.name}`", file=sys.stderr)
    return best, conf


PROVISIONAL = ("provisional: picked from the sweep's measurements before its certification race and end-to-end "
               "confirmation ran; neither certified nor confirmed. The finished sweep rewrites this file; if it was "
               "stopped, run it again to finish (measured jobs are reused, not rerun)")
NOT_RACED_YET = "the race had not run when this was written (provisional)"


def _write_provisional(space: Space, sw: Sweep, c: collect_mod.Collected, best: Best, results_dir: Path) -> None:
    """The tables and the picks as selected before the race and the confirmations (marked so, with
    no confirmation): so a sweep killed in those GPU steps still leaves what it measured and picked."""
    write_collected(c, sw.sweep_dir, results_dir)
    best = certify.unraced(space, best, c, {}, NOT_RACED_YET)
    _write_picks(space, sw, dataclasses.replace(best, notes=(PROVISIONAL, *best.notes)), Confirmation(), results_dir)


def _write_picks(space: Space, sw: Sweep, best: Best, conf: Confirmation, results_dir: Path) -> None:
    conf_text = render.render_conf(render.job_config(space, _config_of(space, best), "best", "-", sw.commit))
    select_mod.write_best(best, results_dir, conf_text)
    atomic.write_json(results_dir / "confirmation.json", conf.to_dict())


def _config_of(space: Space, best: Best):
    """The combined pick as a Config: a group that kept the program's own launch sizes sets no macro."""
    return pick_config(space, {p.macro: best.config[p.macro] for p in space.swept if p.macro in best.config})


def _notes(space: Space, c: collect_mod.Collected, several_models: bool) -> tuple[str, ...]:
    """What the picks' reader must know about how they were measured."""
    notes = []
    same = collect_mod.identical_builds(c.configs, [p.macro for p in space.parameters])
    if same:
        n = sum(len(s) for s in same)
        notes.append(
            f"conf.cuh had no effect: {n} configurations with different macros built byte-identical objects "
            f"({'; '.join(', '.join(s[:4]) + (' ...' if len(s) > 4 else '') for s in same[:3])}). Likely a "
            "conf.cuh earlier on the include path (e.g. beside the target's sources) shadows the generated one: "
            "put -I$(CONF_DIR) first in the Makefile's flags, or check the macros are read where the kernels "
            "are compiled")
    m = c.measurements
    measured = m.loc[m["status"] == "ok", "kernel"] if {"status", "kernel"} <= set(m.columns) else ()
    try:
        missed = validate.unlisted_measured(space, measured)
    except (OSError, RecursionError, MemoryError, ValueError):
        missed = ()         # advice from reading the sources: a reading that fails must not cost the picks
    if missed:
        said = "; ".join(f"{macro} is read in {', '.join(kernels)}" for macro, kernels in missed)
        notes.append(
            f"kernels: lists miss kernels the sweep measured whose code reads their macros, as the sources say: {said}. "
            "Those kernels' times are not in the picks of these macros (and a factorized sweep varied the macros "
            f"under them as another group's): add them to the kernels: lists (`{COMMAND} validate {space.path}` "
            "shows the reading)")
    if several_models:
        models = by_gpu.models(c.configs)
        notes.append(
            f"measured on {len(models)} GPU models ({', '.join(models)}): these picks mix them; list one partition "
            "per model in slurm.partitions for picks per model, or keep to one model (--constraint)")
    return tuple(notes)


def _confirm(space: Space, sw: Sweep, jobs: list) -> None:
    """Run the end-to-end jobs (baseline, best) that have no result of their configuration yet."""
    sw.run_pending(jobs, space.name + ":confirm", "confirming end to end")


def write_collected(c: collect_mod.Collected, sweep_dir: Path, results_dir: Path) -> None:
    """The tables, the manifest and the space as run, under results_dir."""
    collect_mod.write_tables(c, results_dir)
    atomic.write_json(results_dir / "manifest.json", c.manifest.to_dict())
    snapshot = sweep_dir / (c.manifest.space_snapshot or target.SNAPSHOT)
    if snapshot.is_file():  # so the report reads the space as run from results/ alone
        atomic.write_bytes(results_dir / target.SNAPSHOT, snapshot.read_bytes())
