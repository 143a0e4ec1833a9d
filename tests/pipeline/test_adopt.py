"""Bringing a program to the tool: `init` writes a starter space from its folder,
`validate` says what a space would do, and the compiler's resource lines of a build
(sweep.node.resources) name its kernels. CPU only; the dry runs of init's spaces
(real nvcc) are marked slow."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep.node import objcache, resources
from sweep.space import init as init_mod, target
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BUILD_LOG = Path(__file__).resolve().parents[1] / "data" / "adopt" / "stencil_build.log"


def cli(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "config_sweep.py"), *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=900)


# -- the compiler's resource lines ------------------------------------------------------------

def test_ptxas_lines_give_each_kernels_registers_spills_and_shared_memory():
    rows = {r["name"]: r for r in resources.kernels(BUILD_LOG.read_text())}
    assert set(rows) == {"residual_sum_kernel", "residual_partial_kernel", "jacobi_kernel", "spilly"}
    j = rows["jacobi_kernel"]
    assert (j["registers"], j["shared"], j["spill_stores"], j["arch"]) == (32, 1360, 0, "sm_90")
    assert j["full"] == "void jacobi_kernel<32, 8, 1>(int, float const*, float const*, float*)"
    s = rows["spilly"]
    assert (s["registers"], s["spill_stores"], s["spill_loads"], s["stack"], s["shared"]) == (255, 88, 92, 96, 0)
    assert resources.summary(s) == "spilly: 255 registers, 88 B spill stores / 92 B loads, 0 B shared"


def test_a_launch_stub_symbol_names_its_kernel_and_other_symbols_none():
    assert resources.stub_kernel("_Z24__device_stub__Z5plainPfPf") == "_Z5plainPf"
    assert resources.stub_kernel("_ZL31__device_stub__Z4kernILi64EEvPfPf") == "_Z4kernILi64EEvPf"
    assert resources.stub_kernel("_Z5plainPf") is None and resources.stub_kernel("main") is None


def test_a_cache_hit_replays_what_the_compile_printed(tmp_path, monkeypatch):
    """ptxas' lines come back on a hit, so a cached build still records its kernels' resources."""
    monkeypatch.setattr(objcache, "_preprocess", lambda cmd, out: b"same source")
    monkeypatch.setattr(objcache, "_nvcc_version", lambda nvcc: b"v")

    def compile_(cmd, **kw):
        Path(cmd[cmd.index("-o") + 1]).write_bytes(b"object")
        return subprocess.CompletedProcess(cmd, 0, "", "ptxas info    : Used 32 registers\n")

    monkeypatch.setattr(objcache.subprocess, "run", compile_)
    args = ["--dir", str(tmp_path / "c"), "--", "nvcc", "-c", "a.cu", "-o"]
    assert objcache.main(args + [str(tmp_path / "a.o")]) == 0
    monkeypatch.setattr(objcache.subprocess, "run", lambda *a, **k: pytest.fail("a hit must not compile"))
    import io
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    assert objcache.main(args + [str(tmp_path / "b.o")]) == 0
    assert "ptxas info    : Used 32 registers" in err.getvalue() and "objcache: hit" in err.getvalue()
    assert (tmp_path / "b.o").read_bytes() == b"object"


# -- init ----------------------------------------------------------------------------------------

def test_init_writes_a_space_that_loads_with_each_ifndef_macro_and_its_default(tmp_path):
    out = tmp_path / "gemm.yaml"
    p = cli("init", str(EXAMPLES / "tiled_gemm"), "-o", str(out))
    assert p.returncode == 0, p.stderr
    space = target.load(out)
    assert space.target.source_dir == EXAMPLES / "tiled_gemm" and space.target.build == "make"
    assert {q.macro: q.default for q in space.parameters} == {
        "GEMM_BM": 64, "GEMM_BN": 64, "GEMM_BK": 16, "GEMM_TM": 4, "GEMM_TN": 4, "GEMM_REF_BLOCK_X": 16,
        "GEMM_REF_BLOCK_Y": 16}
    assert space.parameter("GEMM_BK").values == (8, 16, 32)      # powers of two around the default
    assert space.target.profile[0] == "{build}/tiled_gemm"       # the program the Makefile's all builds
    assert "FILL IN" in out.read_text()


def test_init_makes_a_0_1_default_a_flag(tmp_path):
    out = tmp_path / "s.yaml"
    assert cli("init", str(EXAMPLES / "stencil_cmake"), "-o", str(out)).returncode == 0
    p = target.load(out).parameter("STENCIL_USE_SHARED")
    assert p.kind == "flag" and p.values == (0, 1) and p.default == 1


def test_init_refuses_to_overwrite_a_file(tmp_path):
    out = tmp_path / "s.yaml"
    out.write_text("mine\n")
    p = cli("init", str(EXAMPLES / "tiled_gemm"), "-o", str(out))
    assert p.returncode == 1 and "never overwrites" in p.stderr and out.read_text() == "mine\n"
    assert len(p.stderr.strip().splitlines()) == 1


def test_init_on_a_folder_without_sources_is_one_line(tmp_path):
    p = cli("init", str(tmp_path))
    assert p.returncode == 1 and "no CUDA or C++ sources" in p.stderr and "Traceback" not in p.stderr


def test_init_prints_to_stdout_with_the_folders_absolute_path(tmp_path):
    p = cli("init", str(EXAMPLES / "tiled_gemm"), cwd=tmp_path)
    assert p.returncode == 0 and f"dir: {EXAMPLES / 'tiled_gemm'}" in p.stdout


def test_init_names_the_program_of_a_copied_example_from_the_rules_its_makefile_includes(tmp_path):
    """A user's copy of an example under another name: its Makefile sets PROGRAM and includes
    ../common/program.mk, whose `all` builds $(BUILD_DIR)/$(PROGRAM)."""
    shutil.copytree(EXAMPLES / "tiled_gemm", tmp_path / "my_gemm", ignore=shutil.ignore_patterns("build", "*.yaml"))
    shutil.copytree(EXAMPLES / "common", tmp_path / "common")
    data = yaml.safe_load(init_mod.starter(tmp_path / "my_gemm", tmp_path / "s.yaml", []))
    assert data["target"]["name"] == "tiled_gemm" and data["target"]["profile"][0] == "{build}/tiled_gemm"
    (tmp_path / "common" / "program.mk").unlink()        # the rules not found: the folder's name
    data = yaml.safe_load(init_mod.starter(tmp_path / "my_gemm", tmp_path / "s.yaml", []))
    assert data["target"]["profile"][0] == "{build}/my_gemm"


def test_init_reads_variables_and_includes_but_never_runs_the_makefile(tmp_path):
    src = tmp_path / "prog"
    src.mkdir()
    (src / "rules.mk").write_text("all: $(OUT)/$(NAME)\n\ttouch $(OUT)/ran\n")
    (src / "main.cu").write_text("#ifndef SAXPY_BLOCK\n#define SAXPY_BLOCK 256\n#endif\n")
    makefile = "NAME := {}\nOUT ?= build\nHERE := $(CURDIR)\ninclude $(HERE)/rules.mk\n"
    (src / "Makefile").write_text(makefile.format("saxpy"))
    assert init_mod.build_system(src) == ("make", "saxpy")
    (src / "Makefile").write_text(makefile.format("saxpy_$(shell touch ran)"))
    assert init_mod.build_system(src) == ("make", "prog")     # no program name: the folder's
    assert sorted(p.name for p in src.iterdir()) == ["Makefile", "main.cu", "rules.mk"]


def a_cmake_program(tmp_path: Path, include_conf: bool) -> Path:
    src = tmp_path / "prog"
    src.mkdir()
    (src / "CMakeLists.txt").write_text("project(p LANGUAGES CUDA)\nadd_executable(saxpy main.cu)\n")
    (src / "Makefile").write_text("all:\n\tcmake --build build\n")       # a Makefile that is not the contract
    (src / "main.cu").write_text(('#include "conf.cuh"\n' if include_conf else "")
                                 + "#ifndef SAXPY_BLOCK\n#define SAXPY_BLOCK 256 // threads\n#endif\n")
    return src


def test_init_picks_cmake_when_the_makefile_does_not_take_conf_dir(tmp_path):
    text = init_mod.starter(a_cmake_program(tmp_path, True), tmp_path / "s.yaml", [])
    data = yaml.safe_load(text)
    assert data["target"]["build"] == "cmake" and data["target"]["cmake_target"] == "saxpy"
    assert data["parameters"]["SAXPY_BLOCK"] == {"values": [128, 256, 512], "default": 256, "kernels": []}
    assert "macros" not in data["build"]


def test_init_passes_macros_on_the_command_line_when_no_source_includes_conf_cuh(tmp_path):
    data = yaml.safe_load(init_mod.starter(a_cmake_program(tmp_path, False), tmp_path / "s.yaml", []))
    assert data["build"]["macros"] == "define"


def test_init_lists_for_each_macro_the_kernels_of_a_build_its_sources_read_it_in(tmp_path):
    build = tmp_path / "job"
    build.mkdir()
    shutil.copy(BUILD_LOG, build / "build.log")       # its kernels: the example's three and `spilly`
    out = tmp_path / "s.yaml"
    assert cli("init", str(EXAMPLES / "stencil_cmake"), "--build", str(build), "-o", str(out)).returncode == 0
    space = target.load(out)
    assert space.parameter("STENCIL_BLOCK_X").kernels == ("jacobi_kernel",)
    assert set(space.parameter("STENCIL_RED_BLOCK").kernels) == {"residual_partial_kernel", "residual_sum_kernel"}
    assert space.strategy.name == "factorized"        # two groups of macros, read by different kernels


def test_inits_space_reads_from_the_sources_each_macros_kernels_its_rules_and_values_they_allow(tmp_path):
    """tests/data/source_facts: a program whose kernels each read their own macros, and whose
    static_asserts say what is legal; no build (the kernels are the sources' names)."""
    out = tmp_path / "s.yaml"
    assert cli("init", str(ROOT / "tests" / "data" / "source_facts"), "-o", str(out)).returncode == 0
    space = target.load(out)
    assert space.parameter("SUM_THREADS").kernels == ("blocked_kernel", "row_sum")
    assert space.parameter("TR_ROWS").kernels == ("transpose",) and space.parameter("VEC").kernels == ("copy_kernel",)
    assert space.parameter("VEC").values == (1, 2, 4)          # VEC <= 4: not 8, as half/double would guess
    assert space.parameter("SUM_THREADS").values == (128, 256, 512)
    assert {c.why for c in space.constraints} >= {"SUM_THREADS: whole warps, at most 1024",
                                                   "TR_ROWS must divide TR_TILE, at most 1024 threads"}
    text = out.read_text()
    assert "static_assert(sizeof(float) * VEC <= 16) not translated" in text
    assert "UNUSED_LIMIT: {values: [0, 1], type: flag, default: 1, kernels: []}" in text and "no kernel reads it" in text
    # UNUSED_LIMIT's kernels are unknown, so it may interact with any: one group, too large for the grid
    assert space.strategy.name == "auto"
    p = cli("validate", str(out))
    assert p.returncode == 0 and "legal:" in p.stdout, p.stderr


# -- validate ----------------------------------------------------------------------------------

def toy(tmp_path: Path, params: dict | None = None, **changes) -> Path:
    """The toy space (tests/data/toy_space.yaml), its parameters replaced by `params` when given."""
    from tests.conftest import toy_space_dict

    data = toy_space_dict(**changes)
    if params is not None:
        data["parameters"] = params
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_validate_prints_the_grid_the_legal_count_and_the_first_rule_each_illegal_point_breaks(tmp_path):
    path = toy(tmp_path, constraints=[{"expr": "ALPHA_BLOCK <= 256", "why": "at most 256"},
                                      {"expr": "BETA_X * BETA_Y <= 128", "why": "small beta"}])
    p = cli("validate", str(path), "--jobs-dir", str(tmp_path / "jobs"))
    assert p.returncode == 0, p.stderr
    assert "grid: 20 points (5*2*2)" in p.stdout and "legal: 12 of 20; 8 illegal" in p.stdout
    assert "4  ALPHA_BLOCK <= 256 is false (at most 256)" in p.stdout      # 1024: 4 points
    assert "4  BETA_X * BETA_Y <= 128 is false (small beta)" in p.stdout   # 64x4 with the 4 legal alphas
    assert "would build 12 configuration(s): A64_B32x1" in p.stdout
    assert not (tmp_path / "jobs").exists()                                 # nothing written


@pytest.mark.parametrize("strategy, says", [
    ({"name": "learning", "budget": 7}, "strategy learning: 12 legal points; a model per parameter group (2: 4 x 3 "
                                        "legal); at most 7 evaluations"),
    ({"name": "auto", "whole": 64}, "strategy auto: 12 legal points, at most 64: the whole grid"),
    ({"name": "auto", "whole": 4}, "strategy auto: 12 legal points in 2 groups of macros read by different kernels, "
                                   "each of at most 4 legal combinations: every combination of each group (factorized: "
                                   "2 groups with 4*3 legal combinations; 4 builds"),
    ({"name": "auto", "whole": 3, "budget": 9}, "strategy auto: 12 legal points, over 3: learning: 12 legal points; "
                                                "a model per parameter group (2: 4 x 3 legal); at most 9 evaluations"),
])
def test_validate_of_a_learning_or_auto_space_says_what_the_search_will_do(tmp_path, strategy, says):
    path = toy(tmp_path, strategy=strategy, constraints=[{"expr": "ALPHA_BLOCK <= 256", "why": "at most 256"},
                                                         {"expr": "BETA_X * BETA_Y <= 128", "why": "small beta"}])
    p = cli("validate", str(path), "--jobs-dir", str(tmp_path / "jobs"))
    assert p.returncode == 0, p.stderr          # it raised AttributeError (no option 'samples') before
    assert says in p.stdout


def test_validate_plans_with_the_strategy_and_budget_given_on_the_command_line(tmp_path):
    path = toy(tmp_path, constraints=[{"expr": "ALPHA_BLOCK <= 256", "why": "at most 256"}])
    p = cli("validate", str(path), "--strategy", "learning", "--budget", "5")
    assert p.returncode == 0, p.stderr
    assert "strategy learning: 16 legal points; a model per parameter group (2: 4 x 4 legal); at most 5 evaluations" \
        in p.stdout
    p = cli("validate", str(path), "--budget", "0", "--strategy", "learning")
    assert p.returncode == 1 and "budget" in p.stderr and "\n" not in p.stderr.strip()


def test_validate_of_a_t1_space_too_large_for_the_grid_says_to_name_a_strategy(tmp_path):
    t1 = json.loads((ROOT / "tests" / "data" / "benchmark_spaces" / "convolution_milo.T1.json").read_text())
    for p in t1["ConfigurationSpace"]["TuningParameters"]:
        if p["Name"] in ("filter_height", "filter_width"):
            p["Values"] = str(list(range(1, 31)))     # 10,240 x 900 points: over the grid's limit
    path = tmp_path / "wide.T1.json"
    path.write_text(json.dumps(t1))
    p = cli("validate", str(path))
    assert p.returncode == 1 and "a T1 file names no strategy" in p.stderr and "--strategy learning" in p.stderr
    p = cli("validate", str(path), "--strategy", "learning")
    assert p.returncode == 0 and "strategy learning: a 9,216,000-point grid" in p.stdout, p.stdout + p.stderr


def test_validate_checks_the_globs_against_a_builds_kernels_and_exits_1_on_one_matching_none(tmp_path):
    build = tmp_path / "job"
    build.mkdir()
    shutil.copy(BUILD_LOG, build / "build.log")
    ok = toy(tmp_path, params={"ALPHA_BLOCK": {"values": [64], "kernels": ["jacobi_*"]},
                               "BETA_X": {"values": [32], "kernels": ["residual_*"]}})
    p = cli("validate", str(ok), "--build", str(build))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "jacobi_*: jacobi_kernel" in p.stdout and "residual_*: residual_partial_kernel, residual_sum_kernel" in p.stdout
    bad = toy(tmp_path, params={"ALPHA_BLOCK": {"values": [64], "kernels": ["jacobi_kernel<*"]}})
    p = cli("validate", str(bad), "--build", str(build))
    assert p.returncode == 1 and "jacobi_kernel<*: matches NO kernel of the build" in p.stdout


def test_validate_finds_the_kernels_in_a_previous_dry_runs_job_folder(tmp_path):
    path = toy(tmp_path, params={"ALPHA_BLOCK": {"values": [64], "kernels": ["jacobi_kernel"]}})
    job = tmp_path / "jobs" / "toy" / "A64"
    job.mkdir(parents=True)
    shutil.copy(BUILD_LOG, job / "build.log")
    p = cli("validate", str(path), "--jobs-dir", str(tmp_path / "jobs"))
    assert p.returncode == 0 and f"kernels: 4 in the build ({job})" in p.stdout


def test_validate_names_each_kernels_list_the_sources_disagree_with_and_says_when_all_agree(tmp_path):
    out = tmp_path / "s.yaml"
    assert cli("init", str(ROOT / "tests" / "data" / "source_facts"), "-o", str(out)).returncode == 0
    agreed = cli("validate", str(out))
    assert agreed.returncode == 0
    assert "kernels: each kernels: list names the kernels the sources read its macro in" in agreed.stdout
    data = yaml.safe_load(out.read_text())
    data["parameters"]["SCALE_BLOCK"]["kernels"] = ["row_sum"]            # the wrong kernel
    data["parameters"]["TR_ROWS"]["kernels"] = ["transpose", "copy_*"]     # one too many
    data["parameters"]["UNUSED_LIMIT"]["kernels"] = ["row_sum"]           # read by no kernel at all
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    p = cli("validate", str(out))
    assert p.returncode == 0, p.stderr                                     # advice, not a refusal
    assert ("  SCALE_BLOCK: read in scale_kernel too, which its kernels: list misses; its kernels: list names "
            "row_sum, which the sources never show reading it") in p.stdout
    assert "  TR_ROWS: its kernels: list names copy_kernel, which the sources never show reading it" in p.stdout
    assert "  UNUSED_LIMIT: no kernel's code, launch or arguments read it (only a rule?)" in p.stdout
    assert "SUM_THREADS:" not in p.stdout.split("kernels: the sources")[1]
    data["parameters"]["SCALE_BLOCK"]["kernels"] = ["scale_*"]
    data["parameters"]["TR_ROWS"]["kernels"] = ["transpose"]
    data["parameters"]["UNUSED_LIMIT"]["kernels"] = []
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    assert "kernels: each kernels: list names the kernels the sources read its macro in" in cli("validate", str(out)).stdout


def test_validate_spells_out_control_characters_of_the_space_files_kernel_globs(tmp_path):
    path = toy(tmp_path, params={"ALPHA_BLOCK": {"values": [32, 64], "kernels": ["alpha\x1b[31mRED"]},
                                 "BETA_X": {"values": [32, 64], "kernels": ["beta_kernel"]}})
    p = cli("validate", str(path))
    assert p.returncode == 0 and "\x1b" not in p.stdout
    assert "  alpha\\x1b[31mRED: ALPHA_BLOCK (2 legal of 2)" in p.stdout.splitlines()


def test_validate_of_a_bad_file_is_one_line_and_exit_1(tmp_path):
    path = toy(tmp_path, params={"ALPHA_BLOCK": {"values": [0, 64]}})
    p = cli("validate", str(path))
    assert p.returncode == 1 and "ALPHA_BLOCK.values: 0 is not a launch size" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_init_reads_the_macros_kernels_and_rules_of_headers_another_folder_on_the_include_path_holds(tmp_path):
    """A program built on a sibling folder's kernels (`-I` of a Makefile variable that lists folders):
    the starter sweeps the header's macros with its kernels and static_asserts; a folder no include
    flag names is not read."""
    prog, lib, decoy = tmp_path / "prog", tmp_path / "lib", tmp_path / "decoy"
    for d in (prog, lib, decoy):
        d.mkdir()
    (lib / "blur.cuh").write_text(
        "#ifndef BLUR_BLOCK\n#define BLUR_BLOCK 128  // threads of a blur block\n#endif\n"
        "static_assert(BLUR_BLOCK % 32 == 0, \"whole warps\");\n"
        "__global__ void blur_kernel(float* x) { x[threadIdx.x] *= BLUR_BLOCK; }\n"
        "inline void blur(float* x) { blur_kernel<<<1, BLUR_BLOCK>>>(x); }\n")
    (decoy / "other.cuh").write_text("#ifndef OTHER_BLOCK\n#define OTHER_BLOCK 64\n#endif\n")
    (prog / "prog.cu").write_text('#include "blur.cuh"\n#include "other.cuh"\nint main() { blur(nullptr); }\n')
    (prog / "Makefile").write_text(
        "DIR := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))\n"
        "KERNEL_DIRS := $(DIR)/../lib\nUNUSED_DIRS := $(DIR)/../decoy\n"
        "FLAGS := $(foreach d,$(KERNEL_DIRS),-I$(d)) -I$(CONF_DIR)\n"
        "all:\n\tnvcc $(FLAGS) prog.cu -o $(BUILD_DIR)/prog\n")
    text = init_mod.starter(prog, None, [])
    space = yaml.safe_load(text)
    assert space["parameters"] == {"BLUR_BLOCK": {"values": [64, 128, 256], "default": 128,
                                                  "kernels": ["blur_kernel"]}}
    assert "../lib/blur.cuh: threads of a blur block" in text
    assert [c["expr"] for c in space["constraints"]] == ["BLUR_BLOCK % 32 == 0"]


def test_init_on_gemm_stencil_finds_both_examples_kernels_through_its_makefiles_source_dirs():
    space = yaml.safe_load(init_mod.starter(EXAMPLES / "gemm_stencil", None, []))
    governs = {m: p["kernels"] for m, p in space["parameters"].items()}
    assert {m: governs[m] for m in ("GEMM_BM", "GEMM_TN", "STENCIL_BLOCK_X", "STENCIL_USE_SHARED")} == {
        "GEMM_BM": ["gemm_tiled_kernel"], "GEMM_TN": ["gemm_tiled_kernel"],
        "STENCIL_BLOCK_X": ["jacobi_kernel"], "STENCIL_USE_SHARED": ["jacobi_kernel"]}
    hand = yaml.safe_load((EXAMPLES / "gemm_stencil" / "space.yaml").read_text())
    assert set(hand["parameters"]) <= set(space["parameters"])


def test_init_reads_each_file_of_the_program_once_its_makefiles_sources_and_other_folders_headers(monkeypatch):
    read = []
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: read.append(self.name) or real(self, *a, **k))
    init_mod.starter(EXAMPLES / "gemm_stencil", None, [])
    assert {"Makefile", "program.mk", "gemm_stencil.cu", "gemm.cuh", "stencil.cuh", "run_options.cuh"} <= set(read)
    assert sorted(read) == sorted(set(read))


# -- init's spaces dry-run (real nvcc) -----------------------------------------------------------

@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("example,program", [("tiled_gemm", "tiled_gemm"), ("stencil_cmake", "stencil")])
def test_inits_space_dry_runs_one_configuration_and_records_its_kernels_resources(tmp_path, example, program):
    out = tmp_path / "space.yaml"
    assert cli("init", str(EXAMPLES / example), "-o", str(out)).returncode == 0
    data = yaml.safe_load(out.read_text())
    for spec in data["parameters"].values():       # one configuration: every macro at its default
        spec["values"] = [spec["default"]]
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    jobs = tmp_path / "jobs"
    p = cli("run", str(out), "--dry-run", "--arch", "sm_90", "--jobs-dir", str(jobs), "--results-dir",
            str(tmp_path / "results"), env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "built 1" in p.stdout
    (job,) = [d for d in (jobs / data["name"]).iterdir() if (d / "built.json").is_file()]
    assert (job / "build" / program).is_file()
    kernels = json.loads((job / "built.json").read_text())["build"]["kernels"]
    assert kernels and all(k["registers"] for k in kernels)
    st = cli("status", data["name"], "--jobs-dir", str(jobs))
    assert f"{data['name']}: built 1" in st.stdout and "registers" in st.stdout


@pytest.mark.parametrize("rule, default, kind, values", [
    ("M >= 0 && M <= 2", 0, "choice", (0, 1, 2)),          # an enumeration the rules spell out
    ("V == 1 || V == 4", 4, "size", (1, 4)),
    ("F == 0 || F == 1", 1, "flag", (0, 1)),
    ("B % 32 == 0 && B <= 1024", 1024, "size", (256, 512, 1024)),   # too many to list: powers of two near it
    ("T >= 1 && T <= 4", 2, "size", (1, 2, 3, 4)),
])
def test_init_guesses_the_values_the_sources_rules_keep(tmp_path, rule, default, kind, values):
    name = rule.split()[0]
    program = tmp_path / "p"
    program.mkdir()
    (program / "Makefile").write_text("all:\n\ttrue CONF_DIR\n")
    (program / "k.cu").write_text(f'#include "conf.cuh"\n#ifndef {name}\n#define {name} {default}\n#endif\n'
                                  f'static_assert({rule}, "{name}: the rule");\n'
                                  f"__global__ void k(float* x) {{ x[0] = {name}; }}\n")
    out = tmp_path / "s.yaml"
    assert cli("init", str(program), "-o", str(out)).returncode == 0
    p = target.load(out).parameter(name)
    assert (p.kind, p.values) == (kind, values)


def test_init_guesses_several_values_for_macros_a_rule_couples_where_their_own_values_leave_one(tmp_path):
    """(WM / TM) * (WN / TN) == 32 holds at the others' own values for one value of each macro; with
    the others at their own values or one power of two from them, each has several."""
    program = tmp_path / "p"
    program.mkdir()
    (program / "Makefile").write_text("all:\n\ttrue CONF_DIR\n")
    defines = "".join(f"#ifndef {n}\n#define {n} {v}\n#endif\n" for n, v in
                      (("WM", 64), ("WN", 32), ("TM", 8), ("TN", 8), ("BLOCK", 256)))
    (program / "k.cu").write_text(f'#include "conf.cuh"\n{defines}'
                                  'static_assert(WM % TM == 0 && WN % TN == 0 && (WM / TM) * (WN / TN) == 32, "a warp");\n'
                                  'static_assert(BLOCK == 256, "one block size");\n'
                                  "__global__ void k(float* x) { x[0] = WM * WN * TM * TN * BLOCK; }\n")
    out = tmp_path / "s.yaml"
    assert cli("init", str(program), "-o", str(out)).returncode == 0
    space = target.load(out)
    values = {n: space.parameter(n).values for n in ("WM", "WN", "TM", "TN", "BLOCK")}
    assert values["BLOCK"] == (256,)          # a rule that pins a macro alone still pins it
    for n in ("WM", "WN", "TM", "TN"):
        assert len(values[n]) > 1 and dict(zip(("WM", "WN", "TM", "TN"), (64, 32, 8, 8)))[n] in values[n], values
    # every value guessed is legal at some point of the guessed values
    legal = [p for p in itertools.product(*(values[n] for n in ("WM", "WN", "TM", "TN")))
             if p[0] % p[2] == 0 and p[1] % p[3] == 0 and (p[0] // p[2]) * (p[1] // p[3]) == 32]
    for i, n in enumerate(("WM", "WN", "TM", "TN")):
        assert set(values[n]) == {p[i] for p in legal}, (n, values)
