"""The report says how the configurations held the GPU (overlap or exclusive) and what they cost
(sweep/report/gpu_held.py), and warns when GPU work ran outside a program's token."""

from __future__ import annotations

import pandas as pd

from sweep.report import gpu_held


def test_the_row_names_each_mode_with_its_count_and_the_gpu_seconds():
    done = pd.DataFrame({"gpu_mode": ["overlap", "overlap", "exclusive"], "gpu_s": [1.0, 2.0, 3.0],
                         "gpu_busy_s": [0.5, 0.5, 0.7], "gpu_outside": [0, 0, None]})
    label, text = gpu_held.row(done)
    assert label == "GPU held"
    assert text == ("overlap (2), exclusive (1); 6.0 GPU-s in all, median 2.00 s a configuration "
                    "(GPU busy a run: median 0.50 s)")


def test_gpu_work_outside_the_token_is_a_warning_that_says_what_to_do():
    done = pd.DataFrame({"gpu_mode": ["overlap"], "gpu_outside": [2]})
    assert "WARNING: 2 kernel(s)/copies ran outside" in gpu_held.row(done)[1]
    assert "--no-overlap" in gpu_held.row(done)[1]


def test_results_from_before_the_modes_give_no_row():
    assert gpu_held.row(pd.DataFrame({"status": ["ok"]})) is None


def test_the_row_says_how_overlap_modes_programs_created_their_cuda_contexts():
    done = pd.DataFrame({"gpu_mode": ["overlap", "exclusive"], "gpu_contexts": ["gate", None]})
    assert gpu_held.row(done)[1] == ("overlap (1), exclusive (1); CUDA contexts created through the node's gate "
                                     "(one at a time, beside other programs' GPU work)")
    older = pd.DataFrame({"gpu_mode": ["overlap"], "gpu_contexts": [None]})
    assert gpu_held.row(older)[1] == "overlap (1)"
