"""The report of a sweep over workloads (sweep/report/per_workload.py): per group, each workload's
own pick next to the overall pick and the overall pick's regret there, in the HTML, the markdown
and the JSON summary; a sweep without workloads shows none of it.

The results folder is built from recorded H100 samples (tests/decide/test_objective.py's: gelu_kernel and
layernorm_kernel as one kernel at two shapes), plus a workload that never launches the group; and
spaces/inference.yaml's real H100 sweep (tests/data/h100_sweep/inference), selected again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from sweep import report
from sweep.decide import collect, select
from sweep.records import Manifest, now
from tests.decide.test_objective import BLOCKS, GELU, LN, measured, med, rows, space_with

DATA = Path(__file__).resolve().parents[1] / "data"


def workloads_results(root: Path, **weights: float) -> Path:
    """results/s/ of a sweep of P over workloads gelu, ln and decode (which launches only other_kernel),
    as collect and select write it."""
    root.mkdir(parents=True, exist_ok=True)
    space = space_with(root, **(weights or {"gelu": 1, "ln": 1, "decode": 5}))
    decode = rows([(f"P{b // 32}", b // 32, GELU[b]) for b in BLOCKS], kernel="other_kernel", workload="decode")
    m = pd.concat([measured(), decode], ignore_index=True).assign(gpu="NVIDIA H100 80GB HBM3", backend="nsys")
    configs = pd.DataFrame([{"tag": f"P{b // 32}", "role": "sweep", "status": "ok", "stage": "", "reason": "", "log": "",
                             "P": b // 32, "config_hash": f"h{b}", "gpu": "NVIDIA H100 80GB HBM3", "backend": "nsys"}
                            for b in BLOCKS])
    manifest = Manifest("s", str(space.path), "grid", "nsys", "local", 3, "3", "c", "d", now(), tags=tuple(configs["tag"]))
    d = root / "results" / "s"
    collect.write_tables(collect.Collected(configs, m, manifest), d)
    (d / "manifest.json").write_text(json.dumps(manifest.to_dict()))
    select.write_best(select.select(space, m), d, "#define P 2\n")
    return d


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return workloads_results(tmp_path / "sweep")


def test_each_group_shows_every_workloads_own_pick_and_the_overall_picks_regret(results):
    page = report.write_report(results).read_text()
    table = page[page.index('<table class="workloads">'):]
    table = table[:table.index("</table>")]
    rows_ = table.split("<tr")[2:]
    assert [r.split('<td class="mono">')[1].split("<")[0] for r in rows_] == ["gelu", "ln", "decode"]
    gelu, ln, decode = rows_
    assert "P=32" in gelu and f"{100 * (med(GELU[64]) / med(GELU[1024]) - 1):+.1f}%" in gelu
    assert "P=1" in ln and f"{100 * (med(LN[64]) / med(LN[32]) - 1):+.1f}%" in ln
    assert "its kernels do not run here" in decode
    assert "Per workload" in page and 'id="workloads-note"' in page
    assert "decode: weight 5, batch 4 x seq_len 64" in page           # the header names every workload
    assert "worst workload: +" in page and "on gelu" in page
    assert "Σ weight × time per iteration" in page                    # the plot's axis says what it shows


def test_a_workload_whose_own_pick_is_the_overall_one_is_highlighted(tmp_path):
    page = report.write_report(workloads_results(tmp_path / "w", gelu=20, ln=1)).read_text()
    table = page[page.index('<table class="workloads">'):]
    chosen = [r for r in table[:table.index("</table>")].split("<tr")[2:] if r.startswith(' class="chosen"')]
    assert len(chosen) == 1 and ">gelu<" in chosen[0] and "+0.0%" in chosen[0]


def test_the_markdown_and_json_summaries_carry_the_per_workload_picks(results):
    report.write_report(results)
    md = (results / "report.md").read_text()
    assert "| workload | weight | its own pick |" in md and "| gelu | 1 | P=32 |" in md
    s = report.summary_json(results)
    assert [w["name"] for w in s["workloads"]] == ["gelu", "ln", "decode"]
    assert {w["workload"]: w["values"] for w in s["choices"][0]["workloads"]} == {"gelu": {"P": 32}, "ln": {"P": 1}}


def test_the_measured_table_has_a_row_per_job_and_workload(results):
    kernels, measured_rows = report.measured_rows(report.load(results))
    assert {(r["tag"], r["workload"]) for r in measured_rows} == {(f"P{b // 32}", w) for b in BLOCKS
                                                                  for w in ("gelu", "ln", "decode")}
    assert set(kernels) == {"k", "other_kernel"}


def test_a_sweep_without_workloads_shows_no_workload_table(tmp_path):
    d = tmp_path / "toy"
    shutil.copytree(DATA / "toy_results" / "toy", d)
    page = report.write_report(d).read_text()
    assert 'class="workloads"' not in page and "Per workload" not in page and "workloads-note" not in page


def test_the_confirmation_gives_each_workload_the_combined_best_against_the_defaults(tmp_path):
    """The best and default jobs measured on every workload: the weighted totals stay as they were,
    and each workload gets its own pair, so a pick that serves the weighted sum but slows one
    workload shows it (here the best is 2x faster on gelu and 1.25x slower on ln)."""
    space = space_with(tmp_path, gelu=1, ln=4)
    ends = pd.concat([rows([("best", 32, [100.0] * 3)], workload="gelu", role="best"),
                      rows([("default", 1, [200.0] * 3)], workload="gelu", role="baseline"),
                      rows([("best", 32, [50.0] * 3)], workload="ln", role="best"),
                      rows([("default", 1, [40.0] * 3)], workload="ln", role="baseline")], ignore_index=True)
    m = pd.concat([measured(), ends], ignore_index=True)
    conf = select.confirmation(space, m, pd.DataFrame(), select.select(space, m))
    assert (conf.best_total_ns, conf.default_total_ns) == (100.0 + 4 * 50.0, 200.0 + 4 * 40.0)
    assert conf.workloads == {"gelu": {"best_ns": 100.0, "default_ns": 200.0, "speedup_vs_default": 2.0},
                              "ln": {"best_ns": 50.0, "default_ns": 40.0, "speedup_vs_default": 0.8}}
    again = type(conf).from_dict(json.loads(json.dumps(conf.to_dict())))
    assert again == conf
    lines = report.confirmation_rows(type("SweepData", (), {"confirmation": conf.to_dict()})())
    assert ("Workload ln: combined best / default launch sizes", "50 ns / 40 ns",
            "combined best is 0.800× the defaults' speed here") in lines


def test_a_confirmation_written_before_workloads_reads_with_none():
    from sweep.records import Confirmation

    old = json.loads((DATA / "h100_sweep" / "seed" / "confirmation.json").read_text())
    assert old["schema"] == "sweep-confirmation/1"
    conf = Confirmation.from_dict(old)
    assert conf.workloads == {} and conf.best_total_ns == old["best_total_ns"]


def test_each_workloads_evidence_reads_by_where_its_samples_came_from(results):
    from sweep.records.evidence import verdict_words
    from sweep.report.per_workload import workload_rows

    choice = json.loads((results / "best.json").read_text())["choices"][0]
    picks = [p for p in choice["workloads"] if p["verdict"] != "unknown"]
    assert picks and all(p["noise_source"] in ("iterations", "runs") for p in picks)   # best.json keeps it
    rows_ = {r["workload"]: r for r in workload_rows(choice, [])}
    for p in picks:
        assert rows_[p["workload"]]["evidence"].endswith(verdict_words(p["verdict"], p["noise_source"]))
    assert any("one run's noise" in r["evidence"] for r in rows_.values())   # one run's iterations: said so


H100_INFERENCE = DATA / "h100_sweep" / "inference"   # spaces/inference.yaml on an H100, 2026-11-25 (the SIMT matmul then; space.yaml)


def _per_workload(choice: dict) -> list[tuple]:
    return [(w["workload"], w["values"], round(w["regret"], 9)) for w in choice["workloads"]]


@pytest.fixture(scope="module")
def h100_inference():
    """spaces/inference.yaml as that H100 sweep ran it (its snapshot: the file has moved on to the
    tf32x3 matmul's tiles since) and the measurements the sweep recorded."""
    from sweep.space import target

    space = target.load_snapshot(H100_INFERENCE / "space.yaml", Path(__file__).resolve().parents[2] / "spaces" / "inference.yaml")
    return space, pd.read_parquet(H100_INFERENCE / "measurements.parquet")


def test_the_h100_inference_sweep_reselects_to_the_per_workload_picks_and_regrets_it_printed(h100_inference):
    space, m = h100_inference
    best = select.select(space, m).to_dict()
    recorded = json.loads((H100_INFERENCE / "best.json").read_text())
    assert [c["values"] for c in best["choices"]] == [c["values"] for c in recorded["choices"]]
    assert [_per_workload(c) for c in best["choices"]] == [_per_workload(c) for c in recorded["choices"]]
    # By hand from the run's output: no LayerNorm block serves both prefills, and the weighted
    # pick (128) costs each of them over 20%; the matmul tile is the short prefill's own.
    ln = next(c for c in best["choices"] if "LAYERNORM_BLOCK_SIZE" in c["values"])
    assert ln["values"] == {"LAYERNORM_BLOCK_SIZE": 128}
    assert [(w["workload"], w["values"]["LAYERNORM_BLOCK_SIZE"]) for w in ln["workloads"]] == [
        ("prefill_long", 32), ("prefill_short", 256)]
    assert all(w["regret"] > 0.2 for w in ln["workloads"])
    mm = next(c for c in best["choices"] if "MATMUL_BM" in c["values"])
    short = next(w for w in mm["workloads"] if w["workload"] == "prefill_short")
    assert short["values"] == mm["values"] and short["regret"] == 0


def test_the_h100_inference_confirmation_gives_every_workload_the_picks_against_the_defaults(h100_inference):
    space, m = h100_inference
    conf = select.confirmation(space, m, pd.read_parquet(H100_INFERENCE / "configs.parquet"), select.select(space, m)).to_dict()
    recorded = json.loads((H100_INFERENCE / "confirmation.json").read_text())   # written before vs_default
    assert {k: v for k, v in conf.items() if k not in ("vs_default", "schema")} == \
        {k: v for k, v in recorded.items() if k != "schema"}
    # the two jobs' weighted samples: the combined pick 4.2-4.4% faster than the defaults, beyond noise
    ev = conf["vs_default"]
    assert ev["verdict"] == "faster" and 0.04 < ev["ci_low"] < ev["ci_high"] < 0.05
    rows_ = report.confirmation_rows(type("SweepData", (), {"confirmation": conf})())
    assert any(r[0].startswith("Default launch sizes") and r[2].endswith("the defaults' speed, faster beyond noise")
               for r in rows_)
    assert set(conf["workloads"]) == {"prefill_long", "prefill_short", "decode"}
    assert conf["workloads"]["prefill_short"]["speedup_vs_default"] > 1.4    # the short prefill's matmul tile
    assert conf["workloads"]["prefill_long"]["speedup_vs_default"] < 1.0     # what the weights gave up there
