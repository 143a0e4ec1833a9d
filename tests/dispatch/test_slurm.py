"""sweep.dispatch.slurm's translation of a space's slurm: settings into sbatch options (no cluster needed).

What the real cluster does with them is pinned in tests/slurm/."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.core.errors import SweepError
from sweep.dispatch.slurm import executor_parameters
from sweep.space import Slurm


def test_settings_become_submitit_parameters_and_extra_options_keep_their_values():
    params = executor_parameters(Slurm(partition="gpu", constraint="h100&ib", mem="16G", time_min=8,
                                       extra_sbatch=("--exclusive", "--mail_type=END")), "seed")
    assert params["partition"] == "gpu" and params["constraint"] == "h100&ib" and params["mem"] == "16G"
    assert params["job_name"] == "sweep-seed" and params["time"] == 8 and params["gpus_per_node"] == 1
    assert params["additional_parameters"] == {"exclusive": True, "mail-type": "END"}
    # the warning signal must come before an 8-minute limit, with time to record the stage
    assert 15 <= params["signal_delay_s"] < 8 * 60


def test_no_gpus_requested_leaves_the_gres_out():
    assert "gpus_per_node" not in executor_parameters(Slurm(gpus_per_job=0), "s")


@pytest.mark.parametrize("settings", [
    {"partition": "gpu\n#SBATCH --account=someone-else"},
    {"account": "my lab"},
    {"qos": "high\r"},
    {"constraint": "h100\x00"},
    {"extra_sbatch": ("--comment=two words",)},
], ids=["newline", "space", "carriage-return", "nul", "extra-option"])
def test_a_value_an_sbatch_line_cannot_carry_is_refused_naming_it(settings):
    with pytest.raises(SweepError, match="cannot carry") as e:
        executor_parameters(Slurm(**settings), "s")
    key = next(iter(settings))
    assert (key if key != "extra_sbatch" else "--comment=two words") in str(e.value)


def test_an_extra_option_that_is_not_an_sbatch_option_is_refused():
    with pytest.raises(SweepError, match="must look like --name"):
        executor_parameters(Slurm(extra_sbatch=("exclusive",)), "s")


# ---------------------------------------------------------------------------
# The cluster's limits and how a plan is split to fit them (sweep.dispatch.slurm_limits)
# ---------------------------------------------------------------------------

from sweep.dispatch.slurm_limits import (ASSOC_FIELDS, LIMIT_REFUSALS, QOS_FIELDS, Limits, failure,  # noqa: E402
                                          next_array, parse_config, parse_parsable, sacctmgr_commands,
                                          submit_limits, throttles)
from sweep.dispatch.slurm_queue import Queued, parse_squeue  # noqa: E402

# `scontrol show config` of the test cluster (Slurm 22.05.8), shortened
SCONTROL_CONFIG = """Configuration data as of 2026-11-23T23:04:56
AccountingStorageBackupHost = (null)
AccountingStorageEnforce = none
MaxArraySize            = 11
MaxJobCount             = 10000
MaxJobId                = 67043328
MinJobAge               = 300 sec
"""


def test_scontrol_config_gives_max_array_size_and_max_job_count():
    config = parse_config(SCONTROL_CONFIG)
    assert (config["MaxArraySize"], config["MaxJobCount"], config["MinJobAge"]) == ("11", "10000", "300 sec")
    assert "Configuration data as of 2026-11-23T23:04:56" not in config


# `squeue -h -r -o '%i|%T|%r'` on the test cluster: a build array that failed (its dependent
# array pends forever), a throttled array, one waiting for CPUs and one on a running dependency
SQUEUE = """22_1|PENDING|DependencyNeverSatisfied
23_1|PENDING|JobArrayTaskLimit
27_2|PENDING|Resources
28_0|PENDING|Dependency
23_0|RUNNING|None
"""


def test_squeue_lines_give_each_task_its_state_and_pending_reason():
    assert parse_squeue(SQUEUE) == {"22_1": Queued("PENDING", "DependencyNeverSatisfied"),
                                    "23_1": Queued("PENDING", "JobArrayTaskLimit"),
                                    "27_2": Queued("PENDING", "Resources"), "28_0": Queued("PENDING", "Dependency"),
                                    "23_0": Queued("RUNNING", "None")}


# sacctmgr's answers on the test cluster (Slurm 22.05.8 with slurmdbd and MariaDB 10.11), captured by
# tests/data/sacctmgr/capture.sh: see its README for what each file is
SACCTMGR = Path(__file__).resolve().parents[1] / "data" / "sacctmgr"


def test_the_captures_answer_the_exact_commands_the_driver_runs():
    assert [" ".join(c) for c in sacctmgr_commands("root", "sweep")] == (SACCTMGR / "commands.txt").read_text().splitlines()
    assert "cluster=" not in " ".join(sacctmgr_commands("root", None)[0])  # no ClusterName: every cluster's


@pytest.mark.parametrize("assoc, qos, account, qos_name, expected", [
    # as cluster.sh sets it up: root in accounts sweep and root, both with the default QOS capped
    ("assoc.txt", "qos.txt", None, None, [(15, "MaxSubmitJobsPerUser 15 of QOS capped (sacctmgr)")]),
    # with MaxSubmitJobs=12 on root/sweep and the QOS long (20) and high (no limit)
    ("assoc_limit.txt", "qos_more.txt", None, None, [(12, "MaxSubmitJobs 12 of association root/sweep (sacctmgr)"),
                                                     (15, "MaxSubmitJobsPerUser 15 of QOS capped (sacctmgr)")]),
    ("assoc_limit.txt", "qos_more.txt", "root", None, [(15, "MaxSubmitJobsPerUser 15 of QOS capped (sacctmgr)")]),
    ("assoc_limit.txt", "qos_more.txt", "sweep", "long", [(12, "MaxSubmitJobs 12 of association root/sweep (sacctmgr)"),
                                                          (20, "MaxSubmitJobsPerUser 20 of QOS long (sacctmgr)")]),
    ("assoc_limit.txt", "qos_more.txt", "root", "high", []),           # no own limit, a QOS without one
])
def test_association_and_qos_submit_limits_apply_to_the_account_and_qos_asked_for(assoc, qos, account, qos_name,
                                                                                 expected):
    assocs = parse_parsable((SACCTMGR / assoc).read_text(), ASSOC_FIELDS)
    assert submit_limits(assocs, parse_parsable((SACCTMGR / qos).read_text(), QOS_FIELDS), account, qos_name) == expected


@pytest.mark.parametrize("capture, reason", [
    ("slurmdbd_down.err", "failed to open persistent connection to host:localhost:6819: Connection refused"),
    ("mariadb_down.err", ("Something happened with the receiving/processing of the persistent connection init "
                          "message to localhost:6819: Unable to connect to database")),
    ("no_slurmdbd.err", "You are not running a supported accounting_storage plugin"),
])
def test_why_sacctmgr_said_nothing_is_its_first_error_in_one_line(capture, reason):
    assert failure((SACCTMGR / capture).read_text()) == reason


@pytest.mark.parametrize("message, waits", [
    # sbatch's words when a QOS submit limit is reached
    ("sbatch: error: QOSMaxSubmitJobPerUserLimit\nsbatch: error: Batch job submission failed: Job violates "
     "accounting/QOS policy (job submit limit, user's size and/or time limits)", True),
    ("sbatch: error: Batch job submission failed: Slurm temporarily unable to accept job, sleeping and retrying", True),
    # captured on the test cluster: an array larger than MaxArraySize is a bad request, not a limit that passes
    ("sbatch: error: Batch job submission failed: Invalid job array specification", False),
    ("sbatch: error: invalid partition specified: gpu", False),
])
def test_a_refusal_for_a_submit_limit_waits_while_a_bad_request_fails(message, waits):
    assert bool(LIMIT_REFUSALS.search(message)) == waits


@pytest.mark.parametrize("waiting, queued, running, max_submit, per, expected", [
    (2500, 0, 0, None, 1, (1001, 16)),     # Slurm's default MaxArraySize splits a large plan
    (2500, 0, 10, None, 1, (1001, 6)),     # earlier arrays hold 10 of the 16 slots
    (2500, 0, 16, None, 1, (0, 0)),        # no slot free: the next array waits
    (2500, 90, 0, 100, 1, (10, 10)),       # 90 tasks of the user queued, 100 allowed
    (2500, 90, 0, 100, 2, (5, 5)),         # a build and a measure task per configuration
    (2500, 100, 0, 100, 1, (0, 0)),        # the queue is full
    (3, 0, 0, 100, 1, (3, 3)),
])
def test_the_next_array_fits_max_array_size_the_submit_limit_and_the_free_parallelism(waiting, queued, running,
                                                                                     max_submit, per, expected):
    assert next_array(waiting, queued, running, Limits(1001, max_submit), 16, per) == expected


@pytest.mark.parametrize("arrays, expected", [
    ([(5, 16)], [16]),                      # one array keeps its throttle
    ([(0, 16), (900, 2)], [16, 16]),        # the first has drained: the second gets the whole parallelism
    ([(10, 16), (900, 6)], [16, 6]),        # the first still runs up to 10: the second keeps its 6
    ([(3, 16), (900, 6)], [16, 13]),        # the first has 3 left: the second may run 13
    ([(3, 16), (4, 2), (900, 1)], [16, 4, 9]),
])
def test_throttles_rise_as_earlier_arrays_drain_and_never_exceed_the_parallelism(arrays, expected):
    assert throttles(arrays, 16) == expected


def test_a_refused_submission_teaches_the_driver_a_submit_limit_it_keeps():
    learned = Limits(1001, None).learned(40, "QOSMaxSubmitJobPerUserLimit")
    assert learned.max_submit == 40 and "sbatch refused more" in learned.describe()
    assert learned.learned(60, "again").max_submit == 40


def test_a_build_array_goes_to_the_build_partition_without_gpus_or_gpu_features():
    s = Slurm(partition="gpu", constraint="h100", build_partition="cpu", build_cpus=8, build_time_min=7)
    params = executor_parameters(s, "seed", build=True)
    assert params["partition"] == "cpu" and params["cpus_per_task"] == 8 and params["time"] == 7
    assert "gpus_per_node" not in params and "constraint" not in params and params["job_name"] == "sweep-seed-build"


def test_status_shows_each_array_pending_with_slurms_reasons_running_and_done():
    from sweep.cli import array_lines
    from sweep.dispatch.slurm_submit import array_status

    records = [{"array_id": "21", "job_ids": ["21_0", "21_1"], "dirs": ["a", "b"], "stages": "build", "build": True},
               {"array_id": "22", "job_ids": ["22_0", "22_1"], "dirs": ["a", "b"], "stages": "measure", "after": "21"},
               {"array_id": "23", "job_ids": ["23_0", "23_1", "23_2"], "dirs": ["c", "d", "e"], "stages": "all"},
               {"array_id": "27", "dirs": ["f", "g", "h"], "stages": "all"}]
    arrays = array_status(records, parse_squeue(SQUEUE))
    assert [(a["pending"], a["running"], a["done"], a["reasons"]) for a in arrays] == [
        (0, 0, 2, {}), (1, 0, 1, {"DependencyNeverSatisfied": 1}), (1, 1, 1, {"JobArrayTaskLimit": 1}),
        (1, 0, 2, {"Resources": 1})]
    assert array_lines(arrays) == [
        "array 22 (measure after build array 21, 2 tasks): 1 pending (DependencyNeverSatisfied 1), 0 running, 1 done",
        "array 23 (all, 3 tasks): 1 pending (JobArrayTaskLimit 1), 1 running, 1 done",
        "array 27 (all, 3 tasks): 1 pending (Resources 1), 0 running, 2 done",
        "1 array(s) done (2 tasks)"]
    assert array_lines(array_status(records, None)) == [
        "4 Slurm array(s), 10 tasks (squeue not found here: run status on a login node for their state)"]


def test_a_build_partition_needs_an_architecture_it_cannot_detect_on_a_cpu_node(write_space, tmp_path):
    from sweep.pipeline import driver as pipeline
    from sweep.space import target

    space = target.load(write_space(build={"arch": "auto"}, slurm={"build_partition": "cpu"}))
    with pytest.raises(SweepError, match=r"build_partition 'cpu' builds on nodes without a GPU .* pass --arch sm_90"):
        pipeline.preflight(space, pipeline.Options(executor="slurm", jobs_root=tmp_path / "jobs"))


import os  # noqa: E402
import signal  # noqa: E402

from sweep.dispatch.slurm_submit import SweepTask  # noqa: E402
from sweep.node import group  # noqa: E402


@pytest.mark.parametrize("time_min, timed_out", [(1, True), (60, False)])
def test_slurms_warning_past_the_guaranteed_walltime_ends_the_program_and_earlier_one_is_a_preemption(
        time_min, timed_out):
    preempted = []
    previous = signal.signal(signal.SIGUSR2, lambda signum, frame: preempted.append(signum))
    try:
        task = SweepTask(time_min)     # 1 minute: always past submitit's guaranteed walltime
        task.watch_time_limit()
        os.kill(os.getpid(), signal.SIGUSR2)
        assert group.expired() is timed_out
        assert preempted == ([] if timed_out else [signal.SIGUSR2])   # submitit's handler requeues
    finally:
        signal.signal(signal.SIGUSR2, previous)
        group._expired.clear()
