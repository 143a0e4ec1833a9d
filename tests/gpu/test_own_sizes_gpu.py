"""The program's own launch sizes race where the space declares no defaults, on a GPU:
examples/quick_check (a program written for the purpose) swept over scalar loads only, while its
own launch sizes (scale.cuh: 256 threads, 2 items of float4 a thread) load four times as wide; and
over 128 and its own 256 threads at its own loads, where the sweep's 256 is the program itself."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from sweep.records import OWN_SIZES

from test_byop_gpu import run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quick_check"


def sweep_without_defaults(tmp_path, sweep_roots, name: str, blocks: list[int], items: int, vec: int):
    """quick_check swept over `blocks` at one ITEMS and VEC, its space declaring no default."""
    space = yaml.safe_load((EXAMPLE / "space.yaml").read_text())
    space.update(name=name, strategy="grid", constraints=[])
    space["target"]["dir"] = str(EXAMPLE)
    space["parameters"] = {"QC_BLOCK": {"tag": "B", "values": blocks, "kernels": ["scale_kernel"]},
                           "QC_ITEMS": {"tag": "I", "values": [items], "kernels": ["scale_kernel"]},
                           "QC_VEC": {"tag": "V", "values": [vec], "kernels": ["scale_kernel"]}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    return run(path, sweep_roots)


def test_a_space_without_defaults_races_the_programs_own_and_keeps_it_out_of_best_conf(tmp_path, sweep_roots):
    s = sweep_without_defaults(tmp_path, sweep_roots, "qc-own", [128, 1024], 1, 1)
    (c,) = s.best.choices
    entrants = {e["tag"]: e["values"] for e in c.certification.entrants}
    assert entrants["default"] == {} and len(entrants) == 3               # both values and the program's own
    assert c.values == {} and c.certified and c.is_default and c.runner_up.values["QC_VEC"] == 1
    conf = (s.results_dir / "best" / "conf.cuh").read_text()
    assert "#define" not in conf
    assert json.loads((s.results_dir / "best.json").read_text())["config"] == {}
    assert f"| scale_kernel | {OWN_SIZES} |" in (s.results_dir / "report.md").read_text()


def test_a_swept_value_built_byte_identical_to_the_programs_own_races_once_as_the_default(tmp_path, sweep_roots):
    s = sweep_without_defaults(tmp_path, sweep_roots, "qc-own-named", [128, 256], 2, 4)   # its own: 256, 2, 4
    (c,) = s.best.choices
    assert {e["tag"]: e["is_default"] for e in c.certification.entrants} == {"B128_I2_V4": False, "B256_I2_V4": True}
    assert c.values["QC_BLOCK"] in (128, 256) and c.is_default == (c.values["QC_BLOCK"] == 256)
    assert json.loads((s.results_dir / "best.json").read_text())["config"]["QC_BLOCK"] == c.values["QC_BLOCK"]
