"""The weights and reference files, read back by their documented layout (kernels/gpt2.h)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from gpt2_engine import export as ex
from sweep.core.errors import SweepError

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

TINY = ex.ModelShape(vocab_size=211, n_positions=64, n_layer=2, n_head=3, n_embd=24)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    model = ex.build_random_model(TINY, seed=3)
    out = tmp_path_factory.mktemp("export")
    e = ex.export(model, out, ref_batch=2, ref_seq_len=13, prompt_len=5, new_tokens=7, seed=1, source="test")
    return model, e


def read_tensors(path):
    """Parse a weights file with nothing but the documented layout."""
    data = path.read_bytes()
    assert data[:8] == b"GPT2CUDA"
    version, header, dtype, V, T, L, NH, C = struct.unpack_from("<8I", data, 8)
    (eps,) = struct.unpack_from("<f", data, 40)
    ntensors, nparams = struct.unpack_from("<IQ", data, 44)
    assert (version, header, dtype, ntensors) == (1, 256, 1, 16)
    shapes = [(V, C), (T, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C), (L, C), (L, C),
              (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]
    names = "wte wpe ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b fcw fcb fcprojw fcprojb lnfw lnfb".split()
    flat = np.frombuffer(data, dtype="<f4", offset=256)
    assert flat.size == nparams == sum(int(np.prod(s)) for s in shapes)
    out, off = {}, 0
    for name, shape in zip(names, shapes):
        n = int(np.prod(shape))
        out[name] = flat[off:off + n].reshape(shape).astype(np.float64)
        off += n
    return (V, T, L, NH, C, eps), out


def numpy_forward(w, cfg, tokens):
    V, T, L, NH, C, eps = cfg
    HS = C // NH

    def ln(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + eps) * g + b

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))

    B, t = tokens.shape
    x = w["wte"][tokens] + w["wpe"][:t]
    mask = np.triu(np.ones((t, t), bool), 1)
    for l in range(L):
        h = ln(x, w["ln1w"][l], w["ln1b"][l])
        qkv = h @ w["qkvw"][l].T + w["qkvb"][l]  # weights are (out, in)
        q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, t, NH, HS).transpose(0, 2, 1, 3) for i in range(3))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(HS)
        s[..., mask] = -np.inf
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        y = (p @ v).transpose(0, 2, 1, 3).reshape(B, t, C)
        x = x + y @ w["attprojw"][l].T + w["attprojb"][l]
        h = ln(x, w["ln2w"][l], w["ln2b"][l])
        x = x + gelu(h @ w["fcw"][l].T + w["fcb"][l]) @ w["fcprojw"][l].T + w["fcprojb"][l]
    return ln(x, w["lnfw"], w["lnfb"]) @ w["wte"].T


def read_reference(path):
    data = path.read_bytes()
    assert data[:8] == b"GPT2REF\0"
    version, header, B, T, V, P, n_new = struct.unpack_from("<7I", data, 8)
    assert (version, header) == (1, 256)
    off = 256
    tokens = np.frombuffer(data, "<i4", B * T, off).reshape(B, T)
    off += 4 * B * T
    logits = np.frombuffer(data, "<f4", B * T * V, off).reshape(B, T, V)
    off += 4 * B * T * V
    prompt = np.frombuffer(data, "<i4", P, off)
    greedy = np.frombuffer(data, "<i4", n_new, off + 4 * P)
    assert off + 4 * P + 4 * n_new == len(data)
    return tokens, logits, prompt, greedy


def test_numpy_forward_from_the_weights_file_reproduces_transformers_logits(exported):
    _, e = exported
    cfg, w = read_tensors(e.weights)
    tokens, logits, _, _ = read_reference(e.reference)
    assert cfg[:5] == (TINY.vocab_size, TINY.n_positions, TINY.n_layer, TINY.n_head, TINY.n_embd)
    got = numpy_forward(w, cfg, tokens)
    assert np.abs(got - logits).max() < 1e-4


def test_reference_greedy_tokens_continue_the_prompt_by_argmax(exported):
    _, e = exported
    cfg, w = read_tensors(e.weights)
    _, _, prompt, greedy = read_reference(e.reference)
    seq = list(prompt)
    for _ in range(len(greedy)):
        seq.append(int(numpy_forward(w, cfg, np.array([seq]))[0, -1].argmax()))
    assert seq[len(prompt):] == list(greedy)


def test_random_model_redraws_biases_and_layernorm_parameters():
    model = ex.build_random_model(TINY, seed=0)
    sd = model.state_dict()
    assert sd["transformer.h.0.attn.c_attn.bias"].abs().max() > 0
    assert (sd["transformer.ln_f.weight"] - 1).abs().max() > 0
    again = ex.build_random_model(TINY, seed=0).state_dict()
    assert all(torch.equal(sd[k], again[k]) for k in sd)


def test_header_reader_returns_the_exported_shape(exported):
    _, e = exported
    assert ex.read_weights_header(e.weights) == TINY
    meta = json.loads(e.manifest.read_text())
    assert meta["shape"]["n_embd"] == 24 and meta["format_version"] == ex.FORMAT_VERSION


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda b: b[:1000], "truncated"),
        (lambda b: b[:100], "shorter than its 256-byte header"),
        (lambda b: b"NOTGPT2!" + b[8:], "not a GPT-2 weights file"),
        (lambda b: b[:8] + struct.pack("<I", 7) + b[12:], "format version 7"),
        (lambda b: b + b"\0" * 8, "longer than its header says"),
        (lambda b: b[:36] + struct.pack("<I", 25) + b[40:], "impossible shape"),
    ],
    ids=["truncated", "short-header", "magic", "version", "trailing-bytes", "heads-do-not-divide"],
)
def test_damaged_weights_file_is_refused_with_the_reexport_command(exported, tmp_path, damage, message):
    _, e = exported
    bad = tmp_path / "bad.bin"
    bad.write_bytes(damage(e.weights.read_bytes()))
    with pytest.raises(SweepError, match=message) as err:
        ex.read_weights_header(bad)
    assert "python -m gpt2_engine.export" in str(err.value)


def test_missing_weights_file_names_the_path(tmp_path):
    with pytest.raises(SweepError, match="cannot read weights file .*nope.bin"):
        ex.read_weights_header(tmp_path / "nope.bin")


def test_ensure_export_reuses_a_matching_export(tmp_path, monkeypatch):
    monkeypatch.setitem(ex.PRESETS, "tiny", dict(vocab_size=97, n_positions=80, n_layer=1, n_head=2, n_embd=8))
    first = ex.ensure_export(tmp_path, preset="tiny", seed=5)
    stamp = first.weights.stat().st_mtime_ns
    again = ex.ensure_export(tmp_path, preset="tiny", seed=5)
    assert again.weights.stat().st_mtime_ns == stamp
    other = ex.ensure_export(tmp_path, preset="tiny", seed=6)
    assert other.weights.stat().st_mtime_ns != stamp


def test_exporter_cli_reports_a_bad_shape_in_one_line(tmp_path, capsys):
    assert ex.main(["--out", str(tmp_path), "--preset", "odd", "--n-head", "5"]) == 1
    assert "not a multiple of n_head=5" in capsys.readouterr().err


def test_a_local_model_folder_exports_the_same_weights_as_the_model_it_holds(tmp_path):
    model = ex.build_random_model(TINY, seed=9)
    model.save_pretrained(tmp_path / "local")
    assert ex.main(["--out", str(tmp_path / "out"), "--model-dir", str(tmp_path / "local"), "--ref-seq-len", "9",
                    "--prompt-len", "3", "--new-tokens", "4"]) == 0
    _, from_folder = read_tensors(tmp_path / "out" / "gpt2.bin")
    _, direct = read_tensors(ex.export(model, tmp_path / "direct", ref_seq_len=9, prompt_len=3, new_tokens=4).weights)
    assert all(np.array_equal(from_folder[k], direct[k]) for k in direct)
    assert json.loads((tmp_path / "out" / "model.json").read_text())["source"] == str(tmp_path / "local")


def test_a_folder_without_a_saved_model_says_what_to_point_at(tmp_path):
    with pytest.raises(SweepError, match="no config.json: point --model-dir at a saved GPT-2"):
        ex.load_local_model(tmp_path)
