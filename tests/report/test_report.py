"""The report stage (the package sweep/report/) on real collected sweeps.

Cases: the CPU toy sweep (tests/data/toy_results/toy: 20 grid points, 12 ok,
4 verify_failed, 4 skipped by a static_assert, baseline and best jobs) and every
real sweep under tests/data/h100_sweep/<name>/ (same layout), found by itself.
Generic tests derive what to expect from the case's own best.json and configs;
PINNED holds hand-checked expectations per case (add one for an H100 sweep).
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest

from sweep import cli, report
from sweep.core import atomic
from sweep.decide import select as select_mod
from sweep.pipeline import driver as pipeline
from sweep.space import target
from sweep.core.errors import SweepError

DATA = Path(__file__).resolve().parents[1] / "data"
TOY = DATA / "toy_results" / "toy"
CASES = [pytest.param(TOY, id="toy")] + [
    pytest.param(d, id=f"h100-{d.name}") for d in sorted((DATA / "h100_sweep").glob("*"))
    if (d / "configs.parquet").is_file()]
PINNED = {
    "toy": {
        "picks": {"ALPHA_BLOCK": 128, "BETA_X": 64, "BETA_Y": 4},
        "failed": {f"A96_B{b}": "ALPHA_BLOCK=96 computes wrong results" for b in ("32x1", "32x4", "64x1", "64x4")},
        "skipped": {f"A1024_B{b}": "static_assert: ALPHA_BLOCK must be <= 512" for b in ("32x1", "32x4", "64x1", "64x4")},
    },
}
NOT_FAILED = ("ok", "pending", "running")
TIME_COLUMNS = ("median_ns", "min_ns", "max_ns", "mean_ns", "std_ns", "total_median_ns", "total_std_ns")


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def copy_case(case: Path, tmp_path: Path, name: str | None = None) -> Path:
    d = tmp_path / (name or case.name)
    shutil.copytree(case, d)
    return d


def section(page: str, element_id: str) -> str:
    """The HTML from the element with this id to the end of its table (or the next heading)."""
    start = page.index(f'id="{element_id}"')
    end = page.find("</table>", start)
    return page[start:end if end != -1 else len(page)]


def reselect(d: Path) -> None:
    """Rewrite best.json and confirmation.json from the copy's (edited) tables."""
    m = pd.read_parquet(d / "measurements.parquet")
    configs = pd.read_parquet(d / "configs.parquet")
    space = target.load(report.resolve_space_path(json.loads((d / "manifest.json").read_text())["space"]))
    best = select_mod.select(space, m)
    (d / "best.json").write_text(json.dumps(best.to_dict()))
    (d / "confirmation.json").write_text(json.dumps(select_mod.confirmation(space, m, configs, best).to_dict()))


def scaled_copy(case: Path, tmp_path: Path, name: str, kernel: str, factor: float) -> Path:
    """A copy of a sweep whose `kernel` times are scaled by `factor`, re-selected."""
    d = copy_case(case, tmp_path, name)
    m = pd.read_parquet(d / "measurements.parquet")
    sel = m["kernel"] == kernel
    for col in TIME_COLUMNS:
        m.loc[sel, col] = m.loc[sel, col] * factor
    m.to_parquet(d / "measurements.parquet", index=False)
    reselect(d)
    return d


def kernels_of(case: Path) -> list[str]:
    return sorted(set(pd.read_parquet(case / "measurements.parquet")["kernel"]))


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return copy_case(TOY, tmp_path)


# ---------------------------------------------------------------------------
# the report of a finished sweep
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_best_table_shows_every_chosen_value_runner_up_and_speedup(case: Path, tmp_path: Path) -> None:
    d = copy_case(case, tmp_path)
    page = report.write_report(d).read_text()
    table = section(page, "best-table")
    best = json.loads((d / "best.json").read_text())
    assert table.count("<tr>") == len(best["choices"]) + 1
    for ch in best["choices"]:
        for macro, value in ch["values"].items():
            assert f"{macro}={value}" in table
        if ch["runner_up"]:
            assert html.escape(report.fmt_pct(ch["margin"])) in table
        if ch.get("is_default"):      # the default's own launch sizes: no ratio of two jobs' noise
            assert "the default" in table
        elif ch["speedup_vs_default"]:
            assert report.fmt_ratio(ch["speedup_vs_default"]) in table
    for macro, value in PINNED.get(case.name, {}).get("picks", {}).items():
        assert f"{macro}={value}" in table


def test_a_pick_that_is_the_default_reads_the_default_in_the_best_table_and_the_others_a_ratio(tmp_path: Path) -> None:
    d = copy_case(DATA / "h100_sweep" / "seed", tmp_path)
    reselect(d)                        # the recorded best.json predates is_default
    choices = json.loads((d / "best.json").read_text())["choices"]
    assert {ch["kernels"][0] for ch in choices if ch["is_default"]} >= {"residual_kernel"}   # 128, the engine's own
    rows = section(report.write_report(d).read_text(), "best-table").split("<tr>")[2:]
    for ch in choices:
        (row,) = [r for r in rows if ch["kernels"][0] in r]
        assert ("the default" in row) == ch["is_default"]
        if not ch["is_default"] and ch["speedup_vs_default"]:
            assert report.fmt_ratio(ch["speedup_vs_default"]) in row


def test_toy_best_table_pins_alpha_128_and_beta_64x4_beyond_noise(toy: Path) -> None:
    table = re.sub(r"\s+", " ", section(report.write_report(toy).read_text(), "best-table"))   # values may wrap
    rows = table.split("<tr>")[2:]
    alpha = next(r for r in rows if "alpha_kernel" in r)
    beta = next(r for r in rows if "beta_kernel" in r)
    assert "ALPHA_BLOCK=128" in alpha and "ALPHA_BLOCK=256" in alpha and "+30.2%" in alpha and "1.302×" in alpha
    assert "BETA_X=64, BETA_Y=4" in beta and "BETA_X=32, BETA_Y=4" in beta and "+20.0%" in beta and "1.600×" in beta
    assert all(">yes" in r for r in (alpha, beta))


@pytest.mark.parametrize("case", CASES)
def test_failures_table_lists_every_job_not_ok_with_status_stage_reason_and_log_link(case: Path, tmp_path: Path) -> None:
    d = copy_case(case, tmp_path)
    page = report.write_report(d).read_text()
    configs = pd.read_parquet(d / "configs.parquet")
    bad = configs[~configs["status"].isin(NOT_FAILED)]
    assert len(bad) > 0 or case.name != "toy"
    if (bad["status"] != "skipped").sum() == 0:  # a sweep where nothing failed says so
        assert '<h2 id="failures">Failures (0)</h2>' in page and 'id="failures-table"' not in page
    failed = section(page, "failures-table") if 'id="failures-table"' in page else "<tr>"
    skipped = section(page, "skipped-table") if 'id="skipped-table"' in page else ""
    for _, r in bad.iterrows():
        table = skipped if r["status"] == "skipped" else failed
        row = next((x for x in table.split("<tr>") if f">{html.escape(r['tag'])}<" in x), None)
        assert row is not None, f"{r['tag']} ({r['status']}) missing from its table"
        assert r["status"] in row and html.escape(r["reason"]) in row
        if r["log"]:
            assert f'href="{html.escape(Path(r["log"]).as_uri())}"' in row
    pinned = PINNED.get(case.name, {})
    for tag, reason in pinned.get("failed", {}).items():
        row = next(x for x in failed.split("<tr>") if f">{tag}<" in x)
        assert "verify_failed" in row and reason in row and "verify.log" in row
    for tag, reason in pinned.get("skipped", {}).items():
        row = next(x for x in skipped.split("<tr>") if f">{tag}<" in x)
        assert html.escape(reason) in row
    assert failed.count("<tr>") - 1 == sum(bad["status"] != "skipped")


def test_unmeasured_values_of_a_group_are_listed_under_its_plot_with_their_reason(toy: Path) -> None:
    page = report.write_report(toy).read_text()
    group = page[page.index("ALPHA_BLOCK</span> <span"):page.index("BETA_X, BETA_Y</span> <span")]
    assert "ALPHA_BLOCK=96" in group and "verify_failed ×4" in group
    assert "ALPHA_BLOCK=1024" in group and "skipped ×4" in group and "static_assert" in group


def test_a_2d_cell_that_no_job_measured_is_marked_in_the_heatmap_and_listed(toy: Path) -> None:
    configs = pd.read_parquet(toy / "configs.parquet")
    sel = configs["tag"].str.endswith("_B64x1") & (configs["status"] == "ok")
    configs.loc[sel, ["status", "stage", "reason"]] = ["runtime_failed", "profile", "illegal memory access"]
    configs.to_parquet(toy / "configs.parquet", index=False)
    m = pd.read_parquet(toy / "measurements.parquet")
    m[~m["tag"].isin(configs[sel]["tag"])].to_parquet(toy / "measurements.parquet", index=False)
    reselect(toy)
    page = report.write_report(toy).read_text()
    group = page[page.index("BETA_X, BETA_Y</span> <span"):page.index('id="confirmation"')]
    assert "BETA_X=64, BETA_Y=1" in group and "runtime_failed ×3" in group and "illegal memory access" in group
    svg = re.search(r"<svg .*?</svg>", group, re.S).group(0)
    assert "runtime_failed" in svg                 # the empty cell says why


@pytest.mark.parametrize("case", CASES)
def test_header_names_gpu_driver_commit_host_and_counts_from_the_tables(case: Path, tmp_path: Path) -> None:
    d = copy_case(case, tmp_path)
    page = report.write_report(d).read_text()
    head = section(page, "header")
    ok = pd.read_parquet(d / "configs.parquet").query("status == 'ok'")
    for col in ("gpu", "driver", "commit", "host", "backend"):
        values = {str(v) for v in ok[col].dropna() if str(v).strip()}
        for v in values:
            assert html.escape(v) in head, (col, v)
        if not values and col in ("gpu", "driver"):
            assert "not recorded" in head
    for label in ("GPU", "Driver", "CUDA runtime", "Commit", "Host(s)", "Space file", "Strategy", "Backend", "Executor",
                  "Collected"):
        assert f"<th>{html.escape(label)}</th>" in head
    n = report.counts(report.load(d))
    assert f"{n['ok']} ok" in page and f"{n['failed']} failed" in page and f"{n['skipped']} skipped" in page


def test_header_shows_the_gpu_driver_and_cuda_strings_recorded_by_the_jobs(toy: Path) -> None:
    configs = pd.read_parquet(toy / "configs.parquet")
    ok = configs["status"] == "ok"
    configs["gpu"] = configs["gpu"].astype(object)
    configs["driver"] = configs["driver"].astype(object)
    configs["cuda_runtime"] = configs["cuda_runtime"].astype(object)
    configs.loc[ok, "gpu"] = "NVIDIA H100 80GB HBM3"
    configs.loc[ok, "driver"] = "580.65.06"
    configs.loc[ok, "cuda_runtime"] = "13.0"
    configs.to_parquet(toy / "configs.parquet", index=False)
    head = section(report.write_report(toy).read_text(), "header")
    assert "NVIDIA H100 80GB HBM3" in head and "580.65.06" in head and "13.0" in head and "2bcfc9a4bd63" in head
    assert "toy_space.yaml" in head and "events" in head and "debug" in head


def test_header_counts_the_samples_dropped_as_throttled_and_the_runs_measured_again(toy: Path) -> None:
    configs = pd.read_parquet(toy / "configs.parquet")
    assert "Throttled" not in section(report.write_report(toy).read_text(), "header")   # tables from before it
    ok = configs.index[configs["status"] == "ok"]
    configs["throttled_runs"], configs["throttled_samples"] = 0, 0
    configs.loc[ok[0], ["throttled_runs", "throttled_samples"]] = [1, 20]   # a run measured again
    configs.loc[ok[1], "throttled_samples"] = 2                              # two iterations dropped, the run kept
    configs.to_parquet(toy / "configs.parquet", index=False)
    head = section(report.write_report(toy).read_text(), "header")
    assert "<th>Throttled</th>" in head
    assert "22 sample(s) taken under 75% of the default SM clock dropped; 1 run(s) measured again" in head


@pytest.mark.parametrize("case", CASES)
def test_page_is_self_contained_with_inline_svg_and_no_external_reference(case: Path, tmp_path: Path) -> None:
    d = copy_case(case, tmp_path)
    page = report.write_report(d).read_text()
    groups = len(json.loads((d / "best.json").read_text())["choices"])
    assert page.count("<svg ") == groups
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert "@import" not in page and not re.search(r"url\(\s*['\"]?https?:", page, re.I)
    assert "<link" not in page and "<img" not in page and "<iframe" not in page
    assert '<a href="best/conf.cuh">' in page and "#define" in section(page, "conf-cuh")


def test_plots_have_unique_element_ids_and_render_deterministically(toy: Path) -> None:
    first = report.write_report(toy).read_text()
    ids = re.findall(r'\sid="([^"]+)"', first)
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1][:5]
    refs = set(re.findall(r'href="#([^"]+)"', first)) | set(re.findall(r"url\(#([^)]+)\)", first))
    assert refs and refs <= set(ids)              # markers and clip paths still resolve
    second = report.write_report(toy).read_text()
    svgs = re.findall(r"<svg .*?</svg>", first, re.S)
    assert svgs and svgs == re.findall(r"<svg .*?</svg>", second, re.S)


def test_strings_from_the_data_are_escaped_in_html_and_markdown(toy: Path) -> None:
    configs = pd.read_parquet(toy / "configs.parquet")
    i = configs.index[configs["tag"] == "A96_B32x1"][0]
    configs.loc[i, "reason"] = "<script>alert(1)</script>"
    configs.loc[i, "log"] = '/tmp/x/"><img src=x onerror=alert(2)>.log'
    configs.to_parquet(toy / "configs.parquet", index=False)
    page = report.write_report(toy).read_text()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    assert page.count("<script>") == 1            # the page's own (optional) sorting script
    md = (toy / "report.md").read_text()
    assert "<script>" not in md and "&lt;script>alert(1)" in md


def test_times_are_shown_in_ns_us_or_ms_by_magnitude() -> None:
    fmt = report.fmt_ns
    assert fmt(995.5) == "996 ns" and fmt(23_456.0) == "23.46 µs" and fmt(12_345_678.0) == "12.346 ms"
    assert fmt(None) == "—"


# ---------------------------------------------------------------------------
# partial and degraded sweeps
# ---------------------------------------------------------------------------


def test_partial_sweep_without_best_json_renders_provisional_picks_and_says_what_is_pending(toy: Path) -> None:
    pending = ["A128_B64x4", "A128_B32x4", "A256_B32x1", "A256_B32x4", "A256_B64x1", "A64_B32x4", "A64_B64x4"]
    configs = pd.read_parquet(toy / "configs.parquet")
    sel = configs["tag"].isin(pending)
    configs.loc[sel, ["status", "stage", "reason", "log"]] = ["pending", "", "", ""]
    configs.to_parquet(toy / "configs.parquet", index=False)
    m = pd.read_parquet(toy / "measurements.parquet")
    m[~m["tag"].isin(pending)].to_parquet(toy / "measurements.parquet", index=False)
    for f in ("best.json", "confirmation.json"):
        (toy / f).unlink()

    page = report.write_report(toy).read_text()
    missing = page[page.index('id="missing"'):page.index('id="best"')]
    assert "7 of 20 configurations still pending: " + ", ".join(sorted(pending)) in missing
    assert "no best.json yet" in missing and "provisional" in missing
    assert "Best launch sizes (provisional)" in page
    assert "ALPHA_BLOCK=128" in section(page, "best-table")        # 128 is still measured in A128_B32x1
    assert "Not run yet (no confirmation.json)" in page
    md = (toy / "report.md").read_text()
    assert "7 of 20 configurations still pending" in md and "(provisional)" in md
    s = report.summary_json(toy)
    assert s["provisional"] and s["pending"] == sorted(pending) and s["counts"]["pending"] == 7


def test_sweep_with_nothing_measured_and_no_space_file_still_renders_and_says_why(toy: Path) -> None:
    configs = pd.read_parquet(toy / "configs.parquet")
    configs["status"] = "running"
    configs.to_parquet(toy / "configs.parquet", index=False)
    pd.read_parquet(toy / "measurements.parquet").iloc[0:0].to_parquet(toy / "measurements.parquet", index=False)
    manifest = json.loads((toy / "manifest.json").read_text())
    manifest["space"] = "/nowhere/gone.yaml"
    (toy / "manifest.json").write_text(json.dumps(manifest))
    for f in ("best.json", "confirmation.json", "best/conf.cuh"):
        (toy / f).unlink()

    page = report.write_report(toy).read_text()
    assert "20 of 20 configurations still running" in page
    assert "space file /nowhere/gone.yaml not found" in page
    assert "no best.json yet and no picks can be made here" in page
    assert "No picks yet" in page and "no best/conf.cuh yet" in page and "<svg" not in page
    assert report.summary_json(toy)["choices"] == []


NOTHING_MEASURED = {   # status: (stage, reason) of every job of a sweep where no configuration was measured
    "compile_failed": ("build", "ptxas error: too much shared data (0x12000 > 0xc000) in alpha_kernel"),
    "skipped": ("build", "static_assert: ALPHA_BLOCK must be <= 512 (toy rule)"),
    "runtime_failed": ("profile", "toy_bench was killed by SIGSEGV <core dumped>"),
}


def nothing_measured(toy: Path, measurements: str) -> pd.DataFrame:
    """Turn the toy copy into what `run` leaves when no job measured anything: only the two tables,
    every sweep job compile_failed, skipped or runtime_failed (no confirmation jobs: they follow
    a pick); measurements empty, with no columns as collect writes it, or with its columns."""
    configs = pd.read_parquet(toy / "configs.parquet")
    configs = configs[configs["role"] == "sweep"].reset_index(drop=True)
    statuses = list(NOTHING_MEASURED)
    for i in configs.index:
        status = statuses[i % len(statuses)]
        configs.loc[i, ["status", "stage", "reason"]] = [status, *NOTHING_MEASURED[status]]
    configs.to_parquet(toy / "configs.parquet", index=False)
    m = pd.read_parquet(toy / "measurements.parquet").iloc[0:0] if measurements == "columns" else pd.DataFrame()
    m.to_parquet(toy / "measurements.parquet", index=False)
    shutil.rmtree(toy / "best")
    for f in ("best.json", "confirmation.json", "manifest.json"):
        (toy / f).unlink()
    return configs


@pytest.mark.parametrize("measurements", ["no-columns", "columns"])
def test_sweep_where_every_job_failed_or_was_skipped_reports_its_failures_and_no_plots(
        toy: Path, measurements: str) -> None:
    configs = nothing_measured(toy, measurements)
    by = configs["status"].value_counts().to_dict()
    n_failed = by["compile_failed"] + by["runtime_failed"]
    page = report.write_report(toy).read_text()
    assert (f"{len(configs)} configurations: 0 ok, {n_failed} failed ({by['compile_failed']} compile_failed, "
            f"{by['runtime_failed']} runtime_failed), {by['skipped']} skipped") in page
    assert f'<h2 id="failures">Failures ({n_failed})</h2>' in page
    failed, skipped = section(page, "failures-table"), section(page, "skipped-table")
    for _, r in configs.iterrows():
        row = next(x for x in (skipped if r["status"] == "skipped" else failed).split("<tr>") if f">{r['tag']}<" in x)
        assert r["status"] in row and html.escape(r["reason"]) in row
    assert "<svg" not in page and 'id="best-table"' not in page and 'id="measured"' not in page
    assert "No picks yet" in page and "nothing was measured" in page

    md = (toy / "report.md").read_text()
    assert f"## Failures ({n_failed})" in md and f"## Skipped ({by['skipped']})" in md and "No picks yet." in md
    for _, reason in NOTHING_MEASURED.values():
        assert reason.replace("<c", "&lt;c") in md          # markdown escapes what could open a tag

    s = json.loads(json.dumps(report.summary_json(toy)))
    assert s["choices"] == [] and s["config"] is None and not s["provisional"] and s["confirmation"] is None
    assert s["counts"]["ok"] == 0 and s["counts"]["failed"] == n_failed and s["counts"]["skipped"] == by["skipped"]
    assert {f["tag"] for f in s["failures"] + s["skipped"]} == set(configs["tag"])
    assert {f["reason"] for f in s["failures"] + s["skipped"]} == {r for _, r in NOTHING_MEASURED.values()}


def test_missing_space_file_degrades_to_best_json_and_macro_columns_and_says_so(toy: Path) -> None:
    manifest = json.loads((toy / "manifest.json").read_text())
    manifest["space"] = "/nowhere/gone.yaml"
    (toy / "manifest.json").write_text(json.dumps(manifest))
    page = report.write_report(toy).read_text()
    assert "space file /nowhere/gone.yaml not found" in page
    assert page.count("<svg ") == 2 and "ALPHA_BLOCK=96" in page   # plots and unmeasured values from the tables


def test_space_path_from_another_checkout_resolves_inside_this_repository() -> None:
    assert report.resolve_space_path("/elsewhere/clone/tests/data/toy_space.yaml") == DATA / "toy_space.yaml"
    assert report.resolve_space_path("/elsewhere/none.yaml") is None


def test_results_dir_that_does_not_exist_is_a_sweep_error_naming_it_and_the_command(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match=r"no results in .*nosuch.*config-sweep collect nosuch"):
        report.write_report(tmp_path / "nosuch")


# ---------------------------------------------------------------------------
# markdown and json
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_markdown_and_json_summaries_carry_the_picks_confirmation_and_failures(case: Path, tmp_path: Path) -> None:
    d = copy_case(case, tmp_path)
    report.write_report(d)
    md = (d / "report.md").read_text()
    best = json.loads((d / "best.json").read_text())
    for ch in best["choices"]:
        assert report.fmt_values(ch["values"]) in md
    assert "## End-to-end confirmation" in md and "## Failures" in md
    s = json.loads(json.dumps(report.summary_json(d)))      # plain JSON through and through
    assert s["config"] == best["config"]
    assert [c["values"] for c in s["choices"]] == [c["values"] for c in best["choices"]]
    conf = json.loads((d / "confirmation.json").read_text())
    assert s["confirmation"] == conf
    configs = pd.read_parquet(d / "configs.parquet")
    assert {f["tag"] for f in s["failures"] + s["skipped"]} == set(configs[~configs["status"].isin(NOT_FAILED)]["tag"])
    for tag in PINNED.get(case.name, {}).get("failed", {}):
        assert f"| {tag} |" in md


# ---------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------


def test_compare_shows_ratio_two_for_the_kernel_twice_as_slow_and_one_for_the_other(tmp_path: Path) -> None:
    scaled_copy(TOY, tmp_path, "toy-fast-beta", "beta_kernel", 0.5)
    copy_case(TOY, tmp_path, "toy")
    s = report.compare_summary(tmp_path, "toy-fast-beta", "toy")
    by = {tuple(g["macros"]): g for g in s["groups"]}
    assert by[("ALPHA_BLOCK",)]["ratio"] == pytest.approx(1.0)
    assert by[("BETA_X", "BETA_Y")]["ratio"] == pytest.approx(2.0)
    assert all(c["ratio"] == pytest.approx(2.0) for c in by[("BETA_X", "BETA_Y")]["candidates"])
    assert len(by[("BETA_X", "BETA_Y")]["candidates"]) == 4 and by[("ALPHA_BLOCK",)]["same_pick"]

    page = report.write_compare(tmp_path, "toy-fast-beta", "toy").read_text()
    rows = section(page, "compare-table").split("<tr>")[2:]
    assert "2.000×" in next(r for r in rows if "beta_kernel" in r)
    assert "1.000×" in next(r for r in rows if "alpha_kernel" in r)
    assert page.count("<svg ") == 1 and not re.search(r"""(?:src|href)\s*=\s*["']?https?:""", page)
    md = (tmp_path / "compare-toy-fast-beta-vs-toy.md").read_text()
    assert re.search(r"\| BETA_X, BETA_Y \| beta_kernel \|.*\| 2\.000× \|", md)
    assert re.search(r"\| ALPHA_BLOCK \| alpha_kernel \|.*\| 1\.000× \|", md)


def test_compare_lists_groups_and_kernels_present_in_only_one_sweep(tmp_path: Path) -> None:
    copy_case(TOY, tmp_path, "toy")
    d = copy_case(TOY, tmp_path, "toy-no-alpha")
    m = pd.read_parquet(d / "measurements.parquet")
    m[m["kernel"] != "alpha_kernel"].to_parquet(d / "measurements.parquet", index=False)
    reselect(d)
    s = report.compare_summary(tmp_path, "toy", "toy-no-alpha")
    assert s["groups_only_a"] == [{"macros": ["ALPHA_BLOCK"], "kernels": ["alpha_kernel"]}]
    assert s["kernels_only_a"] == ["alpha_kernel"] and s["kernels_only_b"] == []
    assert [g["macros"] for g in s["groups"]] == [["BETA_X", "BETA_Y"]]
    only = section(report.write_compare(tmp_path, "toy", "toy-no-alpha").read_text(), "only-list")
    assert "ALPHA_BLOCK" in only and "alpha_kernel" in only


@pytest.mark.parametrize("case", CASES)
def test_compare_of_a_sweep_with_itself_has_every_ratio_one(case: Path, tmp_path: Path) -> None:
    copy_case(case, tmp_path, "one")
    copy_case(case, tmp_path, "two")
    s = report.compare_summary(tmp_path, "one", "two")
    assert s["groups"] and all(g["ratio"] == pytest.approx(1.0) for g in s["groups"])
    assert not (s["groups_only_a"] or s["groups_only_b"] or s["kernels_only_a"] or s["kernels_only_b"])


def test_compare_with_an_unknown_sweep_names_the_missing_path_and_the_command(tmp_path: Path) -> None:
    copy_case(TOY, tmp_path, "toy")
    with pytest.raises(SweepError, match=r"sweep 'nope' in .*nope.*config-sweep report nope"):
        report.write_compare(tmp_path, "toy", "nope")
    with pytest.raises(SweepError, match="not a sweep name"):
        report.write_compare(tmp_path, "toy", "../etc")


# ---------------------------------------------------------------------------
# the CLI: report and compare
# ---------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_report_prints_path_markdown_json_or_csv_path(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    copy_case(TOY, tmp_path / "results")
    common = ("--results-dir", str(tmp_path / "results"), "--jobs-dir", str(tmp_path / "jobs"))
    rc, out, _ = _cli(capsys, "report", "toy", *common)
    assert rc == 0 and out.strip() == str(tmp_path / "results" / "toy" / "report.html")
    rc, out, _ = _cli(capsys, "report", "toy", *common, "--format", "markdown")
    assert rc == 0 and out.startswith("# Sweep toy") and "ALPHA_BLOCK=128" in out and "BETA_X=64, BETA_Y=4" in out
    rc, out, _ = _cli(capsys, "report", "toy", *common, "--format", "json")
    assert rc == 0 and json.loads(out)["config"] == {"ALPHA_BLOCK": 128, "BETA_X": 64, "BETA_Y": 4}
    rc, out, _ = _cli(capsys, "report", "toy", *common, "--format", "csv")
    assert rc == 0 and out.strip() == str(tmp_path / "results" / "toy" / "measurements.csv")


def test_cli_report_recollects_from_the_jobs_dir_when_the_sweep_is_there(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    copy_case(TOY, tmp_path / "results")
    (tmp_path / "jobs" / "toy").mkdir(parents=True)
    (tmp_path / "jobs" / "toy" / "sweep.json").write_text("{}")
    calls = []

    def fake_recollect(sweep: str, jobs_root: Path, results_root: Path, report: bool = True):
        calls.append((sweep, jobs_root, results_root))
        return None, {}

    monkeypatch.setattr(cli.manage, "recollect", fake_recollect)
    rc, out, _ = _cli(capsys, "report", "toy", "--results-dir", str(tmp_path / "results"), "--jobs-dir",
                      str(tmp_path / "jobs"))
    assert rc == 0 and calls == [("toy", tmp_path / "jobs", tmp_path / "results")]
    assert (tmp_path / "results" / "toy" / "report.html").is_file()


@pytest.fixture
def report_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the report files written through sweep.core.atomic, in order."""
    written: list[str] = []
    write_text = atomic.write_text

    def spy(path: Path, text: str, **kw) -> None:
        if Path(path).name in ("report.html", "report.md"):
            written.append(Path(path).name)
        write_text(path, text, **kw)

    monkeypatch.setattr(atomic, "write_text", spy)
    return written


def test_cli_report_writes_report_html_once_after_recollecting_a_measured_sweep(
        toy_sweep: tuple, tmp_path: Path, capsys: pytest.CaptureFixture, report_writes: list[str]) -> None:
    _, jobs, _, _ = toy_sweep
    shutil.copytree(jobs / "toy", tmp_path / "jobs" / "toy", ignore=shutil.ignore_patterns("build"))
    rc, out, _ = _cli(capsys, "report", "toy", "--jobs-dir", str(tmp_path / "jobs"), "--results-dir",
                      str(tmp_path / "results"))
    assert rc == 0 and out.strip() == str(tmp_path / "results" / "toy" / "report.html")
    assert report_writes == ["report.html", "report.md"]      # once: recollect collects, the CLI writes the report
    assert "ALPHA_BLOCK=128" in section(Path(out.strip()).read_text(), "best-table")


def test_cli_report_replaces_a_stale_report_itself_when_recollect_wrote_none(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, report_writes: list[str]) -> None:
    d = copy_case(TOY, tmp_path / "results")
    (d / "report.html").write_text("stale")
    (tmp_path / "jobs" / "toy").mkdir(parents=True)
    (tmp_path / "jobs" / "toy" / "sweep.json").write_text("{}")
    monkeypatch.setattr(cli.manage, "recollect", lambda sweep, jobs_root, results_root, report=True: (None, {}))
    rc, out, _ = _cli(capsys, "report", "toy", "--results-dir", str(tmp_path / "results"), "--jobs-dir",
                      str(tmp_path / "jobs"))
    assert rc == 0 and report_writes == ["report.html", "report.md"]
    head = section((d / "report.html").read_text(), "header")
    assert f"<th>Jobs</th><td>{tmp_path / 'jobs' / 'toy'}</td>" in head


def test_cli_report_of_a_run_where_no_job_was_measured_is_its_failures(
        write_space: Callable[..., Path], dirs: tuple[Path, Path], fake_gpus: None, capsys: pytest.CaptureFixture,
        report_writes: list[str]) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    jobs, results = dirs
    params = {"ALPHA_BLOCK": {"tag": "A", "values": [96, 1024], "default": 96, "kernels": ["alpha_kernel"]},
              "BETA_X": {"tag": "B", "values": [32], "default": 32, "kernels": ["beta_kernel"]},
              "BETA_Y": {"tag": "B", "values": [1], "default": 1, "kernels": ["beta_kernel"]}}
    s = pipeline.run(write_space(parameters=params),
                     pipeline.Options(executor="debug", jobs_root=jobs, results_root=results, poll_s=0.05))
    assert s.best is None and s.counts == {"verify_failed": 1, "skipped": 1}
    assert report_writes == ["report.html", "report.md"]      # the run writes its report even when all failed
    report_writes.clear()
    rc, out, _ = _cli(capsys, "report", "toy", "--jobs-dir", str(jobs), "--results-dir", str(results))
    assert rc == 0 and report_writes == ["report.html", "report.md"]
    page = Path(out.strip()).read_text()
    assert "2 configurations: 0 ok, 1 failed (1 verify_failed), 1 skipped" in page and "<svg" not in page
    assert "ALPHA_BLOCK=96 computes wrong results" in section(page, "failures-table")
    assert html.escape("static_assert: ALPHA_BLOCK must be <= 512") in section(page, "skipped-table")


def test_cli_report_of_an_unknown_sweep_fails_naming_both_paths_and_the_run_command(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc, out, err = _cli(capsys, "report", "nosuch", "--results-dir", str(tmp_path / "r"), "--jobs-dir", str(tmp_path / "j"))
    assert rc == 1 and out == ""
    assert str(tmp_path / "j" / "nosuch") in err and str(tmp_path / "r" / "nosuch") in err
    assert "config-sweep run SPACE.yaml --name nosuch" in err


def test_cli_compare_prints_path_markdown_or_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    scaled_copy(TOY, tmp_path, "half", "beta_kernel", 0.5)
    copy_case(TOY, tmp_path, "toy")
    rc, out, _ = _cli(capsys, "compare", "half", "toy", "--results-dir", str(tmp_path))
    assert rc == 0 and out.strip() == str(tmp_path / "compare-half-vs-toy.html")
    rc, out, _ = _cli(capsys, "compare", "half", "toy", "--results-dir", str(tmp_path), "--format", "markdown")
    assert rc == 0 and out.startswith("# half vs toy") and "2.000×" in out
    rc, out, _ = _cli(capsys, "compare", "half", "toy", "--results-dir", str(tmp_path), "--format", "json")
    ratios = {tuple(g["macros"]): g["ratio"] for g in json.loads(out)["groups"]}
    assert rc == 0 and ratios[("BETA_X", "BETA_Y")] == pytest.approx(2.0)
    rc, _, err = _cli(capsys, "compare", "half", "nope", "--results-dir", str(tmp_path))
    assert rc == 1 and str(tmp_path / "nope") in err


def test_a_race_of_too_few_rounds_reads_as_no_evidence_not_as_a_tie_settled_by_rule() -> None:
    from sweep.report.tables import certified

    raced = {"status": "tie", "rounds": 1, "tied": [{"G": 128}, {"G": 512}], "rule": "default in tied set"}
    assert certified({"certification": raced}) == "no evidence (1 round(s)): the sweep's pick stands"
    assert certified({"certification": raced | {"rounds": 12}}) == "tie (2 tied after 12 rounds; default in tied set)"


@pytest.mark.parametrize("choice, cell", [
    ({"verdict": "faster", "noise_source": "iterations"}, "yes, one run's"),   # a run's own offset not weighed
    ({"verdict": "faster", "noise_source": "runs"}, "yes"),
    ({"verdict": "faster", "noise_source": "race"}, "yes"),
    ({"verdict": "tie", "noise_source": "iterations"}, "no"),
    ({"verdict": "unknown", "noise_source": "unknown"}, "unknown"),
    ({"beyond_noise": True}, "yes"),                                            # a record from before verdicts
    ({"beyond_noise": False}, "no"),
])
def test_the_beyond_noise_cell_words_a_verdict_as_verdict_words_does(choice, cell):
    from sweep.report.tables import beyond_noise

    assert beyond_noise(choice) == cell


def test_the_h100_inference_best_table_says_its_margins_are_beyond_one_runs_noise(tmp_path):
    page = report.write_report(copy_case(DATA / "h100_sweep" / "inference", tmp_path)).read_text()
    assert "yes, one run&#39;s" in page or "yes, one run's" in page
