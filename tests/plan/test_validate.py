"""`config-sweep validate` on grids too large to count (sweep.plan.validate): the legal share
estimated from random points."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from sweep.plan import validate as validate_mod
from sweep.plan.validate import lines, validate
from sweep.space import target
from tests.conftest import needs_nvcc

HUB = Path(__file__).resolve().parents[1] / "data" / "benchmark_spaces"


def learning(space):
    return dataclasses.replace(space, strategy=dataclasses.replace(space.strategy, name="learning"))


def test_the_legal_share_of_a_grid_too_large_to_count_is_estimated_near_its_exact_count():
    v = validate(learning(target.load(HUB / "hotspot_milo.T1.json")))
    hits, of = v.sampled
    # the hub's hotspot rules counted exactly, with numpy, over all 4,440,000 points
    bx = np.array([1, 2, 4, 8, 16, *range(32, 1025, 32)])
    r = np.arange(1, 11)
    BX, BY, TX, TY, TT, LU, SH = np.meshgrid(bx, 2 ** np.arange(6), r, r, r, r, np.array([0, 1]), indexing="ij")
    legal = ((BX * BY >= 32) & (TT % LU == 0) & (BX * BY <= 1024)
             & ((BX * TX + TT * 2) * (BY * TY + TT * 2) * (2 + SH) * 4 <= 49152)).sum()
    share = legal / BX.size                                            # 82,984 of 4,440,000
    assert abs(hits / of - share) < 4 * np.sqrt(share * (1 - share) / of)
    assert f"; {hits:,} of {of:,} random points pass the rules (about 1.8%)" in lines(v)[2]


def test_a_grid_too_large_to_count_whose_rules_each_speak_of_one_group_is_counted_as_the_groups_product():
    examples = Path(__file__).resolve().parents[2] / "examples"
    v = validate(target.load(examples / "gemm_stencil" / "space.yaml"))
    assert v.legal is None and v.by_groups == (1552, 634)
    assert lines(v)[2] == ("legal: 983,968 of 2,500,000 (the product of the 2 parameter groups' legal combinations: "
                           "1,552 x 634)")
    # the two examples' own spaces, counted point by point, hold the same groups
    assert [validate(target.load(examples / e / "space_large.yaml")).legal for e in ("tiled_gemm", "stencil_cmake")] \
        == [1552, 634]


def test_validate_lists_each_groups_legal_combinations_once_for_the_count_and_the_search(monkeypatch):
    from sweep.plan import learned
    listed = []
    real = learned.group_combinations
    monkeypatch.setattr(learned, "group_combinations",
                        lambda space, group, base: listed.append(group[0].macro) or real(space, group, base))
    space = target.load(Path(__file__).resolve().parents[2] / "examples" / "gemm_stencil" / "space.yaml")
    for strategy in ("auto", "learning"):
        listed.clear()
        v = validate(dataclasses.replace(space, strategy=dataclasses.replace(space.strategy, name=strategy)))
        assert v.by_groups == (1552, 634) and "a model per parameter group (2: 1,552 x 634 legal)" in v.strategy_note
        assert sorted(listed) == ["GEMM_BM", "STENCIL_BLOCK_X"]


def test_a_small_grid_of_several_groups_lists_each_once_for_the_group_lines_and_the_search(monkeypatch):
    from sweep.plan import learned
    listed = []
    real = learned.group_combinations
    monkeypatch.setattr(learned, "group_combinations",
                        lambda space, group, base: listed.append(group[0].macro) or real(space, group, base))
    v = validate(learning(target.load(Path(__file__).resolve().parents[2] / "examples" / "stencil_cmake" / "space.yaml")))
    assert v.legal == 270 and [g.legal for g in v.groups] == [30, 9]
    assert "a model per parameter group (2: 30 x 9 legal)" in v.strategy_note
    assert sorted(listed) == ["STENCIL_BLOCK_X", "STENCIL_RED_BLOCK"]


def test_validate_reads_the_defaults_and_kernels_of_headers_the_build_finds_in_other_folders():
    out = lines(validate(target.load(Path(__file__).resolve().parents[2] / "examples" / "gemm_stencil" / "space.yaml")))
    assert "defaults: each of the 10 swept macros its sources define declares the program's own value" in out
    assert "kernels: each kernels: list names the kernels the sources read its macro in" in out


def test_validate_names_each_group_by_its_kernels_with_its_legal_combinations():
    out = lines(validate(target.load(Path(__file__).resolve().parents[2] / "examples" / "gemm_stencil" / "space.yaml")))
    at = out.index(next(line for line in out if line.startswith("groups: 2 (")))
    assert out[at + 1:at + 3] == [
        "  gemm_tiled_kernel: GEMM_BM, GEMM_BN, GEMM_BK, GEMM_TM, GEMM_TN (1,552 legal of 3,125)",
        "  jacobi_kernel: STENCIL_BLOCK_X, STENCIL_BLOCK_Y, STENCIL_TILE_X, STENCIL_TILE_Y, STENCIL_USE_SHARED "
        "(634 legal of 800)"]


def test_a_group_too_large_to_list_is_named_by_its_size_and_the_others_are_listed_once(tmp_path, monkeypatch):
    from sweep.plan import learned
    listed = []
    real = learned.group_combinations
    monkeypatch.setattr(learned, "group_combinations",
                        lambda space, group, base: listed.append(group[0].macro) or real(space, group, base))
    names = [f"P{i}" for i in range(8)]
    params = "".join(f"  {n}: {{values: [{', '.join(map(str, range(10)))}], min: 0, kernels: [chain]}}\n" for n in names)
    rules = "".join(f"  - \"{a} + {b} <= 1\"\n" for a, b in zip(names, names[1:]))
    (tmp_path / "space.yaml").write_text("name: two\ntarget: {name: t, dir: ., profile: [\"{build}/t\"]}\n"
                                         "strategy: learning\nparameters:\n" + params
                                         + "  BLOCK: {values: [32, 64, 128, 256], kernels: [block]}\nconstraints:\n" + rules)
    (tmp_path / "Makefile").write_text("all:\n")
    out = lines(validate(target.load(tmp_path / "space.yaml")))
    assert out[-3:-1] == ["  chain: P0, P1, P2, P3, P4, P5, P6, P7 (100,000,000 combinations)",
                          "  block: BLOCK (4 legal of 4)"]
    assert listed == ["BLOCK"]          # the listed group once, for the lines and the search


def test_a_grid_no_random_point_of_which_is_legal_gets_a_bound_and_says_how_learning_finds_candidates(tmp_path):
    names = [f"p{i}" for i in range(8)]       # 10^8 points, 55 legal: 0/1 strings with no two 1s side by side
    t1 = {"General": {"BenchmarkName": "chain"}, "ConfigurationSpace": {
        "TuningParameters": [{"Name": n, "Type": "int", "Values": "list(range(10))", "Default": 0} for n in names],
        "Conditions": [{"Expression": f"{a} + {b} <= 1", "Parameters": [a, b]} for a, b in zip(names, names[1:])]}}
    (tmp_path / "chain.T1.json").write_text(json.dumps(t1))
    line = lines(validate(learning(target.load(tmp_path / "chain.T1.json"))))[2]
    assert line == ("legal: not counted (over 200,000 points); none of 10,000 random points passes the rules (under "
                    "0.03% of the grid is legal, a 95% bound): the learning strategy searches the rules for candidates")


# -- the declared defaults beside the program's own (tests/data/toy_target/common.h: ALPHA_BLOCK 256,
# BETA_X 32, BETA_Y 1) ---------------------------------------------------------------------------

def toy_lines(write_space, **params) -> list[str]:
    from tests.conftest import toy_space_dict

    parameters = toy_space_dict()["parameters"]
    parameters.update(params)
    v = validate(target.load(write_space(parameters=parameters)))
    return [line for line in lines(v) if line.startswith(("defaults", "  ALPHA", "  BETA"))]


def test_declared_defaults_that_are_the_programs_own_get_one_line(write_space):
    assert toy_lines(write_space) == ["defaults: each of the 3 swept macros its sources define declares the "
                                      "program's own value"]


def test_a_declared_default_other_than_the_programs_own_is_named_with_the_file_that_says_so(write_space):
    alpha = {"tag": "A", "values": [64, 128, 256], "default": 128, "kernels": ["alpha_kernel"]}
    out = toy_lines(write_space, ALPHA_BLOCK=alpha)
    assert out[0].startswith("defaults: beside the program's own") and len(out) == 2
    assert out[1] == ("  ALPHA_BLOCK: declares 128, but the program's own is 256 (common.h): speed-ups and the race "
                      "measure against 128, not what the program runs; declare `default: 256` if the sources are right")


def test_a_missing_default_is_named_with_the_programs_own_value_and_whether_the_values_hold_it(write_space):
    beta = {"tag": "B", "values": [64, 128], "kernels": ["beta_kernel"]}
    (_, line) = toy_lines(write_space, BETA_X=beta)
    assert line.startswith("  BETA_X: declares none; the program's own is 32 (common.h, not among the values): "
                           "`default: 32` names them")


def test_a_default_whose_derived_macros_differ_in_the_sources_cannot_be_the_programs_own(write_space):
    beta_x = {"tag": "B", "values": [1, 2, 4], "kernels": ["beta_kernel"]}
    out = toy_lines(write_space, BETA_X=beta_x, BETA_Y={"tag": "B", "equals": "BETA_X"})
    assert "with BETA_Y 1, which follow it here (equals:): no default of it is the program's own point" in out[1]
    assert len(out) == 2                  # BETA_Y, derived, is not swept: no line of its own


def test_a_t1_space_has_no_sources_to_compare_its_defaults_with():
    v = validate(learning(target.load(HUB / "hotspot_milo.T1.json")))
    assert v.own_defaults == () and not any(line.startswith("defaults") for line in lines(v))


@needs_nvcc
def test_a_run_starts_by_naming_a_declared_default_that_is_not_the_programs_own(write_space, tmp_path, capsys):
    from sweep.pipeline import driver

    alpha = {"tag": "A", "values": [64, 128], "default": 128, "kernels": ["alpha_kernel"]}
    path = write_space(parameters={"ALPHA_BLOCK": alpha, "BETA_X": {"tag": "B", "values": [32], "default": 32,
                                                                     "kernels": ["beta_kernel"]}})
    assert validate_mod.declared_not_own(target.load(path)).startswith(
        "declared defaults other than the program's own: ALPHA_BLOCK 128 (its sources say 256, common.h); "
        "speed-ups are against the declared ones")
    driver.run(path, driver.Options(executor="local", jobs_root=tmp_path / "j", results_root=tmp_path / "r",
                                    dry_run=True, arch="sm_90", report=False))
    assert "toy: declared defaults other than the program's own: ALPHA_BLOCK 128" in capsys.readouterr().err


def test_an_unreadable_source_file_is_passed_over_not_a_traceback(tmp_path, monkeypatch):
    from sweep.space.init import scan_macros

    (tmp_path / "a.cuh").write_text("#ifndef BLOCK\n#define BLOCK 128\n#endif\n")
    (tmp_path / "b.cuh").write_text("#ifndef TILE\n#define TILE 8\n#endif\n")
    read = Path.read_text

    def denied(self, *a, **k):           # root reads any mode here: the error a user without rights gets
        if self.name == "b.cuh":
            raise PermissionError(13, "Permission denied", str(self))
        return read(self, *a, **k)
    monkeypatch.setattr(Path, "read_text", denied)
    assert [(m.name, m.default) for m in scan_macros(tmp_path)] == [("BLOCK", 128)]
