"""sweep.space.run_flags: the timing flags a program's sources name, for init's profile command."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sweep.space import init as init_mod
from sweep.space.run_flags import read_run_flags

ROOT = Path(__file__).resolve().parents[2]


def a_program(tmp_path: Path, main: str, files: dict[str, str] | None = None, cmake: str = "") -> Path:
    program = tmp_path / "prog"
    program.mkdir(parents=True)
    (program / "main.cu").write_text(main)
    for name, text in (files or {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    if cmake:
        (program / "CMakeLists.txt").write_text(cmake)
    else:
        (program / "Makefile").write_text("all:\n\ttrue CONF_DIR\n")
    return program


def flags_of(program: Path):
    return read_run_flags(program, init_mod.source_files(program), init_mod.header_dirs(program))


MAIN = """#include <cstring>
int main(int argc, char** argv) {
  int iters = 10, warmup = 2; bool nvtx = false;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--iterations")) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--warm-up")) warmup = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--nvtx")) nvtx = true;
    else if (!strcmp(argv[i], "--verbose")) {}
  }
  for (int i = 0; i < iters; ++i) { if (nvtx) nvtxRangePushA("iteration"); /* ... */ if (nvtx) nvtxRangePop(); }
}
"""


def test_the_flags_the_program_compares_its_arguments_with_make_the_profile_command(tmp_path):
    flags = flags_of(a_program(tmp_path, MAIN))
    assert flags.profile_words("bench") == ["{build}/bench", "--nvtx", "--iterations", "{iterations}",
                                            "--warm-up", "{warmup}", "{args}"]
    assert flags.where == ("main.cu",)


def test_a_flag_that_takes_its_value_in_the_same_word_gets_the_placeholder_in_that_word(tmp_path):
    main = 'int main(int c, char** v) { if (!strncmp(v[1], "--reps=", 7)) {} }\n'
    assert flags_of(a_program(tmp_path, main)).profile_words("b") == ["{build}/b", "--reps={iterations}", "{args}"]


def test_flags_in_a_header_on_a_cmake_include_path_are_found_and_named_relative_to_the_program(tmp_path):
    program = a_program(tmp_path, '#include "options.h"\nint main() {}\n',
                        {"shared/options.h": '#include "more.h"\nconst char* I = "--iters";\n',
                         "shared/more.h": '#include "options.h"\nconst char* W = "--warmup";\n'},   # a cycle
                        cmake="add_executable(prog main.cu)\n"
                              "target_include_directories(prog PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../shared)\n")
    flags = flags_of(program)
    assert (flags.iterations, flags.warmup, flags.nvtx) == ("--iters", "--warmup", "")
    assert flags.where == ("../shared/more.h", "../shared/options.h")


def test_a_header_no_include_path_names_is_not_read(tmp_path):
    program = a_program(tmp_path, '#include "options.h"\nint main() {}\n', {"shared/options.h": '"--iters"'})
    assert flags_of(program).iterations == ""


@pytest.mark.parametrize("example", sorted(p.parent.name for p in (ROOT / "examples").glob("*/space.yaml")))
def test_init_writes_each_examples_own_profile_command_but_its_problem_size(example):
    """Every example parses its flags in ../common/run_options.cuh, beside the program.mk its
    Makefile includes; some take --nvtx and some refuse it (stencil_cmake): the starter's command
    is the hand-written space's, less the arguments that choose a problem (xgemm's --size 2048)."""
    text = init_mod.starter(ROOT / "examples" / example, None, [])
    line = next(x for x in text.splitlines() if x.startswith("  profile:"))
    assert "CHECK" in line
    own = yaml.safe_load((ROOT / "examples" / example / "space.yaml").read_text())["target"]["profile"]
    got = yaml.safe_load(text)["target"]["profile"]
    assert [w for w in own if w in got] == got and "{iterations}" in got


def test_nvtx_is_passed_only_where_the_program_names_it_and_a_range_is_opened(tmp_path):
    shared = {"common/opts.h": 'bool take(const char* a, bool nvtx) { return !strcmp(a, "--iters") || '
                               '(nvtx && !strcmp(a, "--nvtx")); }\n',
              "common/timing.h": 'void timed(bool on) { if (on) nvtxRangePushA("iteration"); }\n'}
    cmake = ("add_executable(prog main.cu)\n"
             "target_include_directories(prog PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../common)\n")
    refuses = a_program(tmp_path / "a", '#include "opts.h"\n#include "timing.h"\nint main() {}\n', shared, cmake)
    assert flags_of(refuses).nvtx == ""              # only the shared header names it
    takes = a_program(tmp_path / "b", '// prog [--iters N] [--nvtx]\n#include "opts.h"\n#include "timing.h"\n', shared,
                      cmake)
    assert flags_of(takes).nvtx == "--nvtx"
    no_range = a_program(tmp_path / "c", '// prog [--iters N] [--nvtx]\n#include "opts.h"\n', shared, cmake)
    assert flags_of(no_range).nvtx == ""             # named, but nothing opens a range


def test_init_asks_to_fill_in_the_profile_command_where_no_flag_is_found(tmp_path):
    text = init_mod.starter(a_program(tmp_path, "int main() {}\n"), None, [])
    assert yaml.safe_load(text)["target"]["profile"] == ["{build}/prog", "{args}"]
    assert "FILL IN: how to time it" in next(x for x in text.splitlines() if x.startswith("  profile:"))


def test_init_keeps_the_fill_in_but_uses_the_flags_it_found_where_no_iterations_flag_is_found(tmp_path):
    main = 'int main(int c, char** v) { if (!strcmp(v[1], "--nvtx")) nvtxRangePushA("run"); }\n'
    text = init_mod.starter(a_program(tmp_path, main), None, [])
    assert yaml.safe_load(text)["target"]["profile"] == ["{build}/prog", "--nvtx", "{args}"]
    line = next(x for x in text.splitlines() if x.startswith("  profile:"))
    assert "FILL IN: how to time it" in line and "found --nvtx in main.cu" in line
