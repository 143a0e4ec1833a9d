"""Bringing your own build: CMake targets (target: {build: cmake}) and macros on the
command line (build: {macros: define}). CPU only: the CMake tree's relocation and the
launcher's injected words are checked on files and a stand-in compiler; the real nvcc
and cmake builds are in tests/examples/test_stencil_cmake.py (slow)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
import yaml

from sweep.core.errors import SweepError
from sweep.node import cmake, objcache, render
from sweep.space import config_hash, make_config, target

ROOT = Path(__file__).resolve().parents[2]
STENCIL = ROOT / "examples" / "stencil_cmake"


def cmake_space(tmp_path: Path, **target_keys) -> Path:
    data = yaml.safe_load((STENCIL / "space_cmake.yaml").read_text())
    data["target"]["dir"] = str(STENCIL)
    data["target"].update(target_keys)
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def refused(path: Path) -> str:
    with pytest.raises(SweepError) as e:
        target.load(path)
    return str(e.value)


def test_a_cmake_target_loads_with_its_cmake_target_and_args(tmp_path):
    t = target.load(cmake_space(tmp_path)).target
    assert (t.build, t.cmake_target, t.cmake_args) == ("cmake", "stencil", ("-DCMAKE_BUILD_TYPE=Release",))


def test_a_cmake_target_without_cmakelists_is_refused_naming_the_file(tmp_path):
    (tmp_path / "src").mkdir()
    msg = refused(cmake_space(tmp_path, dir=str(tmp_path / "src")))
    assert "target.dir" in msg and "has no CMakeLists.txt" in msg


@pytest.mark.parametrize("arg,fragment", [
    ("-DX=$(rm -rf ~)", "is not a -DNAME=value cache setting"),
    ("-DX=`id`", "is not a -DNAME=value cache setting"),
    ("--trace", "is not a -DNAME=value cache setting"),
    ("-DCMAKE_CUDA_ARCHITECTURES=80", "CMAKE_CUDA_ARCHITECTURES is set by the tool"),
    ("-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache", "CMAKE_CUDA_COMPILER_LAUNCHER is set by the tool"),
])
def test_cmake_args_refuse_shell_syntax_and_the_tools_own_settings(tmp_path, arg, fragment):
    msg = refused(cmake_space(tmp_path, cmake_args=[arg]))
    assert "target.cmake_args" in msg and fragment in msg


def test_an_unknown_build_system_is_refused_naming_make_and_cmake(tmp_path):
    msg = refused(cmake_space(tmp_path, build="bazel"))
    assert "target.build" in msg and "make" in msg and "cmake" in msg


def rendered(space_path: Path, tmp_path: Path, macros: dict[str, int]):
    space = target.load(space_path)
    c = make_config(space, macros)
    jc = render.job_config(space, c, "T1", config_hash(space, c, "d"), "abc")
    return space, render.render_job(space, jc, tmp_path / "jobs", tmp_path / "jobs" / "_cache" / "objects")


STENCIL_MACROS = {"STENCIL_BLOCK_X": 64, "STENCIL_BLOCK_Y": 4, "STENCIL_USE_SHARED": 0, "STENCIL_RED_BLOCK": 128,
                  "STENCIL_ITEMS": 16}


def test_a_cmake_jobs_makefile_runs_the_cmake_builder_with_the_sweeps_trees_and_its_target(tmp_path):
    _, job = rendered(cmake_space(tmp_path), tmp_path, STENCIL_MACROS)
    mk = job.files["Makefile"]
    assert f"TARGET_DIR := {STENCIL}" in mk and "node/cmake.py --source $(TARGET_DIR)" in mk
    assert "--trees $(abspath $(JOB_DIR)/../_cmake)" in mk and "--target stencil" in mk
    assert "--cmake-arg=-DCMAKE_BUILD_TYPE=Release" in mk and "$(MAKE) -C" not in mk
    assert json.loads(job.files["config.json"])["target"]["build"] == "cmake"


def test_macros_define_passes_each_macro_as_a_D_flag_and_still_writes_conf_cuh(tmp_path, write_space):
    _, job = rendered(write_space(build={"macros": "define"}), tmp_path,
                      {"ALPHA_BLOCK": 128, "BETA_X": 64, "BETA_Y": 4})
    line = next(l for l in job.files["Makefile"].splitlines() if l.startswith("NVCCFLAGS"))
    assert line.split(":=")[1].split() == ["-O2", "-DALPHA_BLOCK=128", "-DBETA_X=64", "-DBETA_Y=4", "--resource-usage"]
    assert "#define ALPHA_BLOCK 128" in job.files["conf.cuh"]


def test_macros_define_reaches_a_cmake_build_as_launcher_flags(tmp_path):
    path = cmake_space(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["build"]["macros"] = "define"
    path.write_text(yaml.safe_dump(data))
    _, job = rendered(path, tmp_path, STENCIL_MACROS)
    assert "--flag=-DSTENCIL_BLOCK_X=64" in job.files["Makefile"] and "--flag=-DSTENCIL_USE_SHARED=0" in job.files["Makefile"]


def test_header_mode_renders_no_D_flag_and_keeps_the_config_hash(tmp_path, write_space):
    header, job = rendered(write_space(), tmp_path, {"ALPHA_BLOCK": 128, "BETA_X": 64, "BETA_Y": 4})
    define = target.load(write_space(name="d.yaml", build={"macros": "define"}))
    assert "-DALPHA_BLOCK" not in job.files["Makefile"]
    c = make_config(header, {"ALPHA_BLOCK": 128, "BETA_X": 64, "BETA_Y": 4})
    assert config_hash(header, c, "d") != config_hash(define, c, "d")
    assert "macros" not in json.loads(job.files["config.json"])["build"]   # config.json of header mode as before


def test_macros_mode_other_than_header_or_define_is_refused(tmp_path, write_space):
    with pytest.raises(SweepError, match=r"build\.macros: 'cli' is not how macros reach the program"):
        target.load(write_space(build={"macros": "cli"}))


def test_render_refuses_a_non_integer_macro_before_it_reaches_nvcc(write_space):
    space = target.load(write_space(build={"macros": "define"}))
    jc = render.job_config(space, make_config(space, {"ALPHA_BLOCK": 128, "BETA_X": 64, "BETA_Y": 4}), "T", "h", "c")
    bad = type(jc).from_dict(jc.to_dict() | {"macros": {"ALPHA_BLOCK": "1; rm -rf ~"}})
    with pytest.raises(SweepError, match="refusing to render"):
        render.macro_defines(bad)


@pytest.mark.parametrize("name", ["CMakeLists.txt", "cuda.cmake"])
def test_the_source_digest_counts_cmakelists_and_cmake_files(tmp_path, name):
    src = tmp_path / "src"
    src.mkdir()
    (src / "Makefile").write_text("all:\n")
    t = dataclasses.replace(target.load(cmake_space(tmp_path)).target, source_dir=src)
    before = target.source_digest(t)
    (src / name).write_text("project(x)\n")
    assert target.source_digest(t) != before


def fake_configured_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "_cmake" / "k"
    origin = str(tmp_path / "_cmake" / "k.tmp-host-1")
    (tree / "CMakeFiles" / "3.25.1" / "CompilerIdCUDA" / "tmp").mkdir(parents=True)
    (tree / "CMakeFiles" / "3.25.1" / "CompilerIdCUDA" / "tmp" / "CMakeCUDACompilerId.o").write_bytes(b"\0obj")
    (tree / "CMakeFiles" / "3.25.1" / "CMakeCUDACompiler.cmake").write_text("set(X 1)\n")
    (tree / "Makefile").write_text(f"CMAKE_BINARY_DIR = {origin}\n\tcd {origin} && make\n")
    (tree / "CMakeCache.txt").write_text(f"CMAKE_CACHEFILE_DIR:INTERNAL={origin}\n")
    (tree / "blob.bin").write_bytes(b"\0" + origin.encode())
    (tree / cmake.ORIGIN).write_text(origin)
    os.utime(tree / "Makefile", (1_000_000_000, 1_000_000_000))
    return tree


def test_relocation_replaces_the_configured_path_keeps_times_and_skips_compiler_identification(tmp_path):
    tree = fake_configured_tree(tmp_path)
    dst = tmp_path / "job" / "build" / "cmake"
    cmake.relocate(tree, dst)
    assert (dst / "Makefile").read_text() == f"CMAKE_BINARY_DIR = {dst}\n\tcd {dst} && make\n"
    assert (dst / "CMakeCache.txt").read_text() == f"CMAKE_CACHEFILE_DIR:INTERNAL={dst}\n"
    assert (dst / "Makefile").stat().st_mtime == 1_000_000_000     # CMake sees nothing to regenerate
    assert (dst / "CMakeFiles" / "3.25.1" / "CMakeCUDACompiler.cmake").is_file()
    assert not list(dst.rglob("*.o")) and not (dst / cmake.ORIGIN).exists()   # only the configuration's objects count
    assert (dst / "blob.bin").read_bytes() == (tree / "blob.bin").read_bytes()  # binary files copied as they are


def test_the_configured_tree_is_reused_not_configured_again(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        tmp = Path(cmd[cmd.index("-B") + 1])
        tmp.mkdir(parents=True)
        return type("P", (), {"returncode": 0})()

    monkeypatch.setattr(cmake.subprocess, "run", fake_run)
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text("project(x)\n")
    first = cmake.configure(src, tmp_path / "_cmake", "90", [], ["py", "objcache.py"])
    second = cmake.configure(src, tmp_path / "_cmake", "90", [], ["py", "objcache.py"])
    assert first == second and len(calls) == 1
    assert any(a.startswith("-DCMAKE_CUDA_COMPILER_LAUNCHER=py;objcache.py;--job-flags;") for a in calls[0])
    (src / "CMakeLists.txt").write_text("project(y)\n")        # a changed CMakeLists.txt: a fresh configure
    assert cmake.configure(src, tmp_path / "_cmake", "90", [], ["py", "objcache.py"]) != first


def test_cuda_architectures_from_arch_words():
    assert cmake.cuda_architectures("sm_80 sm_90a") == "80;90a"


def test_the_launcher_puts_the_jobs_words_first_on_a_compile_only(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(objcache, "_preprocess", lambda cmd, out: seen.append(cmd) or b"x")
    monkeypatch.setattr(objcache, "_nvcc_version", lambda nvcc: b"v")
    monkeypatch.setattr(objcache.subprocess, "run",
                        lambda cmd, **kw: seen.append(cmd) or objcache.subprocess.CompletedProcess(cmd, 1, "", ""))
    flags = tmp_path / "sweep_flags.json"
    flags.write_text(json.dumps(["-I", "/job", "-DA=1"]))
    objcache.main(["--dir", str(tmp_path / "c"), "--job-flags", str(flags), "--", "nvcc", "-Isrc", "-c", "a.cu", "-o", "a.o"])
    assert seen[0][:4] == ["nvcc", "-I", "/job", "-DA=1"]
    seen.clear()
    objcache.main(["--dir", str(tmp_path / "c"), "--job-flags", str(flags), "--", "nvcc", "a.o", "-o", "prog"])
    assert seen == [["nvcc", "a.o", "-o", "prog"]]                  # a link: passed as it is
