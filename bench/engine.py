"""The engine against its references, side by side from one run on one GPU.

    python bench/engine.py [--build-dir build/bench] [--out bench-engine.json]

Same weights everywhere (a seeded random GPT-2 124M, exported once):
  - forward B=4,T=1024 and B=1,T=64: the engine (its own SIMT matmul, its 3xTF32
    tensor-core matmul at FP32 accuracy, and cuBLAS) against
    transformers GPT2LMHeadModel, eager and sdpa, float32 with TF32 off;
  - greedy decoding, batch 1, 64 new tokens: engine tokens/s (KV cache, CUDA
    graph) against transformers generate (sdpa and eager), and against the floor
    of reading every weight once per token at the copy bandwidth measured here;
  - every memory-bound kernel's best GB/s as a share of the device-to-device
    copy bandwidth measured by kernel_bench in this run;
  - the engine's matmuls against cuBLAS SGEMM on GPT-2's shapes.
Targets (issue 16's, after the first issue's 1.0x, 1,500 tokens/s and 70%): forward B=4
T=1024 <= 0.85x sdpa, decode >= 3,000 tokens/s, memory-bound kernels >= 80% of copy
bandwidth, own matmul >= 0.95 of cuBLAS on every GPT-2 shape.
Needs a GPU, nvcc and torch with CUDA; prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MATMULS = ("own", "tf32x3", "cublas")   # gpt2_forward --matmul: own SIMT kernel, own tensor-core kernel, reference
sys.path.insert(0, str(ROOT))

from gpt2_engine import export as engine_export  # noqa: E402


def run_json(cmd: list[str]) -> dict:
    """Runs an engine program and returns the JSON object on its last line(s) of stdout."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    out = p.stdout
    start = out.rfind("\n{") + 1 if not out.startswith("{") else 0
    return json.loads(out[start:])


def torch_forward_ms(model, B: int, T: int, iters: int = 20) -> float:
    import torch

    ids = torch.randint(0, model.config.vocab_size, (B, T), device="cuda")
    with torch.no_grad():
        for _ in range(3):
            model(ids)
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            model(ids)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
    return statistics.median(times)


def torch_generate_tps(model, prompt: list[int], new_tokens: int, repeats: int = 3) -> float:
    import torch
    from transformers import GenerationConfig

    ids = torch.tensor([prompt], device="cuda")
    cfg = GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, eos_token_id=None,
                           pad_token_id=0, use_cache=True)
    rates = []
    with torch.no_grad():
        model.generate(ids, generation_config=cfg, attention_mask=torch.ones_like(ids))  # warm-up
        for _ in range(repeats):
            torch.cuda.synchronize()
            t = time.perf_counter()
            model.generate(ids, generation_config=cfg, attention_mask=torch.ones_like(ids))
            torch.cuda.synchronize()
            rates.append(new_tokens / (time.perf_counter() - t))
    return statistics.median(rates)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", type=Path, default=ROOT / "build" / "bench")
    ap.add_argument("--weights-dir", type=Path, default=ROOT / "build" / "bench-model")
    ap.add_argument("--conf-dir", type=Path, help="a folder with conf.cuh (e.g. results/<sweep>/best); default launch sizes otherwise")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "bench-engine.json")
    a = ap.parse_args()

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    make = ["make", "-C", str(ROOT / "kernels"), f"-j{max(2, (len(__import__('os').sched_getaffinity(0))))}",
            f"BUILD_DIR={a.build_dir.resolve()}", f"ARCH={a.arch}", "CUBLAS=1", "all", "bench"]
    if a.conf_dir:
        make.append(f"CONF_DIR={a.conf_dir.resolve()}")
    subprocess.run(make, check=True, stdout=subprocess.DEVNULL)

    model = engine_export.build_random_model(engine_export.ModelShape(**engine_export.PRESETS["124M"]), seed=0)
    exp = engine_export.export(model, a.weights_dir, source="random:124M:seed=0")
    bin_ = a.build_dir

    rows: list[tuple[str, str, str, str]] = []  # (what, engine, reference, ratio)
    result: dict = {"device": torch.cuda.get_device_name(), "forward": {}, "decode": {}}

    # Forward.
    for B, T in ((4, 1024), (1, 64)):
        eng = {}
        for mm in MATMULS:
            r = run_json([str(bin_ / "gpt2_forward"), "--weights", str(exp.weights), "-b", str(B), "-t", str(T),
                          "-n", "20", "-w", "3", "--matmul", mm])
            eng[mm] = r["forward_ms"]["median_ms"]
        ref = {}
        for impl in ("eager", "sdpa"):
            m = engine_export.build_random_model(engine_export.ModelShape(**engine_export.PRESETS["124M"]), seed=0)
            m.set_attn_implementation(impl)
            ref[impl] = torch_forward_ms(m.cuda().float().eval(), B, T)
            del m
            torch.cuda.empty_cache()
        result["forward"][f"B{B}_T{T}"] = {"engine_ms": eng, "transformers_ms": ref}
        for mm in MATMULS:
            rows.append((f"forward B={B} T={T} ({mm} matmul)", f"{eng[mm]:.3f} ms", f"sdpa {ref['sdpa']:.3f} / eager {ref['eager']:.3f} ms",
                         f"{eng[mm] / ref['sdpa']:.3f}x sdpa"))

    # Decoding.
    # The prefill and 63 steps: 64 new tokens an iteration, timed as transformers' generate is.
    g = run_json([str(bin_ / "gpt2_generate"), "--weights", str(exp.weights), "--ref", str(exp.reference), "--prefill",
                  "--new", "63", "-n", "5", "-w", "1"])
    prompt_len, new_tokens = g["run"]["prompt_len"], g["run"]["new_tokens"]
    hf = {}
    for impl in ("sdpa", "eager"):
        m = engine_export.build_random_model(engine_export.ModelShape(**engine_export.PRESETS["124M"]), seed=0)
        m.set_attn_implementation(impl)
        hf[impl] = torch_generate_tps(m.cuda().float().eval(), list(range(1, prompt_len + 1)), new_tokens)
        del m
    result["decode"] = {"engine": g, "transformers_tokens_per_s": hf}
    rows.append((f"decode B=1, {new_tokens} new tokens", f"{g['tokens_per_s']:.0f} tok/s (decode only {g['decode_tokens_per_s']:.0f})",
                 f"sdpa {hf['sdpa']:.0f} / eager {hf['eager']:.0f} tok/s", f"{g['tokens_per_s'] / hf['sdpa']:.1f}x sdpa"))

    # Kernels against the copy ceiling and cuBLAS.
    kb = run_json([str(bin_ / "kernel_bench"), "--reps", "20"])
    result["kernels"] = kb
    copy = next(r["gbs"] for r in kb["results"] if r["kind"] == "copy")
    # A decoding step reads every weight once (the LM head is the tied embedding): at the copy
    # bandwidth just measured, no batch-1 decoder can beat this many tokens per second.
    weight_bytes = 4 * sum(p.numel() for p in model.parameters())
    floor = copy * 1e9 / weight_bytes
    result["decode"]["floor_tokens_per_s"] = floor
    rows.append(("decode floor: every weight once per token", f"{floor:.0f} tok/s",
                 f"{weight_bytes / 1e6:.0f} MB at copy {copy:.0f} GB/s",
                 f"engine decode at {100 * g['decode_tokens_per_s'] / floor:.0f}% of it"))
    for r in kb["results"]:
        if r["kind"] == "bandwidth":
            rows.append((f"{r['kernel']} (block {r.get('best_block', r.get('block'))})", f"{r['gbs']:.0f} GB/s",
                         f"copy {copy:.0f} GB/s", f"{100 * r['fraction_of_copy']:.1f}% of copy"))
        elif r["kind"] == "matmul" and r["impl"] in ("own", "tf32x3"):
            rows.append((f"matmul {r['impl']} {r['M']}x{r['N']}x{r['K']}", f"{r['tflops']:.1f} TFLOP/s",
                         f"cuBLAS {r['cublas_tflops']:.1f} TFLOP/s", f"{r['tflops'] / r['cublas_tflops']:.2f} of cuBLAS" if r["cublas_tflops"] else "-"))
        elif r["kind"] == "attention":
            rows.append(("attention B=4 T=1024 (flash vs reference)", f"{r['flash_ms']:.3f} ms ({r['flash_tflops']:.1f} TFLOP/s)",
                         f"reference {r['reference_ms']:.3f} ms", f"{r['reference_ms'] / r['flash_ms']:.1f}x faster"))

    w = [max(len(r[i]) for r in rows) for i in range(4)]
    print(f"\nengine vs references on {result['device']} (one run, same weights)")
    for r in rows:
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2))
    print(f"\nfull numbers: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
