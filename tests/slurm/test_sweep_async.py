"""Asynchronous search on the real test cluster: optuna keeps array_parallelism trials in
flight and gets a new one submitted as each ends, so a slow trial holds up no other; a learning
sweep with a GPU-seconds budget submits its first configuration alone."""

from __future__ import annotations

import json
from pathlib import Path

from test_sweep_slurm import cli, toy_space

# The slow trial waits, rather than sleeping a fixed time, until three trials finished after it
# began (with at most two in flight, two of them started after it did), at most WAIT_S: on a
# loaded machine (CI's second xdist worker compiling beside the cluster) a fixed sleep can end
# before two trials get through their builds, and on an idle one it waits longer than needed.
WAIT_S = 300


def test_trials_keep_flowing_while_one_trial_runs_long(tmp_path):
    jobs = tmp_path / "jobs"
    # The first trial to reach its measurement claims the marker folder (mkdir is atomic), names
    # itself in it and waits; if trials were held up behind it, the wait runs out with none done.
    finished_since = "find {job}/.. -mindepth 2 -maxdepth 2 -name result.json -newer {job}/../_slow/who | wc -l"
    slow_bench = (f'if mkdir {{job}}/../_slow 2>/dev/null; then basename {{job}} > {{job}}/../_slow/who; i=0; '
                  f'while [ $i -lt {WAIT_S} ] && [ $({finished_since}) -lt 3 ]; do sleep 1; i=$((i+1)); done; fi; '
                  f'exec {{build}}/toy_bench -n {{iterations}} "$@"')
    space = toy_space(tmp_path, "async", alphas=(32, 64, 128, 256), beta_x=(16, 32, 64),
                      strategy={"name": "optuna", "samples": 6, "seed": 1},
                      target={"name": "toy", "dir": str(Path(__file__).parents[1] / "data" / "toy_target"),
                              "verify": ["{build}/toy_check"], "profile": ["sh", "-c", slow_bench, "toy_bench"],
                              "events": ["--json", "{events_json}"]})
    p = cli("run", str(space), "--executor", "slurm", "--no-confirm", "--jobs-dir", str(jobs), "--results-dir",
            str(tmp_path / "r"), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    results = [json.loads(f.read_text()) for f in (jobs / "async").glob("*/result.json")]
    assert len(results) == 6 and all(r["status"] == "ok" for r in results), [(r["tag"], r["reason"]) for r in results]
    slow = [r for r in results if r["tag"] == (jobs / "async" / "_slow" / "who").read_text().strip()]
    assert len(slow) == 1
    start, end = slow[0]["intervals"]["profile"]
    during = [r["tag"] for r in results if r is not slow[0]
              and start < r["intervals"]["build"][0] and r["intervals"]["profile"][1] < end]
    assert len(during) >= 2, f"trials started and ended while {slow[0]['tag']} ran: {during}"
    records = json.loads((jobs / "async" / "_dispatch" / "slurm.json").read_text())
    assert len(records) >= 4 and all(len(r["tags"]) <= 2 for r in records)  # one small array per ask


def test_a_gpu_seconds_budget_sends_its_first_configuration_alone_then_fills_the_slots(tmp_path):
    # With no result yet there is no cost to expect, so the learning strategy's first Slurm array
    # holds one configuration; once its cost is known the next asks fill the slots as usual. One
    # model of the summed time: a model per group would measure each group's values whole in 4.
    jobs = tmp_path / "jobs"
    space = toy_space(tmp_path, "budget-s", alphas=(32, 64, 128, 256), beta_x=(16, 32, 64),
                      strategy={"name": "learning", "budget": 6, "budget_s": 600, "seed": 0, "per_group": False})
    p = cli("run", str(space), "--executor", "slurm", "--no-confirm", "--jobs-dir", str(jobs), "--results-dir",
            str(tmp_path / "r"), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    results = [json.loads(f.read_text()) for f in (jobs / "budget-s").glob("*/result.json")]
    assert len(results) == 6 and all(r["status"] == "ok" for r in results), [(r["tag"], r["reason"]) for r in results]
    records = json.loads((jobs / "budget-s" / "_dispatch" / "slurm.json").read_text())
    assert len(records[0]["tags"]) == 1 and max(len(r["tags"]) for r in records[1:]) > 1, records
