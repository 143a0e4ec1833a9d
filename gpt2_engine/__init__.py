"""The GPT-2 CUDA engine as a sweep target (`target: engine` in a space file).

The framework knows targets, not GPT-2: this plugin gives it the engine's
target (its sources in kernels/, the programs that verify and time it) and a
prepare step, run once per model while the builds run, that exports the weights
and the reference outputs the engine's programs read ({weights}, {reference}).

    target(model)   the Target for a space's `model:` section (preset, seed, model_dir)

Verification is one run (`verify: profile`): the timing program, gpt2_forward,
gets `--ref {reference}` and first checks the logits on every matmul x fusion x
attention path against transformers' (what gpt2_verify checks) and the greedy
tokens of the KV-cache decoding path, then times. A wrong configuration exits 1
before any timing: verify_failed.

Programs (Target.program(name); a workload names one, `program: generate`):

    (default)  gpt2_forward: -b {batch} x -t {seq_len} forward passes on seeded tokens.
    generate   gpt2_generate: greedy decoding with the KV cache, batch 1. An
               iteration is {seq_len} decoding steps after the prefill (the
               prefill runs before each iteration, outside it; `--prefill` in
               run.args puts it inside), each step one CUDA graph replay; the
               prompt is --prompt-len (8) seeded tokens, with or without the
               check. `-b {batch}` is passed so that a batch other than 1 is
               refused by the program, naming the rule. `--ref {reference}`
               checks transformers' greedy tokens on the graph path (and on
               direct steps, which --kernel-timing times) before any timing. The
               events backend's `--kernel-timing` times the steps as direct
               launches, since a replayed graph has no host-side launches to put
               events around (kernels/programs/gpt2_generate.cu says more).

The decoding kernels (split-K matvec with the LayerNorm, the KV-cache write and,
in a short context, the attention folded in; attention against the cache in a
long one; the greedy pick in the LM head's blocks: MATVEC_*,
ATTENTION_DECODE_*) run in no forward pass at the reference's shape, so
gpt2_forward --ref decodes the reference's tokens too (kernels/programs/checks.h:
the same prefill, direct decoding steps, the kernels the step's graph replays):
a sweep of the default program still never picks a wrong decoding kernel, and
a separate decoding check would cost a second process, CUDA context and weight
load (about 1 s of the 3.2-3.6 s verify measured on the H100) for milliseconds
of decoding. A space whose workloads run `generate` checks it as well: the first
run of each program's first workload carries its --ref (sweep.node.measure.checking).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from sweep.core import paths
from sweep.core.errors import SweepError
from sweep.space import VERIFY_IN_PROFILE, Program, Target

ENGINE_DIR = paths.KERNELS
MODEL_KEYS = ("preset", "seed", "model_dir")
EVENTS = ("--kernel-timing", "--json", "{events_json}")
CHECK = ("--ref", "{reference}")
GENERATE = Program(
    profile=("{build}/gpt2_generate", "--weights", "{weights}", "-b", "{batch}", "--new", "{seq_len}",
             "-n", "{iterations}", "-w", "{warmup}", "{args}"),
    events=EVENTS,
    check_args=CHECK,
)


@dataclass(frozen=True, slots=True)
class ModelExport:
    """The engine's prepare step: export the model's weights and references once per model,
    under jobs/_models/<key>/, shared by every sweep of the same model."""

    model: Mapping[str, Any] = field(default_factory=dict)

    def folder(self, jobs_root: Path) -> Path:
        m = self.model
        key = "local-" + Path(m["model_dir"]).name if m.get("model_dir") else f"{m['preset']}-seed{m['seed']}"
        return Path(jobs_root) / "_models" / key

    def values(self, jobs_root: Path) -> dict[str, str]:
        out = self.folder(jobs_root)
        return {"weights": str(out / "gpt2.bin"), "reference": str(out / "reference.bin")}

    def describe(self, jobs_root: Path) -> str:
        return f"model: exporting or reusing {self.folder(jobs_root)} while the builds run"

    def prepare(self, jobs_root: Path) -> dict[str, str]:
        from gpt2_engine import export

        m = self.model
        model_dir = Path(m["model_dir"]).expanduser() if m.get("model_dir") else None
        e = export.ensure_export(self.folder(jobs_root), preset=m.get("preset", "124M"), seed=int(m.get("seed", 0)),
                                 model_dir=model_dir)
        return {"weights": str(e.weights), "reference": str(e.reference)}


def target(model: Mapping[str, Any] | None = None) -> Target:
    model = dict(model or {})
    unknown = sorted(set(model) - set(MODEL_KEYS))
    if unknown:
        raise SweepError(f"unknown key(s) {', '.join(map(str, unknown))}; the engine's model takes {', '.join(MODEL_KEYS)}")
    for key, kind in (("preset", str), ("seed", int), ("model_dir", str)):
        v = model.get(key)
        if v is not None and (not isinstance(v, kind) or isinstance(v, bool)):
            raise SweepError(f"{key}: {v!r} must be {'an integer' if kind is int else 'a string'}")
    model.setdefault("preset", "124M")
    model.setdefault("seed", 0)
    if not (ENGINE_DIR / "Makefile").is_file():
        raise SweepError(f"the engine's sources are not at {ENGINE_DIR}: run from a checkout of the repository "
                         "(the engine is not part of an installed package), or use a custom target")
    return Target(
        name="gpt2-engine",
        source_dir=ENGINE_DIR,
        verify=VERIFY_IN_PROFILE,
        profile=("{build}/gpt2_forward", "--weights", "{weights}", "-b", "{batch}", "-t", "{seq_len}",
                 "-n", "{iterations}", "-w", "{warmup}", "{args}"),
        events=EVENTS,
        check_args=CHECK,
        model=model,
        plugin=ModelExport(model),
        programs={"generate": GENERATE},
    )
