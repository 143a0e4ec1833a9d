"""gpt2_generate, the decoding path's profile target, on a real GPU (the odd model:
2 layers, 3 heads, n_embd 96): the check against transformers' greedy tokens before
any timing, the timed iterations, overlapped launches (sm_90) decoding what ordinary
ones do, attention in the qkv matvec or in its own kernel decoding the same tokens, per-kernel event timing of the decoding steps, and the profilers'
attribution of a replayed CUDA graph's kernels to the iterations."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from collections import Counter
from pathlib import Path

import pytest

STEPS = 8


def generate(engine_build: Path, odd_model, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(engine_build / "gpt2_generate"), "--weights", str(odd_model.weights), *args],
                          capture_output=True, text=True, timeout=600)


def decoding_calls(steps: int, layers: int, prefill: bool = False, attention: str = "fused") -> dict[str, int]:
    """Launches per iteration of each kernel a decoding step launches (gpt2.cu's
    gpt2_decode_step), for `steps` steps: at batch 1 the LayerNorms are folded into
    the matvecs after them and the KV-cache write into the qkv matvec, so a step runs
    the encoder, per layer four split-K matvecs (and, with `attention` split, one
    flash-decoding attention; fused, what a short context gets, the qkv matvec
    attends), then the LM head's matvec, which folds its logits into each row's best,
    and token_pick (which picks from them and moves the position on). With the prefill,
    plus its own launches: at fusion `full` one LayerNorm (the rest are fused with
    the residual), with the default 8-token prompt (<= MATVEC_MAX_ROWS) its linear
    layers as matvec_kernel launches, and its KV-cache writes."""
    calls = {"encoder_kernel": steps, "matvec_splitk_kernel": steps * (4 * layers + 1), "token_pick_kernel": steps}
    if attention == "split":
        calls["attention_decode_split_kernel"] = steps * layers
    if prefill:
        for k, extra in (("encoder_kernel", 1), ("layernorm_kernel", 1), ("matvec_kernel", 4 * layers + 1),
                         ("kv_cache_write_kernel", layers), ("argmax_kernel", 1)):
            calls[k] = calls.get(k, 0) + extra
    return calls


def calls_by_kernel(measurements) -> dict[str, int]:
    out: Counter[str] = Counter()
    for m in measurements:
        out[m.kernel] += m.calls
    return dict(out)


def reference_with_a_wrong_greedy_token(src: Path, dst: Path, index: int) -> tuple[int, int]:
    """Copies reference.bin with greedy token `index` changed (format: kernels/gpt2.h);
    returns (transformers' token, the one written instead)."""
    data = bytearray(src.read_bytes())
    B, T, V, P, _ = struct.unpack_from("<5I", data, 16)
    offset = 256 + 4 * B * T + 4 * B * T * V + 4 * P + 4 * index
    (right,) = struct.unpack_from("<i", data, offset)
    wrong = (right + 1) % V
    struct.pack_into("<i", data, offset, wrong)
    dst.write_bytes(bytes(data))
    return right, wrong


@pytest.mark.parametrize("path", [[], ["--no-graph"]], ids=["graph", "direct"])
def test_generate_checks_transformers_tokens_then_times_n_iterations_of_new_steps(engine_build, odd_model, path):
    p = generate(engine_build, odd_model, "--ref", str(odd_model.reference), "-n", "3", "-w", "1", "--new", "16", *path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "check: 64 greedy tokens as transformers'" in p.stderr
    out = json.loads(p.stdout)
    assert out["schema"] == "engine-timing/1" and out["program"] == "gpt2_generate"
    run = out["run"]
    assert (run["batch"], run["seq_len"], run["iterations"], run["warmup"]) == (1, 16, 3, 1)
    assert run["graph"] is (not path) and run["prefill"] is False and run["new_tokens"] == 16
    assert out["forward_ms"]["median_ms"] > 0 and out["decode_ms"]["median_ms"] > 0 and out["tokens_per_s"] > 0
    assert len(out["tokens"]) == 17 and out["kernels"] == []


def test_generate_decodes_the_same_seeded_prompt_with_and_without_the_check_on_either_path(engine_build, odd_model):
    ref = ["--ref", str(odd_model.reference)]
    runs = [generate(engine_build, odd_model, "-n", "1", "-w", "0", "--new", "24", *extra)
            for extra in ([], ref, ["--no-graph"], ["--no-graph", *ref])]
    assert [p.returncode for p in runs] == [0, 0, 0, 0], [p.stderr[-2000:] for p in runs]
    outs = [json.loads(p.stdout) for p in runs]
    assert {o["run"]["prompt_len"] for o in outs} == {8}
    assert len({tuple(o["tokens"]) for o in outs}) == 1


def test_generate_overlaps_a_steps_launches_on_sm90_and_decodes_the_same_tokens_without(engine_build, odd_model):
    ref = ["--ref", str(odd_model.reference)]
    runs = [generate(engine_build, odd_model, "-n", "1", "-w", "0", "--new", "24", *extra)
            for extra in (ref, [*ref, "--no-overlap"], ["--no-graph", *ref], ["--no-graph", *ref, "--no-overlap"])]
    assert [p.returncode for p in runs] == [0, 0, 0, 0], [p.stderr[-2000:] for p in runs]
    outs = [json.loads(p.stdout) for p in runs]
    sm90 = int(outs[0]["device"]["compute_capability"].split(".")[0]) >= 9   # programmatic dependent launch
    assert [o["run"]["overlap"] for o in outs] == [sm90, False, sm90, False]
    assert len({tuple(o["tokens"]) for o in outs}) == 1


def test_generate_replays_several_steps_a_graph_and_decodes_the_tokens_of_one_step_a_graph(engine_build, odd_model):
    ref = ["--ref", str(odd_model.reference)]
    runs = [generate(engine_build, odd_model, *ref, "-n", "2", "-w", "0", "--new", "11", *extra)
            for extra in ([], ["--graph-steps", "4"], ["--graph-steps", "64"])]   # 2 graphs of 4, 3 single steps; one of 11
    assert [p.returncode for p in runs] == [0, 0, 0], [p.stderr[-2000:] for p in runs]
    outs = [json.loads(p.stdout) for p in runs]
    assert [o["run"]["graph_steps"] for o in outs] == [1, 4, 11]
    assert len({tuple(o["tokens"]) for o in outs}) == 1 and len(outs[0]["tokens"]) == 12


def test_generate_refuses_graph_steps_without_the_graph(engine_build, odd_model):
    p = generate(engine_build, odd_model, "--no-graph", "--graph-steps", "4")
    assert p.returncode == 2 and "drop --no-graph, or --graph-steps" in p.stderr


def test_generate_attends_in_the_qkv_matvec_or_in_its_own_kernel_and_decodes_the_same_tokens(engine_build, odd_model,
                                                                                               tmp_path):
    from sweep.profile import events

    ref = ["--ref", str(odd_model.reference)]
    runs, rows = {}, {}
    for mode in ("auto", "fused", "split"):
        out = tmp_path / f"{mode}.json"
        runs[mode] = generate(engine_build, odd_model, *ref, "-n", "1", "-w", "0", "--new", str(STEPS),
                              "--decode-attention", mode, "--kernel-timing", "--json", str(out))
        assert runs[mode].returncode == 0, runs[mode].stderr[-3000:]
        doc = json.loads(out.read_text())
        runs[mode] = doc
        rows[mode] = calls_by_kernel(events.parse_json(out.read_text()))
    # 8 prompt tokens and 8 steps: a short context, which auto attends in the qkv matvec
    assert [runs[m]["run"]["decode_attention"] for m in ("auto", "fused", "split")] == ["fused", "fused", "split"]
    layers = runs["auto"]["model"]["num_layers"]
    assert rows["fused"] == rows["auto"] == decoding_calls(STEPS, layers)
    assert rows["split"] == decoding_calls(STEPS, layers, attention="split")
    assert len({tuple(runs[m]["tokens"]) for m in runs}) == 1


def test_generate_refuses_an_unknown_decode_attention(engine_build, odd_model):
    p = generate(engine_build, odd_model, "--decode-attention", "flash")
    assert p.returncode == 2 and "--decode-attention flash: expected auto, fused or split" in p.stderr


def test_generate_refuses_fused_attention_for_a_head_too_wide_as_bad_input_and_auto_splits_it(engine_build, tmp_path):
    from gpt2_engine import export as engine_export

    # one head of 160: wider than the 128 a block's lanes hold (attention_row), so the qkv
    # matvec cannot attend for it; the split kernel can
    shape = engine_export.ModelShape(vocab_size=50257, n_positions=128, n_layer=1, n_head=1, n_embd=160)
    wide = engine_export.export(engine_export.build_random_model(shape, seed=0), tmp_path / "wide",
                                source="random:wide-head:seed=0")
    p = generate(engine_build, wide, "--decode-attention", "fused", "--new", "4", "-n", "1", "-w", "0")
    assert p.returncode == 2, p.stderr[-2000:]
    assert "cannot run it in the qkv matvec" in p.stderr and "use auto or split" in p.stderr
    out = tmp_path / "auto.json"
    p = generate(engine_build, wide, "--ref", str(wide.reference), "--new", "4", "-n", "1", "-w", "0", "--json", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(out.read_text())["run"]["decode_attention"] == "split"


def test_generate_kernel_timing_writes_per_kernel_rows_of_the_decoding_steps_only(engine_build, odd_model, tmp_path):
    from sweep.profile import events

    out = tmp_path / "events.json"
    p = generate(engine_build, odd_model, "--ref", str(odd_model.reference), "-n", "3", "-w", "1", "--new", str(STEPS),
                 "--kernel-timing", "--json", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout == ""   # the JSON went to the file
    text = out.read_text()
    doc = json.loads(text)
    assert doc["run"]["kernel_timing"] and doc["run"]["graph"] is True
    rows = events.parse_json(text)
    assert calls_by_kernel(rows) == decoding_calls(STEPS, doc["model"]["num_layers"])
    assert all(len(m.iter_total_ns) == 3 and m.min_ns >= 0 for m in rows)
    assert all(m.median_ns > 0 for m in rows if m.kernel == "matvec_splitk_kernel")
    assert events.forward_ms(text)["median_ms"] > 0


def test_generate_kernel_timing_with_prefill_counts_the_prefill_inside_the_iteration(engine_build, odd_model, tmp_path):
    from sweep.profile import events

    out = tmp_path / "events.json"
    p = generate(engine_build, odd_model, "-n", "2", "-w", "1", "--new", str(STEPS), "--prefill", "--kernel-timing",
                 "--json", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["run"]["new_tokens"] == STEPS + 1 and doc["prefill_ms"]["median_ms"] > 0
    calls = calls_by_kernel(events.parse_json(out.read_text()))
    expected = decoding_calls(STEPS, doc["model"]["num_layers"], prefill=True)
    assert {k: calls.get(k) for k in expected} == expected


@pytest.mark.parametrize("index", [0, 40])
def test_generate_with_a_wrong_reference_token_exits_1_before_timing(engine_build, odd_model, tmp_path, index):
    ref = tmp_path / "wrong.bin"
    right, wrong = reference_with_a_wrong_greedy_token(odd_model.reference, ref, index)
    out = tmp_path / "events.json"
    p = generate(engine_build, odd_model, "--ref", str(ref), "-n", "2", "-w", "1", "--new", str(STEPS),
                 "--kernel-timing", "--json", str(out))
    assert p.returncode == 1, p.stderr[-3000:]
    assert f"FAIL: greedy token {index} is {right}, transformers chose {wrong}" in p.stderr
    assert p.stdout == "" and not out.exists()   # nothing timed, nothing written


def test_generate_refuses_a_batch_other_than_1(engine_build, odd_model):
    p = generate(engine_build, odd_model, "-b", "4")
    assert p.returncode == 2 and "batch must be 1" in p.stderr


NSYS = os.environ.get("NSYS") or shutil.which("nsys")


@pytest.mark.skipif(not NSYS, reason="nsys not on PATH")
def test_nsys_attributes_the_replayed_graphs_kernels_to_generates_iterations(engine_build, odd_model, tmp_path):
    from sweep.profile import nsys

    program = [str(engine_build / "gpt2_generate"), "--weights", str(odd_model.weights), "-n", "3", "-w", "1",
               "--new", str(STEPS)]
    base = tmp_path / "rep"
    p = subprocess.run(nsys.profile_command(program, base, NSYS), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    db = tmp_path / "rep.sqlite"
    subprocess.run(nsys.export_command(nsys.report_path(base), db, NSYS), check=True, capture_output=True, timeout=600)
    rows = nsys.parse_sqlite(db)
    # Only the steps' kernels: the prefill before each iteration's range is left out.
    assert calls_by_kernel(rows) == decoding_calls(STEPS, odd_model.shape.n_layer)
    assert all(len(m.iter_total_ns) == 3 for m in rows)


def test_cupti_attributes_the_replayed_graphs_kernels_to_generates_iterations(engine_build, odd_model, tmp_path):
    from sweep.profile import cupti

    lib = cupti.library(tmp_path / "cache")
    capture = tmp_path / "capture.txt"
    p = subprocess.run([str(engine_build / "gpt2_generate"), "--weights", str(odd_model.weights), "-n", "3", "-w", "1",
                        "--new", str(STEPS)], env={**os.environ, **cupti.environment(lib, capture)},
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    got = cupti.parse(capture)
    assert got.complete and got.iterations == 3
    assert calls_by_kernel(got.measurements) == decoding_calls(STEPS, odd_model.shape.n_layer)
