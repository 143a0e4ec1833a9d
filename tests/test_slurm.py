"""sweep.executors.slurm's translation of a space's slurm: settings into sbatch options (no cluster needed).

What the real cluster does with them is pinned in tests/slurm/."""

from __future__ import annotations

import pytest

from sweep.errors import SweepError
from sweep.executors.slurm import executor_parameters
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
