"""The memory check of LlmStack (llm_contracts/causal_lm.py) beside what vLLM itself reports, per
architecture: tiny random-weight models of several architectures vLLM 0.30.0 serves, each built by
the payload builder (artifacts_builder/llm.py), then loaded by the CPU build of the image's vLLM
(.venv-vllm, eager, a KV cache of ``VLLM_CPU_KVCACHE_SPACE`` GiB a rank):

* weights: the check's bytes (the safetensors headers, floats at the dtype vLLM runs) beside the
  bytes of the parameters of the module vLLM built (``LLM.apply_model``). The CPU build moves every
  linear layer's weight out of the module's parameters into oneDNN's packed form
  (vllm/model_executor/layers/utils.py ``dispatch_cpu_unquantized_gemm``), so what is left there is
  the embeddings and the norms: the check's bytes of those same tensors are given beside it; the
  buffers (the rotary embeddings' cos/sin cache) the check leaves to its overhead;
* KV cache: the check's bytes a token (config.json) against vLLM's KV cache space over the tokens
  it reports it holds (``cache_config.num_gpu_blocks`` x ``block_size``), per rank;
* the longest sequence: the check's derivation against vLLM's ``max_model_len``.

    .venv/bin/python -m bench.llm_memory [--only llama,qwen2] [--degree 2]

Results in bench/results/llm_memory.json and a Markdown table (docs/BENCHMARKS.md). Each model
takes one vLLM start (about 30-60 s on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from artifacts_builder.llm import build
from artifacts_builder.tiny import train_tokenizer
from llm_contracts.causal_lm import DTYPE_BYTES, ModelFacts, read_safetensors_header, resolved_dtype
from llm_contracts.manifest import PAYLOAD_MANIFEST, read_manifest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
KV_GIB = 1
#: Tiny configs of architectures vLLM serves (heads of 32 or 64: vLLM's CPU attention). Each
#: exercises a way of counting: grouped-query attention, tied embeddings, a sliding window, q/k
#: norms, a fused projection, GPT-J's and GPT-NeoX's and OPT's older keys.
SHAPE = {"hidden_size": 128, "num_attention_heads": 4, "num_hidden_layers": 2, "max_position_embeddings": 512}
MODELS: dict[str, dict[str, Any]] = {
    "llama": {**SHAPE, "intermediate_size": 256, "num_key_value_heads": 2},
    "qwen2": {**SHAPE, "intermediate_size": 256, "num_key_value_heads": 2, "tie_word_embeddings": True},
    "mistral": {**SHAPE, "intermediate_size": 256, "num_key_value_heads": 1, "sliding_window": 128},
    "qwen3": {**SHAPE, "intermediate_size": 256, "num_key_value_heads": 2, "head_dim": 64},
    "phi3": {**SHAPE, "intermediate_size": 256, "num_key_value_heads": 4},
    "gptj": {"n_embd": 128, "n_head": 4, "n_layer": 2, "n_positions": 512, "rotary_dim": 16},
    "gpt_neox": {**SHAPE, "intermediate_size": 256},
    "opt": {"hidden_size": 128, "num_attention_heads": 4, "num_hidden_layers": 2, "ffn_dim": 256,
            "max_position_embeddings": 512, "word_embed_proj_dim": 128},
}  # fmt: skip

#: Run in .venv-vllm: the model as vLLM loads it, and its KV cache.
PROBE = """
import json, sys
from vllm import LLM
payload, degree = sys.argv[1], int(sys.argv[2])
llm = LLM(model=payload, enforce_eager=True, tensor_parallel_size=degree, dtype="auto", max_num_seqs=4)
weights = llm.apply_model(lambda m: sum(t.numel() * t.element_size() for t in m.parameters()))
buffers = llm.apply_model(lambda m: sum(t.numel() * t.element_size() for t in m.buffers()))
config = llm.llm_engine.vllm_config
print("RESULT " + json.dumps({
    "weights_bytes_per_rank": weights,
    "buffer_bytes_per_rank": buffers,
    "kv_tokens": config.cache_config.num_gpu_blocks * config.cache_config.block_size,
    "max_model_len": config.model_config.max_model_len,
    "dtype": str(config.model_config.dtype).removeprefix("torch."),
}))
"""


def make_model(kind: str, folder: Path) -> Path:
    """A tiny random-weight model of `kind` with the offline tokenizer (bfloat16, safetensors)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    tokenizer = train_tokenizer(folder)
    eos = tokenizer.eos_token_id
    config = AutoConfig.for_model(
        kind, vocab_size=len(tokenizer), bos_token_id=eos, eos_token_id=eos, pad_token_id=eos, **MODELS[kind]
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(torch.bfloat16)  # type: ignore[no-untyped-call]
    model.save_pretrained(folder)
    return folder


def measure(kind: str, work: Path, degree: int) -> dict[str, Any]:
    payload = build(model=str(make_model(kind, work / "source")), out=work / "out")
    facts = ModelFacts.from_payload(payload, read_manifest(payload, PAYLOAD_MANIFEST)["files"])
    # apply_model calls the function on the model: the engine in this process (no pickling of it).
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(KV_GIB), "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1",
           "VLLM_ALLOW_INSECURE_SERIALIZATION": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
           "VLLM_CPU_OMP_THREADS_BIND": "|".join(str(r) for r in range(degree)) if degree > 1 else "auto"}  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        [str(VLLM_PYTHON), "-c", PROBE, str(payload), str(degree)],
        capture_output=True, text=True, env=env, cwd=work, timeout=900, check=False,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return {"model": kind, "architecture": facts.architecture, "error": done.stderr[-1500:]}
    vllm = json.loads(lines[-1].removeprefix("RESULT "))
    dtype = resolved_dtype("auto", facts.config_dtype, (0, 0))  # a CPU: no bfloat16 rule applies
    dtype = vllm["dtype"] if vllm["dtype"] in DTYPE_BYTES else dtype
    # The tensors vLLM's CPU build keeps as parameters: all but the linear layers' 2-D weights.
    kept = {name: info for name, info in _tensors(payload).items() if len(info["shape"]) != 2 or "embed" in name
            or name.endswith(("wte.weight", "embed_in.weight", "lm_head.weight", "embed_out.weight"))}  # fmt: skip
    kept_facts = ModelFacts.from_config(
        json.loads((payload / "config.json").read_text()),
        weights={
            d: sum(math.prod(i["shape"]) for i in kept.values() if i["dtype"] == d)
            for d in {i["dtype"] for i in kept.values()}
        },
    )
    return {
        "model": kind,
        "architecture": facts.architecture,
        "degree": degree,
        "dtype": vllm["dtype"],
        "check_weights_bytes_per_rank": facts.weight_bytes(DTYPE_BYTES[dtype]) / degree,
        "check_kept_bytes_per_rank": kept_facts.weight_bytes(DTYPE_BYTES[dtype]) / degree,
        "vllm_weights_bytes_per_rank": vllm["weights_bytes_per_rank"],
        "vllm_buffer_bytes_per_rank": vllm["buffer_bytes_per_rank"],
        "check_kv_bytes_per_token": facts.kv_bytes_per_token(DTYPE_BYTES[dtype], degree),
        "vllm_kv_bytes_per_token": KV_GIB * 2**30 / vllm["kv_tokens"],
        "check_max_model_len": facts.max_model_len,
        "vllm_max_model_len": vllm["max_model_len"],
        "start_s": round(time.monotonic() - started, 1),
    }


def _tensors(payload: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for shard in sorted(payload.glob("*.safetensors")):
        found |= read_safetensors_header(shard)
    return found


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model (architecture) | ranks | weights a rank, the check (bytes) | of them kept as parameters on the CPU: "
        "check / vLLM (bytes) | KV a token a rank: check / vLLM (bytes) | longest sequence: check / vLLM |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} ({r['architecture']}) | | failed to start | | | |")
            continue
        vllm_kept = ", ".join(f"{int(w):,}" for w in r["vllm_weights_bytes_per_rank"])
        lines.append(
            f"| {r['model']} ({r['architecture']}) | {r['degree']} | {int(r['check_weights_bytes_per_rank']):,} "
            f"| {int(r['check_kept_bytes_per_rank']):,} / {vllm_kept} "
            f"| {r['check_kv_bytes_per_token']:,} / {r['vllm_kv_bytes_per_token']:,.0f} "
            f"| {r['check_max_model_len']:,} / {r['vllm_max_model_len']:,} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.llm_memory", description=__doc__)
    parser.add_argument("--only", help="comma-separated models of " + ", ".join(MODELS))
    parser.add_argument("--degree", type=int, default=1, help="tensor-parallel ranks (default: 1)")
    args = parser.parse_args(argv)
    kinds = args.only.split(",") if args.only else list(MODELS)
    rows = []
    for kind in kinds:
        with tempfile.TemporaryDirectory() as work:
            rows.append(measure(kind, Path(work), args.degree))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "llm_memory.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
