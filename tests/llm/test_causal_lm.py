"""What synthesis reads of a causal language model (llm_contracts/causal_lm.py): the KV cache, the
longest sequence and the heads from config.json as vLLM reads them, the weights from safetensors
headers, the architecture against vLLM's registry, and the cheapest instance type that holds it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from llm_contracts import causal_lm
from llm_contracts.causal_lm import ModelFacts, PayloadError
from tests.infra.helpers import GPTJ_CONFIG, gptj_tensors, header_only_safetensors, llama_tensors

#: Public configs (their config.json on the hub, the keys the checks read).
LLAMA_31_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
               "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
               "num_key_value_heads": 8, "max_position_embeddings": 131072, "vocab_size": 128256,
               "rope_scaling": {"factor": 8.0, "rope_type": "llama3", "original_max_position_embeddings": 8192},
               "torch_dtype": "bfloat16"}  # fmt: skip
QWEN25_7B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
             "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
             "num_key_value_heads": 4, "max_position_embeddings": 32768, "vocab_size": 152064,
             "torch_dtype": "bfloat16"}  # fmt: skip
MISTRAL_7B_V01 = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
                  "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                  "max_position_embeddings": 32768, "sliding_window": 4096, "torch_dtype": "bfloat16"}  # fmt: skip
DEEPSEEK_V2_LITE = {"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "hidden_size": 2048,
                    "num_hidden_layers": 27, "num_attention_heads": 16, "num_key_value_heads": 16,
                    "kv_lora_rank": 512, "qk_rope_head_dim": 64, "max_position_embeddings": 163840,
                    "rope_scaling": {"type": "yarn", "factor": 40}, "torch_dtype": "bfloat16"}  # fmt: skip
FALCON_7B = {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 4544,
             "num_hidden_layers": 32, "num_attention_heads": 71, "multi_query": True,
             "new_decoder_architecture": False, "torch_dtype": "bfloat16"}  # fmt: skip


def facts(config: dict[str, Any], **kwargs: Any) -> ModelFacts:
    return ModelFacts.from_config(config, **kwargs)


@pytest.mark.parametrize(
    ("config", "per_token", "max_len"),
    [
        # 2 x 32 layers x 8 KV heads x 128 x 2 bytes; llama3's RoPE has scaled the config already.
        (LLAMA_31_8B, 131_072, 131_072),
        (QWEN25_7B, 2 * 28 * 4 * 128 * 2, 32_768),
        # Sliding windows are counted whole (an upper bound).
        (MISTRAL_7B_V01, 2 * 32 * 8 * 128 * 2, 32_768),
        # One latent of 512 + 64 a layer; yarn has scaled the config already.
        (DEEPSEEK_V2_LITE, 27 * 576 * 2, 163_840),
        # Multi-query: one KV head of 4544 / 71 = 64; no length key: vLLM's 2048.
        (FALCON_7B, 2 * 32 * 1 * 64 * 2, 2048),
        # GPT-J's older keys: n_layer, n_head, n_embd, n_positions.
        (GPTJ_CONFIG, 2 * 28 * 16 * 256 * 2, 2048),
    ],
    ids=["llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.1", "deepseek-v2-lite", "falcon-7b", "gpt-j-6b"],
)
def test_kv_cache_a_token_and_the_longest_sequence(config: dict[str, Any], per_token: int, max_len: int) -> None:
    model = facts(config)
    assert model.kv_bytes_per_token(2) == per_token
    assert model.max_model_len == max_len


def test_the_kv_cache_splits_over_tensor_parallelism_down_to_one_head_a_gpu() -> None:
    model = facts(QWEN25_7B)  # 4 KV heads
    assert model.kv_bytes_per_token(2, 2) == model.kv_bytes_per_token(2) // 2
    assert model.kv_bytes_per_token(2, 4) == model.kv_bytes_per_token(2) // 4
    # A latent is kept whole on every GPU.
    assert facts(DEEPSEEK_V2_LITE).kv_bytes_per_token(2, 8) == facts(DEEPSEEK_V2_LITE).kv_bytes_per_token(2)


def test_layers_without_attention_hold_no_kv_cache() -> None:
    hybrid = {**QWEN25_7B, "layer_types": ["linear_attention"] * 21 + ["full_attention"] * 7}
    assert facts(hybrid).kv_bytes_per_token(2) == 2 * 7 * 4 * 128 * 2


def test_the_longest_sequence_as_vllm_derives_it() -> None:
    linear = {**QWEN25_7B, "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4.0}}
    assert facts(linear).max_model_len == 16_384
    model = facts(QWEN25_7B, tokenizer_config={"model_max_length": 8192})
    assert (model.max_model_len, model.max_len_key) == (8192, "model_max_length in tokenizer_config.json")


@pytest.mark.parametrize(
    ("degree", "problem"),
    [
        (1, None),
        (2, None),
        (4, None),
        (7, "its 4 key-value heads neither divide over 7 GPUs nor does 7 divide into them"),
        (8, "its 28 attention heads do not divide over 8 GPUs"),
    ],
)
def test_tensor_parallelism_must_divide_the_heads(degree: int, problem: str | None) -> None:
    assert facts(QWEN25_7B).parallel_problem(degree) == problem


def test_a_degree_that_neither_divides_nor_is_a_multiple_of_the_kv_heads_is_refused() -> None:
    odd = {**QWEN25_7B, "num_attention_heads": 24, "num_key_value_heads": 6}
    assert (
        facts(odd).parallel_problem(4) == "its 6 key-value heads neither divide over 4 GPUs nor does 4 divide into them"
    )
    assert facts({**odd, "num_key_value_heads": 2}).parallel_problem(4) is None  # vLLM copies each KV head twice
    assert facts(QWEN25_7B).parallel_degrees(8) == [4, 2, 1]


def test_weights_are_counted_from_the_safetensors_headers(tmp_path: Path) -> None:
    header_only_safetensors(tmp_path / "a.safetensors", gptj_tensors(GPTJ_CONFIG))
    elements = causal_lm.weight_elements([tmp_path / "a.safetensors"])
    assert elements == {"F16": 6_050_882_784}
    model = facts(GPTJ_CONFIG, weights=elements)
    assert model.weight_bytes(2) == 2 * 6_050_882_784 and model.weight_bytes(4) == 4 * 6_050_882_784


def test_quantized_weights_keep_their_own_size(tmp_path: Path) -> None:
    """An AWQ checkpoint's packed int32 weights stay as they are; its float scales take the dtype."""
    tensors = {"q.qweight": ("I32", [4096, 512]), "q.scales": ("F16", [32, 4096]), "norm": ("F32", [4096])}
    header_only_safetensors(tmp_path / "q.safetensors", tensors)
    model = facts(QWEN25_7B, weights=causal_lm.weight_elements([tmp_path / "q.safetensors"]))
    assert model.weight_bytes(2) == 4096 * 512 * 4 + 32 * 4096 * 2 + 4096 * 2


def test_a_truncated_or_foreign_file_is_no_payload(tmp_path: Path) -> None:
    (tmp_path / "bad.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(PayloadError, match=r"not a safetensors file|not a readable safetensors file"):
        causal_lm.weight_elements([tmp_path / "bad.safetensors"])
    with pytest.raises(PayloadError, match="no layer or attention-head count"):
        facts({"architectures": ["LlamaForCausalLM"]})


@pytest.mark.parametrize(
    ("architecture", "problem"),
    [
        ("LlamaForCausalLM", None),
        ("GPTJForCausalLM", None),
        ("Olmo2ForCausalLM", None),  # through vLLM's Transformers backend
        ("MPTForCausalLM", "vLLM served MPTForCausalLM until 0.28.0 and 0.30.0 no longer does"),
        ("Qwen2VLForConditionalGeneration", "Qwen2VLForConditionalGeneration is a multimodal model"),
        ("BartForConditionalGeneration", "only through a plugin"),
        ("T5ForConditionalGeneration", "is not among vLLM 0.30.0's text-generation architectures"),
    ],
)
def test_the_architecture_against_vllms_registry(architecture: str, problem: str | None) -> None:
    found = causal_lm.architecture_problem(architecture)
    assert found is None if problem is None else problem in str(found), found


def test_a_quantization_the_gpu_lacks_is_refused() -> None:
    assert causal_lm.quantization_problem("awq", (7, 5), "ml.g4dn.xlarge") is None
    assert causal_lm.quantization_problem("mxfp4", (7, 5), "ml.g4dn.xlarge") == (
        "its mxfp4 quantization needs a GPU of compute capability 8.0 or later, and ml.g4dn.xlarge has 7.5"
    )
    assert "is not one vLLM 0.30.0 loads" in str(causal_lm.quantization_problem("bitsandbytes", (9, 0), "x"))


def test_auto_dtype_is_what_vllm_picks() -> None:
    assert causal_lm.resolved_dtype("auto", "bfloat16", (8, 6)) == "bfloat16"
    assert causal_lm.resolved_dtype("auto", "bfloat16", (7, 5)) == "float16"  # a T4 falls back
    assert causal_lm.resolved_dtype("auto", "float32", (8, 0)) == "bfloat16"
    assert causal_lm.resolved_dtype("auto", None, (7, 5)) == "float16"
    assert causal_lm.resolved_dtype("float32", "bfloat16", (9, 0)) == "float32"


def test_the_cheapest_type_that_holds_a_model() -> None:
    gptj = facts(GPTJ_CONFIG, weights={"F16": 6_050_882_784})
    found = causal_lm.smallest_fit(gptj, dtype_setting="float16", utilization=0.9, tokens=2048 * 8)
    assert found is not None and found[0] == "ml.g6.xlarge"  # an L4 at $1.13, below the A10G's $1.41
    # Llama 3.1 70B in bfloat16 (141 GB of weights): four GPUs of 48 GB hold it and 64k tokens.
    llama70_config = {**LLAMA_31_8B, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
                      "num_attention_heads": 64}  # fmt: skip
    weights = sum(math.prod(shape) for _, shape in llama_tensors(llama70_config).values())
    llama70 = facts(llama70_config, weights={"BF16": weights})
    name, plan = causal_lm.smallest_fit(llama70, dtype_setting="auto", utilization=0.9, tokens=8192 * 8) or ("", None)
    assert name == "ml.g6e.12xlarge" and plan is not None and plan.degree == 4
    huge = facts(GPTJ_CONFIG, weights={"F16": 10**13})
    assert causal_lm.smallest_fit(huge, dtype_setting="float16", utilization=0.9, tokens=16) is None
