"""Rendering a config into its job folder: golden files, strictness, escapes, and writes.

The golden files under tests/data/golden/ are the rendered text of one seed.yaml
config with the machine's paths replaced by placeholders. After an intended
template change, refresh them with

    SWEEP_UPDATE_GOLDEN=1 python3 -m pytest tests/node/test_render.py

and read the diff before committing.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import sys
import textwrap
from pathlib import Path

import jinja2
import pytest

from sweep.core import atomic, paths
from sweep.node import render
from sweep.space import target
from sweep.core.errors import SweepError
from sweep.space import make_config, tag

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "spaces" / "seed.yaml"
GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
UPDATE = os.environ.get("SWEEP_UPDATE_GOLDEN") == "1"
REFRESH = "SWEEP_UPDATE_GOLDEN=1 python3 -m pytest tests/node/test_render.py"

COMMIT = "0123456789ab"
HASH = "fedcba9876543210"
MODEL = {"weights": "/models/gpt2-124M/gpt2_124M.bin", "reference": "/models/gpt2-124M/reference.bin"}
R128 = {"RESIDUAL_BLOCK_SIZE": 128, "GELU_BLOCK_SIZE": 128, "ENCODER_BLOCK_X": 8, "LAYERNORM_BLOCK_SIZE": 128,
        "PREPARE_BLOCK_SIZE": 128, "MATMUL_TILE": 16}


def assert_golden(name: str, text: str, golden_dir: Path = GOLDEN) -> None:
    """Compare `text` with golden_dir/name; SWEEP_UPDATE_GOLDEN=1 rewrites the file instead."""
    path = golden_dir / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, text)
        return
    if not path.is_file():
        pytest.fail(f"no golden file {path}; create it with: {REFRESH}", pytrace=False)
    expected = path.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True), text.splitlines(keepends=True),
                                            fromfile=f"{path} (golden)", tofile=f"{name} (rendered)"))
        pytest.fail(f"{name} differs from its golden file:\n{diff}\n"
                    f"If the change is intended, refresh the golden files with:\n    {REFRESH}\n"
                    "and review the diff before committing.", pytrace=False)


def normalize(text: str, jobs_root: Path) -> str:
    """Replace what depends on the machine with placeholders (longest first: the
    interpreter or the jobs folder may lie inside the repository)."""
    subs = {sys.executable: "<PYTHON>", str(Path(jobs_root).resolve()): "<JOBS>", str(jobs_root): "<JOBS>",
            str(paths.CHECKOUT): "<ROOT>"}
    for old in sorted(subs, key=len, reverse=True):
        text = text.replace(old, subs[old])
    return text


@pytest.fixture(scope="module")
def seed():
    return target.load(SEED)


def r128_job(space, role="sweep"):
    c = make_config(space, R128)
    return render.job_config(space, c, tag(space, c), HASH, COMMIT, MODEL, role)


# ---------------------------------------------------------------------------
# Golden files
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("file", ["conf.cuh", "Makefile", "job.sbatch"])
def test_seed_r128_renders_its_golden_file(seed, tmp_path, file):
    jobs = tmp_path / "jobs"
    rendered = render.render_job(seed, r128_job(seed), jobs, jobs / "_cache" / "objects")
    assert rendered.tag == "R128_G128_E8x8x8_L128_P128_F16"
    assert_golden(f"seed_R128.{file}", normalize(rendered.files[file], jobs))


def test_golden_mismatch_shows_a_unified_diff_and_how_to_refresh(tmp_path, monkeypatch):
    (tmp_path / "x.txt").write_text("one\ntwo\n")
    monkeypatch.setattr(sys.modules[__name__], "UPDATE", False)
    with pytest.raises(pytest.fail.Exception) as e:
        assert_golden("x.txt", "one\nTWO\n", tmp_path)
    msg = str(e.value)
    assert "--- " in msg and "+++ " in msg and "-two\n" in msg and "+TWO\n" in msg
    assert REFRESH in msg
    assert_golden("x.txt", "one\ntwo\n", tmp_path)      # equal text passes


def test_golden_files_hold_no_machine_paths():
    for name in ("seed_R128.conf.cuh", "seed_R128.Makefile", "seed_R128.job.sbatch"):
        text = (GOLDEN / name).read_text()
        assert str(paths.CHECKOUT) not in text and sys.executable not in text, name
        assert not any(line != line.rstrip() for line in text.splitlines()), f"{name} has trailing spaces"
        assert text.endswith("\n") and not text.endswith("\n\n"), name


def test_conf_defines_every_macro_once_under_a_header(seed, tmp_path):
    text = render.render_conf(r128_job(seed))
    defines = [line for line in text.splitlines() if line.startswith("#define ")]
    c = make_config(seed, R128)
    assert defines == [f"#define {m} {v}" for m, v in c.values]
    assert "#pragma once" in text
    header = "\n".join(line for line in text.splitlines() if line.startswith("//"))
    for part in ("R128_G128_E8x8x8_L128_P128_F16", "sweep seed", str(SEED), COMMIT, HASH):
        assert part in header


def test_makefile_passes_the_job_settings_to_the_target_make(seed, tmp_path):
    text = render.render_makefile(r128_job(seed), tmp_path / "cache")
    make = text[text.index("$(MAKE) -C $(TARGET_DIR)"):]
    for var in ("CONF_DIR=$(JOB_DIR)", "BUILD_DIR=$(JOB_DIR)/build", "NVCC=", "ARCH=\"$(ARCH)\"",
                "NVCCFLAGS=\"$(NVCCFLAGS)\""):
        assert var in make
    assert f"TARGET_DIR := {ROOT / 'kernels'}\n" in text
    assert "NVCCFLAGS  := -O3 -lineinfo --resource-usage\n" in text     # :=, so an exported NVCCFLAGS cannot replace it
    assert "nvidia-smi --query-gpu=compute_cap" in text          # arch: auto


def test_makefile_with_fixed_arch_and_quoted_flags(seed, tmp_path):
    s = dataclasses.replace(seed, build=dataclasses.replace(seed.build, arch=("sm_80", "sm_90"),
                                                            nvcc_flags=("-O3", "-DNAME=a b")))
    text = render.render_makefile(r128_job(s), tmp_path)
    assert "ARCH       := sm_80 sm_90\n" in text and "nvidia-smi" not in text
    assert "NVCCFLAGS  := -O3 '-DNAME=a b' --resource-usage\n" in text


# ---------------------------------------------------------------------------
# Baseline, strictness
# ---------------------------------------------------------------------------


def test_baseline_conf_has_no_define_and_says_defaults_apply(seed):
    job = render.job_config(seed, None, render.BASELINE_TAG, HASH, COMMIT, MODEL, "baseline")
    text = render.render_conf(job)
    assert job.macros == {}
    assert "#define" not in text
    assert "#pragma once" in text
    assert "no macros: every kernel family keeps its own default launch sizes" in text
    assert not text.endswith("\n\n")


def _capture(monkeypatch):
    """Record the variables each template is rendered with."""
    calls = {}
    real = jinja2.Template.render

    def spy(self, *args, **kwargs):
        calls[self.name] = kwargs
        return real(self, *args, **kwargs)

    monkeypatch.setattr(jinja2.Template, "render", spy)
    return calls


@pytest.mark.parametrize("template,variable", [
    ("conf.cuh.j2", "commit"), ("conf.cuh.j2", "config_hash"), ("conf.cuh.j2", "values"),
    ("Makefile.j2", "target_dir"), ("Makefile.j2", "nvcc_flags"), ("Makefile.j2", "arch"),
    ("job.sbatch.j2", "job_dir"), ("job.sbatch.j2", "slurm"), ("job.sbatch.j2", "python"),
])
def test_template_with_a_missing_variable_raises(seed, tmp_path, monkeypatch, template, variable):
    calls = _capture(monkeypatch)
    render.render_job(seed, r128_job(seed), tmp_path, tmp_path / "cache")
    kwargs = dict(calls[template])
    del kwargs[variable]
    with pytest.raises(jinja2.UndefinedError, match=variable):
        render._env().get_template(template).render(**kwargs)


def test_sbatch_with_a_slurm_setting_missing_raises(seed, tmp_path):
    slurm = seed.slurm.to_dict()
    del slurm["partition"]
    with pytest.raises(jinja2.UndefinedError):
        render.render_sbatch(r128_job(seed), tmp_path, slurm)


# ---------------------------------------------------------------------------
# Injection and escapes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("macros", [
    {"RESIDUAL_BLOCK_SIZE": "128"},
    {"RESIDUAL_BLOCK_SIZE": "128\n#include <stdlib.h>"},
    {"RESIDUAL_BLOCK_SIZE": 1.5},
    {"RESIDUAL_BLOCK_SIZE": True},
    {"RESIDUAL_BLOCK_SIZE": None},
    {"residual": 128},
    {"A\n#include <stdlib.h>": 1},
    {"FOO\n": 1},
    {"A B": 1},
    {"A(x)": 1},
    {"": 1},
])
def test_render_conf_refuses_non_integers_and_non_macro_names(seed, macros):
    job = dataclasses.replace(r128_job(seed), macros=macros)
    with pytest.raises(SweepError, match="refusing to render"):
        render.render_conf(job)


@pytest.mark.parametrize("sweep,tag_", [
    ("a/b", "T1"), ("..", "T1"), (".", "T1"), ("my sweep", "T1"), ("/etc", "T1"), ("seed\n", "T1"), ("", "T1"),
    ("seed", "a/b"), ("seed", ".."), ("seed", "R1 G2"), ("seed", "/etc/passwd"), ("seed", "_x"), ("seed", "x\n"),
    ("seed", ""), ("seed", "../../etc"),
])
def test_job_dir_refuses_names_that_could_leave_the_sweep(tmp_path, sweep, tag_):
    with pytest.raises(SweepError, match="must be letters"):
        render.job_dir(tmp_path, sweep, tag_)


@pytest.mark.parametrize("sweep,tag_", [("seed", "R128_G128_E8x8x8_L128_P128_F16"), ("a.b-c_1", "default"),
                                        ("s..x", "T1")])
def test_job_dir_of_valid_names_stays_under_jobs_root_and_sweep(tmp_path, sweep, tag_):
    d = render.job_dir(tmp_path / "jobs", sweep, tag_)
    root = (tmp_path / "jobs").resolve()
    assert d == root / sweep / tag_
    assert d.parent.parent == root


# ---------------------------------------------------------------------------
# Writes
# ---------------------------------------------------------------------------


def _rendered(seed, jobs: Path, **macros):
    c = make_config(seed, R128 | macros)
    job = render.job_config(seed, c, "T1", HASH, COMMIT, MODEL)
    return render.render_job(seed, job, jobs, jobs / "_cache")


def test_write_job_writes_every_file(seed, tmp_path):
    r = _rendered(seed, tmp_path)
    d = render.write_job(r)
    assert d == r.dir == (tmp_path / "seed" / "T1").resolve()
    assert sorted(p.name for p in d.iterdir()) == ["Makefile", "conf.cuh", "config.json", "job.sbatch"]
    for name, text in r.files.items():
        assert (d / name).read_text() == text
    assert render.JobConfig.load(d) == r.config


def test_write_job_leaves_unchanged_files_alone_and_rewrites_changed_ones(seed, tmp_path):
    d = render.write_job(_rendered(seed, tmp_path))
    old = 1_000_000_000
    for p in d.iterdir():
        os.utime(p, (old, old))
    render.write_job(_rendered(seed, tmp_path))
    assert all(p.stat().st_mtime == old for p in d.iterdir())     # make sees nothing to do
    r = _rendered(seed, tmp_path, RESIDUAL_BLOCK_SIZE=256)
    render.write_job(r)
    changed = {p.name for p in d.iterdir() if p.stat().st_mtime != old}
    assert changed == {"conf.cuh", "config.json"}                  # the Makefile and sbatch did not change
    assert "#define RESIDUAL_BLOCK_SIZE 256\n" in (d / "conf.cuh").read_text()


def test_write_job_is_atomic_when_a_write_fails(seed, tmp_path, monkeypatch):
    d = render.write_job(_rendered(seed, tmp_path))
    before = (d / "conf.cuh").read_text()

    def broken_replace(src, dst):   # the disk filled up as the new file went into place
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", broken_replace)
    with pytest.raises(OSError):
        render.write_job(_rendered(seed, tmp_path, RESIDUAL_BLOCK_SIZE=256))
    assert (d / "conf.cuh").read_text() == before                 # the old file, whole
    assert sorted(p.name for p in d.iterdir()) == ["Makefile", "conf.cuh", "config.json", "job.sbatch"]


def test_rendering_many_jobs_compiles_each_template_once_and_waits_on_no_fsync(seed, tmp_path, monkeypatch):
    # A 4,000-point sweep spent most of its rendering compiling the templates again for every job,
    # and waiting on an fsync for each of its files: both are once-a-process or never now.
    synced = []
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: synced.append(fd))
    compiled = []
    real = jinja2.Environment.compile
    monkeypatch.setattr(jinja2.Environment, "compile", lambda self, *a, **k: compiled.append(1) or real(self, *a, **k))
    render._env.cache_clear()
    for size in (32, 64, 128, 256):
        render.write_job(_rendered(seed, tmp_path / str(size), RESIDUAL_BLOCK_SIZE=size))
    assert len(compiled) <= 3      # conf.cuh, Makefile and job.sbatch templates, once each
    assert synced == []


# ---------------------------------------------------------------------------
# Slurm options
# ---------------------------------------------------------------------------


def test_slurm_options_render_as_sbatch_and_shell_lines(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text(textwrap.dedent("""\
        name: opts
        parameters:
          A: {values: [1]}
        slurm:
          partition: gpu
          account: proj42
          qos: high
          constraint: h100
          mem: 16G
          gpus_per_job: 2
          cpus_per_job: 8
          time_min: 45
          extra_sbatch: [--exclusive, --signal=USR1@60]
          setup: [module load cuda/13.0, source ~/venv/bin/activate]
        """))
    s = target.load(path)
    job = render.job_config(s, make_config(s, {"A": 1}), "A1", HASH, COMMIT)
    d = render.job_dir(tmp_path / "jobs", s.name, "A1")
    lines = render.render_sbatch(job, d, s.slurm.to_dict()).splitlines()
    assert lines[0] == "#!/bin/bash"
    sbatch = [line for line in lines if line.startswith("#SBATCH")]
    assert sbatch == [
        "#SBATCH --job-name=sweep-opts-A1",
        f"#SBATCH --output={d}/slurm-%j.out",
        "#SBATCH --time=45",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --gres=gpu:2",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=proj42",
        "#SBATCH --qos=high",
        "#SBATCH --constraint=h100",
        "#SBATCH --mem=16G",
        "#SBATCH --exclusive",
        "#SBATCH --signal=USR1@60",
    ]
    # every #SBATCH line comes before the first command (sbatch stops reading options there)
    first_command = lines.index("set -euo pipefail")
    assert max(i for i, line in enumerate(lines) if line.startswith("#SBATCH")) < first_command
    setup = [lines.index("module load cuda/13.0"), lines.index("source ~/venv/bin/activate")]
    cd = lines.index(f"cd {d}")
    assert first_command < setup[0] < setup[1] < cd
    assert lines[-1] == f"exec {sys.executable} -m sweep.node.job {d}"


def test_unset_slurm_options_render_no_lines(seed, tmp_path):
    slurm = seed.slurm.to_dict() | {"gpus_per_job": 0}
    text = render.render_sbatch(r128_job(seed), tmp_path, slurm)
    for option in ("--gres", "--partition", "--account", "--qos", "--constraint", "--mem"):
        assert option not in text


def test_config_json_carries_each_workload_with_its_programs_commands(tmp_path):
    (tmp_path / "Makefile").write_text("all:\n")
    space_path = tmp_path / "w.yaml"
    space_path.write_text(textwrap.dedent(f"""\
        name: w
        target:
          name: t
          dir: {tmp_path}
          profile: ["{{build}}/bench", "-n", "{{iterations}}", "{{args}}"]
          programs: {{small: {{profile: ["{{build}}/small", "{{seq_len}}"], events: ["--json", "{{events_json}}"]}}}}
        parameters: {{A: {{values: [1, 2]}}}}
        run: {{batch: 2, seq_len: 16, iterations: 5, args: [--fast]}}
        workloads:
          - {{name: long, seq_len: 1024, weight: 2}}
          - {{name: short, program: small, batch: 1}}
        """))
    space = target.load(space_path)
    job = render.job_config(space, make_config(space, {"A": 2}), "A2", HASH, COMMIT)
    d = render.write_job(render.render_job(space, job, tmp_path / "jobs", tmp_path / "cache"))
    loaded = render.JobConfig.load(d)
    assert loaded == job and loaded.workloads == [
        {"name": "long", "weight": 2.0, "batch": 2, "seq_len": 1024, "iterations": 5, "warmup": 5, "args": ["--fast"],
         "program": None, "profile": ["{build}/bench", "-n", "{iterations}", "{args}"], "events": [], "check_args": []},
        {"name": "short", "weight": 1.0, "batch": 1, "seq_len": 16, "iterations": 5, "warmup": 5, "args": [],
         "program": "small", "profile": ["{build}/small", "{seq_len}"], "events": ["--json", "{events_json}"],
         "check_args": []}]


def test_config_json_of_a_space_without_workloads_has_none(seed, tmp_path):
    assert render.JobConfig.load(render.write_job(_rendered(seed, tmp_path))).workloads == []
