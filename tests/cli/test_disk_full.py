"""A full disk is named right: the filesystem of the folder that is full (the results
folder's, not the jobs folder's), and sizes under 1 MiB in KiB."""

from __future__ import annotations

import errno
import shutil
from collections import namedtuple

import pytest

from sweep import cli
from sweep.core.errors import DiskFull

Usage = namedtuple("Usage", "total used free")


@pytest.fixture
def folders(tmp_path, monkeypatch):
    jobs, results = tmp_path / "jobs", tmp_path / "results"
    jobs.mkdir()
    results.mkdir()
    real = shutil.disk_usage

    def usage(path):   # the results folder on a full filesystem of its own
        return Usage(2**30, 2**30 - 4096, 4096) if str(path).startswith(str(results)) else real(path)

    monkeypatch.setattr(shutil, "disk_usage", usage)
    return jobs, results


def _full(*args):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_results_folder_is_named_not_the_jobs_folder(folders, monkeypatch, capsys):
    jobs, results = folders
    monkeypatch.setitem(cli.COMMANDS, "run", _full)
    rc = cli.main(["run", "x.yaml", "--jobs-dir", str(jobs), "--results-dir", str(results)])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_DISK_FULL and err.count("error:") == 1
    assert f"holding {results}" in err and "4.0 KiB free" in err and "--results-dir" in err, err


def test_a_full_file_under_the_results_folder_names_its_flag(folders, monkeypatch, capsys):
    jobs, results = folders

    def full_file(args):
        raise OSError(errno.ENOSPC, "No space left on device", str(results / "toy" / "best.json"))

    monkeypatch.setitem(cli.COMMANDS, "run", full_file)
    assert cli.main(["run", "x.yaml", "--jobs-dir", str(jobs), "--results-dir", str(results)]) == cli.EXIT_DISK_FULL
    err = capsys.readouterr().err
    assert "best.json" in err and "--results-dir" in err and "--jobs-dir" not in err, err


def test_sizes_under_one_mib_are_shown_in_kib(tmp_path):
    msg = str(DiskFull.at(tmp_path, needs_bytes=980_000))
    # (the free space's own figure may end in "0.0 MiB": only what the configuration needs is checked)
    assert "needs about 957.0 KiB" in msg and "needs about 0.0 MiB" not in msg
    assert "needs about 2.0 MiB" in str(DiskFull.at(tmp_path, needs_bytes=2 * 2**20))
