"""Export a transformers GPT-2 to the engine's weights file, with reference outputs.

    python -m gpt2_engine.export --out DIR [--preset 124M | --model-dir FOLDER | --n-embd ...]

writes DIR/gpt2.bin (weights), DIR/reference.bin (logits for a fixed batch of
tokens and greedy tokens for a fixed prompt, from transformers itself: eager
attention, float32, TF32 off) and DIR/model.json (what was exported).

With no model folder (this machine cannot reach a model hub), a seeded random
GPT2LMHeadModel of the requested shape is built. Kernel timings do not depend on
weight values, but verification does: transformers initialises biases to 0 and
LayerNorm weights to 1, which would hide a kernel that drops a bias, so every
bias and LayerNorm parameter is redrawn too (seeded).

The file formats are documented in kernels/gpt2.h; FORMAT_VERSION here and
kFormatVersion there must move together.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from sweep.core import atomic
from sweep.core.errors import SweepError

WEIGHTS_MAGIC = b"GPT2CUDA"
REFERENCE_MAGIC = b"GPT2REF\0"
FORMAT_VERSION = 1
HEADER_BYTES = 256
DTYPE_FLOAT32 = 1
NUM_TENSORS = 16
FIX = "re-export it with `python -m gpt2_engine.export --out DIR`"

PRESETS: dict[str, dict[str, int]] = {
    # GPT-2 small, the default target.
    "124M": dict(vocab_size=50257, n_positions=1024, n_layer=12, n_head=12, n_embd=768),
    # Odd on purpose: head size 32, 3 heads, 2 layers.
    "odd": dict(vocab_size=50257, n_positions=1024, n_layer=2, n_head=3, n_embd=96),
}


@dataclass(frozen=True, slots=True)
class ModelShape:
    vocab_size: int
    n_positions: int
    n_layer: int
    n_head: int
    n_embd: int
    layer_norm_epsilon: float = 1e-5

    def tensor_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """The 16 tensors of the weights file, in file order (see kernels/gpt2.h)."""
        V, T, L, C = self.vocab_size, self.n_positions, self.n_layer, self.n_embd
        return [
            ("wte", (V, C)), ("wpe", (T, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
            ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)), ("attprojb", (L, C)),
            ("ln2w", (L, C)), ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)),
            ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)), ("lnfw", (C,)), ("lnfb", (C,)),
        ]

    def num_params(self) -> int:
        total = 0
        for _, shape in self.tensor_shapes():
            n = 1
            for d in shape:
                n *= d
            total += n
        return total


def shape_of(model) -> ModelShape:
    c = model.config
    return ModelShape(c.vocab_size, c.n_positions, c.n_layer, c.n_head, c.n_embd, float(c.layer_norm_epsilon))


def build_random_model(shape: ModelShape, seed: int = 0):
    """A GPT2LMHeadModel of `shape` with seeded random weights, biases and LayerNorm parameters."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    if shape.n_embd % shape.n_head:
        raise SweepError(f"n_embd={shape.n_embd} is not a multiple of n_head={shape.n_head}; GPT-2 needs whole heads")
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=shape.vocab_size, n_positions=shape.n_positions, n_layer=shape.n_layer,
        n_head=shape.n_head, n_embd=shape.n_embd, layer_norm_epsilon=shape.layer_norm_epsilon,
    )
    model = GPT2LMHeadModel(config)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
            elif ".ln_" in name or "ln_f" in name:
                p.copy_(1.0 + torch.randn(p.shape, generator=gen) * 0.1)
    return model.eval()


def load_local_model(folder: Path):
    """A GPT2LMHeadModel from a local folder (config.json + weights); never downloads."""
    from transformers import GPT2LMHeadModel

    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise SweepError(f"{folder} has no config.json: point --model-dir at a saved GPT-2 (save_pretrained) folder")
    return GPT2LMHeadModel.from_pretrained(folder, local_files_only=True).eval()


def _eager_fp32(model):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model.set_attn_implementation("eager")
    return model.float().eval()


def weights_bytes(model) -> bytes:
    """The engine's weights file for `model`: header, then the 16 tensors in file order."""
    import torch

    shape = shape_of(model)
    sd = model.state_dict()
    h = "transformer.h"
    L = shape.n_layer

    def stack(key: str, transpose: bool = False) -> torch.Tensor:
        ts = [sd[f"{h}.{i}.{key}"] for i in range(L)]
        return torch.stack([t.t() if transpose else t for t in ts])

    tensors = {
        "wte": sd["transformer.wte.weight"], "wpe": sd["transformer.wpe.weight"],
        "ln1w": stack("ln_1.weight"), "ln1b": stack("ln_1.bias"),
        # transformers' Conv1D stores (in, out); the engine wants (out, in).
        "qkvw": stack("attn.c_attn.weight", True), "qkvb": stack("attn.c_attn.bias"),
        "attprojw": stack("attn.c_proj.weight", True), "attprojb": stack("attn.c_proj.bias"),
        "ln2w": stack("ln_2.weight"), "ln2b": stack("ln_2.bias"),
        "fcw": stack("mlp.c_fc.weight", True), "fcb": stack("mlp.c_fc.bias"),
        "fcprojw": stack("mlp.c_proj.weight", True), "fcprojb": stack("mlp.c_proj.bias"),
        "lnfw": sd["transformer.ln_f.weight"], "lnfb": sd["transformer.ln_f.bias"],
    }
    parts = [_header(shape)]
    for name, want in shape.tensor_shapes():
        t = tensors[name].detach().to(torch.float32).contiguous()
        if tuple(t.shape) != want:
            raise SweepError(f"tensor {name} has shape {tuple(t.shape)}, expected {want}: is this a GPT-2 model?")
        parts.append(t.numpy().tobytes())
    return b"".join(parts)


def _header(shape: ModelShape) -> bytes:
    head = WEIGHTS_MAGIC + struct.pack(
        "<IIIIIIIIfIQ", FORMAT_VERSION, HEADER_BYTES, DTYPE_FLOAT32, shape.vocab_size, shape.n_positions,
        shape.n_layer, shape.n_head, shape.n_embd, shape.layer_norm_epsilon, NUM_TENSORS, shape.num_params(),
    )
    return head + b"\0" * (HEADER_BYTES - len(head))


def read_weights_header(path: Path) -> ModelShape:
    """The shape stored in a weights file, after checking magic, version and length."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(HEADER_BYTES)
    except OSError as e:
        raise SweepError(f"cannot read weights file {path}: {e.strerror}; {FIX}") from None
    if len(head) < HEADER_BYTES:
        raise SweepError(f"weights file {path} is truncated: {size} bytes, shorter than its {HEADER_BYTES}-byte header; {FIX}")
    if head[:8] != WEIGHTS_MAGIC:
        raise SweepError(f"{path} is not a GPT-2 weights file (magic {head[:8]!r}, expected {WEIGHTS_MAGIC!r}); {FIX}")
    version, header_bytes, dtype, V, T, L, NH, C, eps, ntensors, nparams = struct.unpack_from("<IIIIIIIIfIQ", head, 8)
    if version != FORMAT_VERSION or header_bytes != HEADER_BYTES:
        raise SweepError(f"weights file {path} has format version {version}; this code reads version {FORMAT_VERSION}; {FIX}")
    if dtype != DTYPE_FLOAT32 or ntensors != NUM_TENSORS:
        raise SweepError(f"weights file {path} has dtype {dtype} and {ntensors} tensors; expected float32 (1) and {NUM_TENSORS}; {FIX}")
    shape = ModelShape(V, T, L, NH, C, float(f"{eps:.7g}"))  # stored as float32
    if min(V, T, L, NH, C) <= 0 or C % NH:
        raise SweepError(f"weights file {path} has an impossible shape {asdict(shape)} (n_embd must be a multiple of n_head); {FIX}")
    if nparams != shape.num_params():
        raise SweepError(f"weights file {path} says {nparams} parameters; its shape needs {shape.num_params()}; {FIX}")
    want = HEADER_BYTES + 4 * nparams
    if size != want:
        state = "truncated" if size < want else "longer than its header says"
        raise SweepError(f"weights file {path} is {state}: {size} bytes, expected {want}; {FIX}")
    return shape


@dataclass(frozen=True, slots=True)
class Reference:
    """What transformers computed, for the engine to match."""

    tokens: list[list[int]]      # B x T input ids for the logits
    logits: bytes                # float32 B*T*V, row-major
    prompt: list[int]            # greedy prompt
    greedy: list[int]            # transformers' greedy continuation


def compute_reference(model, batch: int, seq_len: int, prompt_len: int, new_tokens: int, seed: int) -> Reference:
    import torch
    from transformers import GenerationConfig

    model = _eager_fp32(model)
    V = model.config.vocab_size
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, V, (batch, seq_len), generator=gen)
    prompt = torch.randint(0, V, (1, prompt_len), generator=gen)
    with torch.no_grad():
        logits = model(tokens).logits.to(torch.float32).contiguous()
        cfg = GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                               eos_token_id=None, pad_token_id=0, use_cache=True)
        out = model.generate(prompt, generation_config=cfg, attention_mask=torch.ones_like(prompt))
    greedy = out[0, prompt_len:].tolist()
    if len(greedy) != new_tokens:
        raise SweepError(f"transformers generated {len(greedy)} tokens instead of {new_tokens}")
    return Reference(tokens.tolist(), logits.numpy().tobytes(), prompt[0].tolist(), greedy)


def reference_bytes(ref: Reference, vocab_size: int) -> bytes:
    B, T = len(ref.tokens), len(ref.tokens[0])
    head = REFERENCE_MAGIC + struct.pack("<IIIIIIII", FORMAT_VERSION, HEADER_BYTES, B, T, vocab_size,
                                         len(ref.prompt), len(ref.greedy), 0)
    flat = [t for row in ref.tokens for t in row]
    return b"".join([
        head + b"\0" * (HEADER_BYTES - len(head)),
        struct.pack(f"<{len(flat)}i", *flat),
        ref.logits,
        struct.pack(f"<{len(ref.prompt)}i", *ref.prompt),
        struct.pack(f"<{len(ref.greedy)}i", *ref.greedy),
    ])


@dataclass(frozen=True, slots=True)
class Export:
    weights: Path
    reference: Path
    manifest: Path
    shape: ModelShape


def export(model, out_dir: Path, *, ref_batch: int = 2, ref_seq_len: int = 67, prompt_len: int = 8,
           new_tokens: int = 64, seed: int = 0, source: str = "") -> Export:
    """Write gpt2.bin, reference.bin and model.json into out_dir (each atomically)."""
    out_dir = Path(out_dir)
    shape = shape_of(model)
    if prompt_len + new_tokens > shape.n_positions or ref_seq_len > shape.n_positions:
        raise SweepError(f"the reference needs {max(prompt_len + new_tokens, ref_seq_len)} positions; the model has {shape.n_positions}")
    weights = weights_bytes(model)
    ref = compute_reference(model, ref_batch, ref_seq_len, prompt_len, new_tokens, seed)
    refb = reference_bytes(ref, shape.vocab_size)
    w_path, r_path, m_path = out_dir / "gpt2.bin", out_dir / "reference.bin", out_dir / "model.json"
    atomic.write_bytes(w_path, weights)
    atomic.write_bytes(r_path, refb)
    atomic.write_json(m_path, {
        "format_version": FORMAT_VERSION, "shape": asdict(shape), "source": source, "seed": seed,
        "reference": {"batch": ref_batch, "seq_len": ref_seq_len, "prompt_len": prompt_len, "new_tokens": new_tokens},
        "sha256": {"gpt2.bin": hashlib.sha256(weights).hexdigest(), "reference.bin": hashlib.sha256(refb).hexdigest()},
    })
    return Export(w_path, r_path, m_path, shape)


def ensure_export(out_dir: Path, preset: str = "124M", seed: int = 0, model_dir: Path | None = None) -> Export:
    """Reuse out_dir's export when it matches what is asked for, else write it."""
    out_dir = Path(out_dir)
    manifest = out_dir / "model.json"
    source = str(model_dir) if model_dir else f"random:{preset}:seed={seed}"
    if manifest.is_file() and (out_dir / "gpt2.bin").is_file() and (out_dir / "reference.bin").is_file():
        try:
            meta = json.loads(manifest.read_text())
            if meta.get("source") == source and meta.get("format_version") == FORMAT_VERSION:
                shape = read_weights_header(out_dir / "gpt2.bin")
                return Export(out_dir / "gpt2.bin", out_dir / "reference.bin", manifest, shape)
        except (ValueError, SweepError):
            pass  # stale or damaged: export again
    if model_dir:
        model = load_local_model(model_dir)
    else:
        if preset not in PRESETS:
            raise SweepError(f"unknown model preset {preset!r}; choose one of {', '.join(PRESETS)}")
        model = build_random_model(ModelShape(**PRESETS[preset]), seed)
    return export(model, out_dir, seed=seed, source=source)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpt2_engine.export", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="folder for gpt2.bin, reference.bin, model.json")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model-dir", type=Path, help="a local transformers GPT-2 folder (never downloads)")
    src.add_argument("--preset", choices=sorted(PRESETS), help="a seeded random model of this shape (default 124M)")
    for dim in ("n_embd", "n_head", "n_layer", "vocab_size", "n_positions"):
        p.add_argument(f"--{dim.replace('_', '-')}", type=int, help=f"override {dim} of the preset")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ref-batch", type=int, default=2)
    p.add_argument("--ref-seq-len", type=int, default=67, help="tokens per row for the reference logits (default 67: a multiple of no tile)")
    p.add_argument("--prompt-len", type=int, default=8)
    p.add_argument("--new-tokens", type=int, default=64)
    a = p.parse_args(argv)
    try:
        if a.model_dir:
            model, source = load_local_model(a.model_dir), str(a.model_dir)
        else:
            dims = dict(PRESETS[a.preset or "124M"])
            for dim in dims:
                if getattr(a, dim, None) is not None:
                    dims[dim] = getattr(a, dim)
            model = build_random_model(ModelShape(**dims), a.seed)
            source = f"random:{a.preset or '124M'}:seed={a.seed}" + "".join(
                f":{d}={getattr(a, d)}" for d in dims if getattr(a, d, None) is not None)
        e = export(model, a.out, ref_batch=a.ref_batch, ref_seq_len=a.ref_seq_len, prompt_len=a.prompt_len,
                   new_tokens=a.new_tokens, seed=a.seed, source=source)
    except SweepError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"wrote {e.weights} ({e.shape.num_params():,} parameters), {e.reference}, {e.manifest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
