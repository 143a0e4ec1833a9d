"""Dispatching jobs: the local executor's one job per GPU, resume, retry rules."""

from __future__ import annotations

import json

import pytest

from sweep import dispatch
from sweep.pipeline import driver as pipeline
from sweep.records import JobResult, write_result
from sweep.records import JobConfig
from tests.conftest import needs_nvcc

pytestmark = needs_nvcc


def test_local_executor_runs_one_job_per_visible_gpu_at_a_time(write_space, dirs, fake_gpus, monkeypatch):
    monkeypatch.setenv("TOY_BENCH_SLEEP_MS", "1500")
    jobs, results = dirs
    space = write_space(parameters={"ALPHA_BLOCK": {"tag": "A", "values": [64, 128, 256, 512], "kernels": ["alpha_kernel"]},
                                    "BETA_X": {"tag": "B", "values": [32], "kernels": ["beta_kernel"]},
                                    "BETA_Y": {"tag": "B", "values": [4], "kernels": ["beta_kernel"]}},
                        run={"verify": False})
    # build first (a dry run), so measurements are not paced by one build at a time on a small machine
    opts = dict(executor="local", jobs_root=jobs, results_root=results, confirm=False, report=False, poll_s=0.05)
    pipeline.run(space, pipeline.Options(dry_run=True, **opts))
    s = pipeline.run(space, pipeline.Options(**opts))
    assert s.counts == {"ok": 4}
    gpus, spans = [], []
    for d in sorted((jobs / "toy").glob("A*")):
        r = json.loads((d / "result.json").read_text())
        assert r["env"]["gpu"] == "toy"                              # one GPU model ...
        gpus.append(r["env"]["gpu_uuid"])                            # ... two GPUs of it
        spans.append(r["intervals"]["profile"])                     # [start, end], epoch seconds
    assert sorted(set(gpus)) == ["toy-GPU-0", "toy-GPU-1"]
    assert gpus.count("toy-GPU-0") == 2 and min(b - a for a, b in spans) >= 1.5
    # two GPUs of one model are compared together (not as two models, one of them left out)
    (alpha,) = [c for c in s.best.choices if c.macros == ("ALPHA_BLOCK",)]
    assert {x.values["ALPHA_BLOCK"] for x in alpha.candidates} == {64, 128, 256, 512}
    assert not any("GPU models" in n for n in s.best.notes) and alpha.values == {"ALPHA_BLOCK": 128}

    def overlap(x, y):
        return x[0] < y[1] and y[0] < x[1]

    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    assert not any(overlap(spans[i], spans[j]) for i, j in pairs if gpus[i] == gpus[j])   # one at a time per GPU
    assert any(overlap(spans[i], spans[j]) for i, j in pairs if gpus[i] != gpus[j])       # the two GPUs at once


def test_second_run_resumes_and_measures_nothing_again(write_space, dirs, fake_gpus):
    jobs, results = dirs
    space = write_space(parameters={"ALPHA_BLOCK": {"tag": "A", "values": [64, 96, 128], "kernels": ["alpha_kernel"]},
                                    "BETA_X": {"tag": "B", "values": [32], "kernels": ["beta_kernel"]},
                                    "BETA_Y": {"tag": "B", "values": [4], "kernels": ["beta_kernel"]}})
    opts = pipeline.Options(executor="debug", jobs_root=jobs, results_root=results, confirm=False, report=False)
    first = pipeline.run(space, opts)
    stamps = {d.name: (d / "result.json").stat().st_mtime_ns for d in (jobs / "toy").glob("A*")}
    again = pipeline.run(space, opts)
    assert first.counts == {"ok": 2, "verify_failed": 1} and again.counts == {}
    assert stamps == {d.name: (d / "result.json").stat().st_mtime_ns for d in (jobs / "toy").glob("A*")}
    assert again.best.config["ALPHA_BLOCK"] == 128


def test_retry_failed_reruns_failures_but_not_one_that_failed_the_same_way_twice(write_space, dirs, fake_gpus):
    jobs, results = dirs
    space = write_space(parameters={"ALPHA_BLOCK": {"tag": "A", "values": [96], "kernels": ["alpha_kernel"]},
                                    "BETA_X": {"tag": "B", "values": [32], "kernels": ["beta_kernel"]},
                                    "BETA_Y": {"tag": "B", "values": [4], "kernels": ["beta_kernel"]}})
    d = jobs / "toy" / "A96_B32x4"
    opts = pipeline.Options(executor="debug", jobs_root=jobs, results_root=results, confirm=False, report=False)
    pipeline.run(space, opts)
    cfg = JobConfig.load(d)
    # a failure the scheduler recorded (not final): retried with --retry-failed
    write_result(d, JobResult(sweep="toy", tag=d.name, config_hash=cfg.config_hash, macros=cfg.macros,
                              status="runtime_failed", stage="job", reason="node died"))
    assert dispatch.should_run(d, cfg.config_hash, retry_failed=False) == (False, "runtime_failed (use --retry-failed to run it again)")
    assert dispatch.should_run(d, cfg.config_hash, retry_failed=True) == (True, "")
    write_result(d, JobResult(sweep="toy", tag=d.name, config_hash=cfg.config_hash, macros=cfg.macros,
                              status="runtime_failed", stage="job", reason="node died",
                              history=({"status": "runtime_failed", "stage": "job", "reason": "node died"},)))
    go, why = dispatch.should_run(d, cfg.config_hash, retry_failed=True)
    assert not go and "failed the same way twice" in why


def test_a_result_for_another_config_hash_is_not_done(tmp_path):
    write_result(tmp_path, JobResult(sweep="s", tag="t", config_hash="old", macros={}, status="ok"))
    assert dispatch.should_run(tmp_path, "new", retry_failed=False) == (True, "")


def test_a_job_another_local_driver_runs_is_not_started_twice(tmp_path):
    import os

    (tmp_path / "state.json").write_text(json.dumps({"host": os.uname().nodename, "pid": os.getpid()}))
    assert dispatch.running_elsewhere(tmp_path)
    (tmp_path / "state.json").write_text(json.dumps({"host": os.uname().nodename, "pid": 2**22 + 12345}))
    assert not dispatch.running_elsewhere(tmp_path)


def test_progress_line_counts_done_failed_running_and_queued():
    import io

    out = io.StringIO()
    p = dispatch.Progress("s", 5, stream=out)
    p.finished(JobResult(sweep="s", tag="a", config_hash="h", macros={}, status="ok"))
    p.finished(JobResult(sweep="s", tag="b", config_hash="h", macros={}, status="verify_failed", stage="verify",
                         reason="wrong", log="/x/verify.log"))
    p.show(running=1)
    p.close()  # off a terminal the state line is written at most every 10 s, and at close
    text = out.getvalue()
    assert "b: verify_failed (verify: wrong) -> /x/verify.log" in text
    assert "2/5 done (ok 1, failed 1, skipped 0) | 1 running | 2 queued" in text


@pytest.mark.parametrize("before", ["", "/tmp/site", "{root}", "{root}:/tmp/site", "/tmp/site:{root}"],
                         ids=["unset", "other-folder", "root-only", "root-first", "root-later"])
def test_job_processes_import_the_framework_and_keep_every_folder_already_on_pythonpath(monkeypatch, before):
    import os

    from sweep.core import paths

    root = str(paths.IMPORT_ROOT)
    monkeypatch.setenv("PYTHONPATH", before.format(root=root))
    got = dispatch.job_environment()["PYTHONPATH"].split(os.pathsep)
    assert root in got and ("/tmp/site" in got) == ("/tmp/site" in before)


def test_a_gpu_named_by_uuid_in_cuda_visible_devices_is_measured_on_with_that_uuid(write_space, dirs, monkeypatch):
    """CUDA_VISIBLE_DEVICES=GPU-<uuid> (as Slurm and MIG set it) counted as no GPU."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f3a2b1c-0000-1111-2222-333344445555")
    jobs, results = dirs
    space = write_space(parameters={"ALPHA_BLOCK": {"tag": "A", "values": [128], "kernels": ["alpha_kernel"]},
                                    "BETA_X": {"tag": "B", "values": [32], "kernels": ["beta_kernel"]},
                                    "BETA_Y": {"tag": "B", "values": [4], "kernels": ["beta_kernel"]}},
                        run={"verify": False})
    s = pipeline.run(space, pipeline.Options(executor="local", jobs_root=jobs, results_root=results, confirm=False,
                                             report=False, poll_s=0.05))
    assert s.counts == {"ok": 1}
    (d,) = (jobs / "toy").glob("A*")
    assert json.loads((d / "result.json").read_text())["env"]["gpu_uuid"] == \
        "toy-GPU-GPU-8f3a2b1c-0000-1111-2222-333344445555"


@pytest.mark.parametrize("name, words", [("slurm", "keep running"), ("debug", "what ran is kept")])
def test_an_interrupt_while_watching_says_what_became_of_the_executors_jobs(name, words, tmp_path):
    from sweep import dispatch

    cls = dispatch.executor(name)

    class Watched(cls):
        def submit(self, jobs, stages, progress=None):
            pass

        def watch(self, on_result, progress):
            raise KeyboardInterrupt

        def cancel(self):
            pass

    ex = Watched.__new__(Watched)
    with pytest.raises(dispatch.Interrupted) as info:
        ex.run([dispatch.PendingJob("t", tmp_path, "h")], "all", lambda r: None, None)
    assert words in info.value.args[0]
