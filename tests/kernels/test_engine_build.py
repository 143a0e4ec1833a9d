"""The engine compiles for sm_80 and sm_90 with the default conf.cuh (its test programs for sm_90), for
sm_90 with non-default ones, and an illegal conf.cuh fails with its static_assert's message (real nvcc)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"

pytestmark = needs_nvcc


# A whole engine build for two architectures takes about ten minutes of 2 cores; beside another
# xdist worker, or on a loaded machine, longer than pytest's 900 s: it has make's own limit.
WHOLE_BUILD_S = 3000


def make(tmp: Path, conf: str | None, arch: str, targets=("all",), jobs: int = 2) -> subprocess.CompletedProcess:
    args = ["make", "-C", str(KERNELS), f"-j{jobs}", f"BUILD_DIR={tmp / 'build'}", f"ARCH={arch}", *targets]
    if conf is not None:
        (tmp / "conf.cuh").write_text(conf)
        args.append(f"CONF_DIR={tmp}")
    return subprocess.run(args, capture_output=True, text=True, timeout=WHOLE_BUILD_S)


@pytest.mark.timeout(WHOLE_BUILD_S + 60)
def test_the_engine_builds_for_sm80_and_sm90_and_its_test_programs_for_sm90_with_the_default_launch_sizes(tmp_path):
    # kernel_check, kernel_bench and matmul_tiles include every family to instantiate other launch
    # sizes: the slowest units to compile (kernel_check 163 s and matmul_tiles 120 s of one core
    # per architecture here). For sm_80 they would add nothing the engine's own build (its family
    # objects, for both architectures) does not compile: the only architecture branches
    # (common.cuh's grid dependency calls, the matmuls' sm_80 guards) take no launch size, and
    # static shared memory and registers are capped alike on both. So they build for sm_90 only.
    both, sm90 = tmp_path / "both", tmp_path / "sm90"
    for folder in (both, sm90):
        folder.mkdir()
    p = make(both, None, "sm_80 sm_90")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    p = make(sm90, None, "sm_90", ("check", "bench", "tiles"))
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    for folder, programs, archs in ((both, ("gpt2_forward", "gpt2_verify", "gpt2_generate"), {"sm_80", "sm_90"}),
                                    (sm90, ("kernel_check", "kernel_bench", "matmul_tiles"), {"sm_90"})):
        for prog in programs:
            exe = folder / "build" / prog
            assert exe.is_file()
            if shutil.which("cuobjdump"):
                elfs = subprocess.run(["cuobjdump", "--list-elf", str(exe)], capture_output=True, text=True).stdout
                assert {arch for arch in ("sm_80", "sm_90") if arch in elfs} == archs
    flags = (both / "build" / "obj" / "flags.txt").read_text()
    assert "code=sm_80" in flags and "code=sm_90" in flags


NON_DEFAULT = {
    "small-blocks": "#define RESIDUAL_BLOCK_SIZE 4\n#define GELU_BLOCK_SIZE 8\n#define LAYERNORM_BLOCK_SIZE 16\n"
                    "#define PREPARE_BLOCK_SIZE 32\n#define RESLN_BLOCK_SIZE 32\n#define SOFTMAX_BLOCK_SIZE 1\n",
    "cube-encoder-and-tiles": "#define ENCODER_BLOCK_X 5\n#define ENCODER_BLOCK_Y 5\n#define ENCODER_BLOCK_Z 5\n"
                              "#define MATMUL_TILE 32\n#define MATMUL_BM 64\n#define MATMUL_BN 128\n#define MATMUL_BK 16\n"
                              "#define MATMUL_WM 32\n#define MATMUL_WN 32\n#define MATMUL_TM 4\n#define MATMUL_TN 8\n"
                              "#define MATMUL_STAGES 4\n#define MATMUL_SPLITK_BLOCK_SIZE 96\n"
                              "#define MATMUL_TF32X3_BM 64\n#define MATMUL_TF32X3_BN 64\n#define MATMUL_TF32X3_BK 16\n"
                              "#define MATMUL_TF32X3_WM 32\n#define MATMUL_TF32X3_WN 32\n#define MATMUL_TF32X3_STAGES 3\n",
    "attention-tiles": "#define ATTENTION_BR 128\n#define ATTENTION_BC 32\n#define ATTENTION_TM 4\n#define ATTENTION_TN 2\n"
                       "#define ATTENTION_DECODE_BLOCK_SIZE 128\n#define MATVEC_BLOCK_SIZE 512\n#define MATVEC_MAX_ROWS 4\n"
                       "#define MATVEC_DECODE_BLOCK_SIZE 96\n",
}


def defined_macros(conf: str) -> list[str]:
    return re.findall(r"^#define (\w+)", conf, re.M)


def test_the_non_default_sets_set_disjoint_macros_so_one_conf_cuh_holds_them_all():
    macros = [m for conf in NON_DEFAULT.values() for m in defined_macros(conf)]
    assert sorted(m for m in set(macros) if macros.count(m) > 1) == []


@pytest.mark.timeout(4 * WHOLE_BUILD_S)    # on failure, a build for each set to name the broken one
def test_engine_builds_for_sm90_with_every_non_default_conf_cuh_set_in_one_conf_cuh(tmp_path):
    # The sets touch disjoint families (test above; no static_assert couples two of them), so one
    # build of them all together compiles every non-default value, instead of one build per set.
    # Only on failure is each set built alone, to name the one that breaks. One architecture: the
    # kernels' only architecture branches (common.cuh's grid dependency calls, the matmuls' sm_80
    # guards) use no launch macro, and static shared memory is capped at 48 KB on both, so what a
    # launch size breaks, it breaks on sm_90 too; sm_80 is built with the defaults (test above).
    p = make(tmp_path, "".join(NON_DEFAULT.values()), "sm_90", ("all", "check"))
    if p.returncode != 0:
        def fails_alone(name: str) -> bool:
            (tmp_path / name).mkdir()
            return make(tmp_path / name, NON_DEFAULT[name], "sm_90", ("all", "check")).returncode != 0
        failing = [name for name in NON_DEFAULT if fails_alone(name)]
        pytest.fail(f"non-default sets {failing or 'none alone, only all together'} fail to build:\n"
                    + p.stdout[-4000:] + p.stderr[-4000:])


ILLEGAL = [
    ("RESIDUAL_BLOCK_SIZE 2048", "residual", "RESIDUAL_BLOCK_SIZE must be between 1 and 1024"),
    ("LAYERNORM_BLOCK_SIZE 48", "layernorm", "LAYERNORM_BLOCK_SIZE must be a power of two up to 32 or a multiple of 32"),
    ("ENCODER_BLOCK_X 16\n#define ENCODER_BLOCK_Y 16\n#define ENCODER_BLOCK_Z 16", "encoder",
     "ENCODER_BLOCK_X * ENCODER_BLOCK_Y * ENCODER_BLOCK_Z must be <= 1024"),
    ("MATMUL_TILE 33", "matmul", "MATMUL_TILE must be 1..32"),
    ("MATMUL_BM 100", "matmul", "MATMUL_BM must be a multiple of MATMUL_WM"),
    ("MATMUL_WN 64", "matmul", "(MATMUL_WM/MATMUL_TM) * (MATMUL_WN/MATMUL_TN) must be 32"),
    ("MATMUL_TN 6\n#define MATMUL_WN 24", "matmul", "MATMUL_TM and MATMUL_TN must be multiples of 4"),
    ("MATMUL_BK 48", "matmul", "MATMUL_BK must divide the threads per block"),
    ("MATMUL_STAGES 8\n#define MATMUL_BM 256\n#define MATMUL_BN 256", "matmul", "over the 227 KB any GPU allows a block"),
    ("MATMUL_SPLITK_BLOCK_SIZE 0", "matmul", "MATMUL_SPLITK_BLOCK_SIZE must be between 1 and 1024"),
    ("MATMUL_TF32X3_WM 24", "matmul", "MATMUL_TF32X3_WM must be a multiple of 16"),
    ("MATMUL_TF32X3_BK 24", "matmul", "MATMUL_TF32X3_BK must be 16, 32, 48, ... 128"),
    ("MATMUL_TF32X3_BM 96", "matmul", "MATMUL_TF32X3_BM must be a multiple of MATMUL_TF32X3_WM"),
    ("MATMUL_TF32X3_STAGES 8\n#define MATMUL_TF32X3_BK 64", "matmul", "over the 227 KB any GPU allows a block"),
    ("ATTENTION_BC 64\n#define ATTENTION_TN 1", "attention", "must divide 32"),
    ("ATTENTION_DECODE_BLOCK_SIZE 100", "attention_decode", "ATTENTION_DECODE_BLOCK_SIZE must be a multiple of 32"),
]


@pytest.mark.parametrize("define, family, message", ILLEGAL, ids=[i[0].split()[0] for i in ILLEGAL])
def test_illegal_conf_cuh_fails_to_compile_with_the_static_assert_message(tmp_path, define, family, message):
    (tmp_path / "conf.cuh").write_text(f"#define {define}\n")
    p = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", f"-I{tmp_path}", f"-I{KERNELS}", "-c",
                        str(KERNELS / "units" / f"{family}.cu"), "-o", str(tmp_path / "x.o")],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode != 0
    assert f'static assertion failed with "{message}' in p.stdout + p.stderr or message in p.stdout + p.stderr


def test_the_readme_table_lists_every_launch_macro_with_its_default():
    defaults = {}
    for header in KERNELS.glob("*.cuh"):
        for macro, value in re.findall(r"#ifndef (\w+)\n#define \1 (\d+)", header.read_text()):
            defaults[macro] = int(value)
    table = dict(re.findall(r"^\| `(\w+)` \| (\d+) \|", (KERNELS / "README.md").read_text(), re.M))
    assert {k: int(v) for k, v in table.items()} == defaults


# Device helpers with no launch sizes of their own, included by the families that use them
# (matvec_rules: the decoding matvec's host-side rules, which the tests' host programs include;
# token_pick: the LM head's greedy pick, compiled in the matvec family's unit; matmul_simt,
# matmul_tf32x3 and matmul_splitk: the two own matmuls and the split-K they share, compiled in the
# matmul family's unit, whose macros matmul.cuh defines).
HELPERS = {"common", "rownorm", "attention_row", "matvec_rules", "token_pick", "matmul_simt", "matmul_tf32x3",
           "matmul_splitk"}


def test_every_family_header_is_compiled_as_its_own_unit():
    families = {p.stem for p in KERNELS.glob("*.cuh")} - HELPERS
    units = {p.stem for p in (KERNELS / "units").glob("*.cu")}
    assert families == units
    makefile = (KERNELS / "Makefile").read_text()
    listed = set(re.search(r"^FAMILIES := (.*)$", makefile, re.M).group(1).split())
    assert listed == units


# ---------------------------------------------------------------------------
# gpt2_generate, the decoding path's profile target, and its launch sizes
# ---------------------------------------------------------------------------

DECODE_CONF = ("#define MATVEC_BLOCK_SIZE 64\n#define MATVEC_MAX_ROWS 1\n#define ATTENTION_DECODE_BLOCK_SIZE 1024\n"
               "#define MATVEC_DECODE_BLOCK_SIZE 512\n"
               "#define KVCACHE_BLOCK_SIZE 96\n#define ARGMAX_BLOCK_SIZE 32\n#define LAYERNORM_BLOCK_SIZE 1024\n"
               "#define ENCODER_BLOCK_X 64\n#define ENCODER_BLOCK_Y 1\n#define ENCODER_BLOCK_Z 1\n")
# The kernel instantiations those macros make (host-side stub symbols, Itanium-mangled).
DECODE_INSTANCES = ("matvec_kernelILi64ELi1E", "matvec_splitk_kernelILi512ELi1E", "attention_decode_split_kernelILi1024ELi32E",
                    "kv_cache_write_kernelILi96E", "argmax_kernelILi32E", "layernorm_kernelILi1024E")


@pytest.fixture(scope="module")
def decode_build(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """gpt2_generate built for sm_90 with every decoding launch size off its default."""
    tmp = tmp_path_factory.mktemp("decode")
    p = make(tmp, DECODE_CONF, "sm_90", (str(tmp / "build" / "gpt2_generate"),))
    return p, tmp / "build" / "gpt2_generate"


def test_gpt2_generate_builds_with_non_default_decode_launch_sizes(decode_build):
    p, exe = decode_build
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert exe.is_file()
    if shutil.which("nm"):
        symbols = subprocess.run(["nm", str(exe)], capture_output=True, text=True).stdout
        assert [s for s in DECODE_INSTANCES if s not in symbols] == []
        assert "argmax_kernelILi1024E" not in symbols   # the default is gone, not built beside


def test_gpt2_generate_refuses_a_batch_other_than_1_before_touching_the_gpu(decode_build):
    p, exe = decode_build
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    r = subprocess.run([str(exe), "--weights", "/nonexistent/gpt2.bin", "-b", "4"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "-b 4: gpt2_generate decodes one sequence, so its batch must be 1" in r.stderr


DECODE_ILLEGAL = [
    ("MATVEC_BLOCK_SIZE 48", "matvec", "MATVEC_BLOCK_SIZE must be a multiple of 32"),
    ("MATVEC_BLOCK_SIZE 0", "matvec", "MATVEC_BLOCK_SIZE must be a multiple of 32"),
    ("MATVEC_MAX_ROWS 17", "matvec", "MATVEC_MAX_ROWS must be 1..16"),
    ("MATVEC_DECODE_BLOCK_SIZE 80", "matvec", "MATVEC_DECODE_BLOCK_SIZE must be a multiple of 32"),
    ("MATVEC_DECODE_BLOCK_SIZE 2048", "matvec", "MATVEC_DECODE_BLOCK_SIZE must be a multiple of 32"),
    ("ATTENTION_DECODE_BLOCK_SIZE 0", "attention_decode", "ATTENTION_DECODE_BLOCK_SIZE must be a multiple of 32"),
    ("ATTENTION_DECODE_CHUNK 0", "attention_decode", "ATTENTION_DECODE_CHUNK (keys a decoding block takes) must be 1..1024"),
    ("ATTENTION_DECODE_CHUNK 1000", "attention_decode", "the keys each warp scores in registers, must be at most 32"),
    ("KVCACHE_BLOCK_SIZE 2048", "kvcache", "KVCACHE_BLOCK_SIZE must be between 1 and 1024"),
    ("ARGMAX_BLOCK_SIZE 0", "kvcache", "ARGMAX_BLOCK_SIZE must be a multiple of 32 from 32 to 1024"),
    ("ARGMAX_BLOCK_SIZE 1056", "kvcache", "ARGMAX_BLOCK_SIZE must be a multiple of 32 from 32 to 1024"),
]


@pytest.mark.parametrize("define, family, message", DECODE_ILLEGAL, ids=[i[0].replace(" ", "=") for i in DECODE_ILLEGAL])
def test_an_illegal_decode_launch_size_fails_to_compile_with_its_static_assert(tmp_path, define, family, message):
    test_illegal_conf_cuh_fails_to_compile_with_the_static_assert_message(tmp_path, define, family, message)


def test_device_helpers_define_no_launch_size_a_conf_cuh_could_set():
    for name in sorted(HELPERS - {"common"}):   # common.cuh reads conf.cuh itself
        text = (KERNELS / f"{name}.cuh").read_text()
        assert not re.search(r"^#ifndef (\w+)\n#define \1", text, re.M), f"{name}.cuh defines a launch size"
