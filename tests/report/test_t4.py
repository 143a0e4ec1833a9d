"""T4 results out (sweep.report.t4), checked against the published T4 results schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from sweep import cli
from tests.dispatch.test_replay import KT, t1_space

DATA = Path(__file__).resolve().parents[1] / "data"
SCHEMA = json.loads((DATA / "t4" / "results-schema.json").read_text())


def test_the_shipped_t4_extract_is_valid_t4():
    jsonschema.validate(json.loads((DATA / "benchmark_spaces" / "A4000_T4_extract.json").read_text()), SCHEMA)


def test_the_schema_refuses_what_t4_does_not_allow():
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"results": [{"configuration": {}, "times": {}, "invalidity": "exploded",
                                          "correctness": 0}]}, SCHEMA)


def test_report_format_t4_writes_a_replayed_sweep_as_valid_t4_with_the_recorded_names(tmp_path, capsys):
    dirs = ["--jobs-dir", str(tmp_path / "jobs"), "--results-dir", str(tmp_path / "results")]
    assert cli.main(["run", str(t1_space(tmp_path)), "--executor", "replay", "--from", str(KT), "--no-report",
                     "--no-confirm", *dirs]) == 0
    capsys.readouterr()
    assert cli.main(["report", "conv", "--format", "t4", *dirs]) == 0
    path = Path(capsys.readouterr().out.strip())
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, SCHEMA)
    results = doc["results"]
    assert len(results) == 64 and doc["schema_version"] == "1.0.0"
    assert sorted(r["invalidity"] for r in results).count("correct") == 62
    ok = next(r for r in results if r["configuration"] == {"block_size_x": 16, "block_size_y": 1, "tile_size_x": 1,
              "tile_size_y": 1, "read_only": 0, "use_padding": 0, "use_shmem": 0, "use_cmem": 1,
              "filter_height": 15, "filter_width": 15})
    assert ok["times"]["compilation"] == pytest.approx(892.914007185027)
    assert len(ok["times"]["runtimes"]) == 32 and ok["times"]["runtimes"][0] == pytest.approx(5.302271842956543)
    assert ok["measurements"][0]["value"] == pytest.approx(sorted(ok["times"]["runtimes"])[15:17][0], rel=0.2)
    gap = next(r for r in results if r["invalidity"] != "correct")
    assert gap["measurements"][0]["value"] == "InvalidConfig" and gap["correctness"] == 0

