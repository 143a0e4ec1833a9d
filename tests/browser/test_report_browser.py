"""report.html and the compare page, opened in headless Chromium: they load with no
console error and no network request, draw their plots, fit the window's width,
and a full-page screenshot is kept (under tmp_path, and in $SWEEP_SCREENSHOT_DIR
when set, to look at)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sweep import report
from sweep.decide import select as select_mod
from sweep.space import target

DATA = Path(__file__).resolve().parents[1] / "data"
# The same cases as tests/report/test_report.py: the toy sweep, and every real sweep under h100_sweep/.
CASES = [pytest.param(DATA / "toy_results" / "toy", id="toy")] + [
    pytest.param(d, id=f"h100-{d.name}") for d in sorted((DATA / "h100_sweep").glob("*"))
    if (d / "configs.parquet").is_file()]
WIDTH = 1280


def _open(ctx: Any, page_path: Path) -> tuple[Any, list[str], list[str]]:
    """The page loaded from file://, with console errors / page errors and any non-file request seen."""
    page = ctx.new_page()
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("request", lambda r: requests.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
    page.goto(page_path.as_uri(), wait_until="load")
    page.wait_for_timeout(300)   # late console messages
    return page, errors, requests


def _screenshot(page: Any, tmp_path: Path, name: str) -> Path:
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    out_dir = os.environ.get("SWEEP_SCREENSHOT_DIR")
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(out_dir) / name)
    return shot


def _layout(page: Any) -> dict[str, Any]:
    return page.evaluate("""() => {
        const svgs = Array.from(document.querySelectorAll('.plot svg'));
        return {
            svgs: svgs.length,
            sizes: svgs.map(s => { const r = s.getBoundingClientRect(); return [r.width, r.height]; }),
            texts: document.querySelectorAll('.plot svg text').length,
            height: document.documentElement.scrollHeight,
            width: document.documentElement.scrollWidth,
        };
    }""")


@pytest.mark.parametrize("case", CASES)
def test_report_opens_without_errors_draws_its_plots_and_fits_the_window(browser_context: Any, case: Path,
                                                                          tmp_path: Path) -> None:
    d = tmp_path / case.name
    shutil.copytree(case, d)
    html = report.write_report(d)
    groups = len(json.loads((d / "best.json").read_text())["choices"])

    page, errors, requests = _open(browser_context, html)
    assert errors == []
    assert requests == []
    layout = _layout(page)
    assert layout["svgs"] == groups
    assert all(w > 300 and h > 150 for w, h in layout["sizes"]), layout["sizes"]
    assert layout["texts"] > 10 * groups          # labels stay text (svg.fonttype none)
    assert 1500 < layout["height"] < 40_000
    assert layout["width"] <= WIDTH                 # no table or plot overflows the page sideways
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    page.locator("table.sortable th:visible").first.click()  # the optional sorting script runs without error
    assert errors == []
    _screenshot(page, tmp_path, f"report_{case.name}.png")


def _scaled_copy(src: Path, dst: Path, kernel: str, factor: float) -> None:
    """A copy of a sweep whose `kernel` times are scaled, re-selected (best.json) from them."""
    shutil.copytree(src, dst)
    m = pd.read_parquet(dst / "measurements.parquet")
    sel = m["kernel"] == kernel
    for col in ("median_ns", "min_ns", "max_ns", "mean_ns", "std_ns", "total_median_ns", "total_std_ns"):
        m.loc[sel, col] = m.loc[sel, col] * factor
    m.to_parquet(dst / "measurements.parquet", index=False)
    space = target.load(report.resolve_space_path(json.loads((dst / "manifest.json").read_text())["space"]))
    best = select_mod.select(space, m)
    (dst / "best.json").write_text(json.dumps(best.to_dict()))
    conf = select_mod.confirmation(space, m, pd.read_parquet(dst / "configs.parquet"), best)
    (dst / "confirmation.json").write_text(json.dumps(conf.to_dict()))


def test_compare_page_opens_without_errors_and_draws_its_chart(browser_context: Any, tmp_path: Path) -> None:
    _scaled_copy(DATA / "toy_results" / "toy", tmp_path / "toy", "beta_kernel", 1.0)
    _scaled_copy(DATA / "toy_results" / "toy", tmp_path / "toy-fast-beta", "beta_kernel", 0.5)
    html = report.write_compare(tmp_path, "toy", "toy-fast-beta")
    page, errors, requests = _open(browser_context, html)
    assert errors == [] and requests == []
    layout = _layout(page)
    assert layout["svgs"] == 1 and layout["width"] <= WIDTH
    _screenshot(page, tmp_path, "compare_toy.png")


def test_a_report_over_workloads_shows_each_groups_per_workload_table(browser_context: Any, tmp_path: Path) -> None:
    from tests.report.test_per_workload import workloads_results   # results built from recorded H100 samples

    html = report.write_report(workloads_results(tmp_path / "sweep"))
    page, errors, requests = _open(browser_context, html)
    assert errors == [] and requests == []
    table = page.locator("table.workloads")
    assert table.count() == 1 and table.is_visible()
    cells = table.locator("tbody tr td:first-child").all_inner_texts()
    assert cells == ["gelu", "ln", "decode"]
    assert table.locator("tbody tr").nth(2).inner_text().count("its kernels do not run here") == 1
    assert page.locator("#workloads-note").is_visible()
    assert _layout(page)["width"] <= WIDTH
    _screenshot(page, tmp_path, "report_workloads.png")
