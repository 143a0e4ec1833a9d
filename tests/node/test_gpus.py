"""One lock per GPU for the whole node, whoever's sweep measures on it; devices named by
index, GPU-<uuid> or MIG-<uuid>; a measurement that shared its GPU is flagged and repeated once.
Tested without a GPU: the device list and NVML's process list are injected."""

from __future__ import annotations

import json
import stat
import threading
import time

import pytest

from sweep.dispatch import Context, visible_gpus
from sweep.dispatch.local import LocalExecutor
from sweep.node import gpus


@pytest.mark.parametrize("env, devices", [
    ("0,1", ["0", "1"]),
    ("GPU-8f3a2b1c-0000-1111-2222-333344445555", ["GPU-8f3a2b1c-0000-1111-2222-333344445555"]),
    ("MIG-GPU-8f3a2b1c-0000-1111-2222-333344445555/1/0,MIG-0a1b2c3d-4e5f-6789-abcd-ef0123456789",
     ["MIG-GPU-8f3a2b1c-0000-1111-2222-333344445555/1/0", "MIG-0a1b2c3d-4e5f-6789-abcd-ef0123456789"]),
    (" 2, GPU-aa", ["2", "GPU-aa"]),
    ("", []),
    ("0,nonsense,1", ["0"]),          # CUDA stops at the first entry it cannot read
])
def test_cuda_visible_devices_of_indices_uuids_and_mig_ids_are_gpus(monkeypatch, env, devices):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", env)
    assert visible_gpus() == devices


def test_two_sweeps_on_one_gpu_lock_the_same_node_wide_file_outside_their_folders(tmp_path, monkeypatch):
    monkeypatch.setenv(gpus.LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(gpus, "uuids_by_index", lambda: {"0": "GPU-1234-abcd"})
    paths = []
    for sweep in ("a", "b"):
        ex = LocalExecutor(Context(space=None, sweep_dir=tmp_path / "jobs" / sweep), gpus=["0"])
        paths.append(ex.lock_paths())
    assert paths[0] == paths[1] == {"0": tmp_path / "locks" / "GPU-1234-abcd.lock"}
    # the same GPU named by its UUID (another user's CUDA_VISIBLE_DEVICES) locks the same file
    assert gpus.lock_path("GPU-1234-abcd") == paths[0]["0"]


def test_without_a_uuid_the_lock_is_named_by_the_index():
    assert gpus.lock_key("3", uuids={}) == "gpu3"
    assert gpus.lock_key("MIG-GPU-aa/1/0") == "MIG-GPU-aa_1_0"


def test_nvidia_smi_list_gives_each_index_its_uuid():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa-1111)\n"
            "  MIG 1g.10gb     Device  0: (UUID: MIG-bbbb-2222)\n"
            "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-cccc-3333)\n")
    assert gpus.uuids_by_index(run=lambda cmd: text) == {"0": "GPU-aaaa-1111", "1": "GPU-cccc-3333"}


def test_the_lock_folder_is_made_world_writable_with_the_sticky_bit(tmp_path):
    d = gpus.lock_dir(env={}, system=(tmp_path,))
    assert d.parent == tmp_path
    mode = d.stat().st_mode
    assert mode & stat.S_ISVTX and mode & 0o777 == 0o777
    path = gpus.lock_path("0", uuids={}, directory=d)
    with gpus.gpu_lock(path):
        pass
    assert path.stat().st_mode & 0o777 == 0o666        # another user's job opens it too


def test_a_second_holder_of_a_gpus_lock_waits_until_the_first_lets_go(tmp_path):
    path = tmp_path / "gpu0.lock"
    entered = []

    def second():
        with gpus.gpu_lock(path):
            entered.append(time.monotonic())

    with gpus.gpu_lock(path):
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        assert not entered                              # blocked while the first measures
        released = time.monotonic()
    t.join(5)
    assert entered and entered[0] >= released


def _readings(*sets):
    it = iter(sets)
    return lambda: next(it)


def test_a_measurement_that_shared_its_gpu_is_flagged_and_measured_again_once():
    env, runs = {}, []
    out = gpus.exclusive(lambda: runs.append(1) or len(runs), env, users=_readings({4242}, set(), set(), set()))
    assert out == 2 and len(runs) == 2
    assert env["gpu_shared"]["pids"] == [4242] and env["gpu_shared"]["repeated"] is True


def test_a_measurement_shared_both_times_is_kept_with_a_note():
    env, runs = {}, []
    gpus.exclusive(lambda: runs.append(1), env, users=_readings(set(), {7}, {7}, {8}))
    assert len(runs) == 2
    assert env["gpu_shared"]["pids"] == [7, 8] and "both measurements" in env["gpu_shared"]["note"]


def test_a_measurement_alone_on_its_gpu_or_without_nvml_runs_once_unflagged():
    for reading in (set(), None):
        env, runs = {}, []
        gpus.exclusive(lambda: runs.append(1), env, users=lambda: reading)
        assert len(runs) == 1 and "gpu_shared" not in env


@pytest.mark.slow
def test_a_job_whose_gpu_was_shared_measures_again_and_says_so_in_result_json(job_for, monkeypatch):
    from sweep.node.job import Job

    d = job_for()
    assert Job(d).run("build").status == "ok"
    readings = iter([{4242}, set(), set(), set()])          # another process at the first window's start
    monkeypatch.setattr(gpus, "others_on", lambda: next(readings))
    r = Job(d).run("measure")
    assert r.status == "ok", r.reason
    assert r.env["gpu_shared"]["pids"] == [4242] and r.env["gpu_shared"]["repeated"] is True
    assert json.loads((d / "result.json").read_text())["env"]["gpu_shared"]["pids"] == [4242]
