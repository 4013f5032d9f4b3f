"""Tiny, fully offline models for tests and the demo: random weights from a config and a
byte-level BPE tokenizer trained on the fly (the model hub is never contacted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# A small corpus in the domains of the three recipes: search queries, prose, few-shot prompts.
CORPUS = [
    "amazon web services machine learning inference",
    "patent search query autocompletion for semiconductor devices",
    "lithium battery cathode material patent",
    "neural network accelerator chip architecture",
    "Hello, I am a language model,",
    "Welcome to Amazon Elastic Compute Cloud,",
    "key: markets\ntweet: Take feedback from nature and markets, not from people.\n###",
    "key: children\ntweet: Maybe we die so we can come back as children.\n###",
    "key: startups\ntweet: Startups should not worry about how to put out fires, "
    "they should worry about how to start them.\n###",
    "Can you please let us know more details about your",
    "The quick brown fox jumps over the lazy dog. 0123456789 !?.,;:'\"()[]{}",
]


def train_tokenizer(out_dir: Path, *, vocab_size: int = 512, extra_special: tuple[str, ...] = ()) -> Any:
    """Train a byte-level BPE tokenizer on CORPUS and save it as `GPT2TokenizerFast`
    (that class loads under transformers 4.x and 5.x alike; a bare
    `PreTrainedTokenizerFast` does not). Returns the tokenizer."""
    from tokenizers import ByteLevelBPETokenizer, decoders, processors
    from transformers import GPT2TokenizerFast  # type: ignore[attr-defined]

    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(
        CORPUS * 4,
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=["<|endoftext|>", *extra_special],
        show_progress=False,
    )
    bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    bpe.decoder = decoders.ByteLevel()
    out_dir.mkdir(parents=True, exist_ok=True)
    bpe.save(str(out_dir / "tokenizer.json"))
    tokenizer = GPT2TokenizerFast(
        tokenizer_file=str(out_dir / "tokenizer.json"),
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    tokenizer.save_pretrained(out_dir)
    return tokenizer


#: Qwen's chat template (ChatML), shortened: the tiny Qwen has one of its own, as Qwen's have.
CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: Tiny causal language models of the llm stack's tests: heads of 32 (vLLM's CPU attention takes
#: 32, 64, 80, 96, 128, ...), grouped-query attention (2 KV heads for 4), bfloat16, 256 positions.
#: Llama has no chat template; Qwen has ChatML's and ties its embeddings, as Qwen2.5's small ones do.
TINY_CAUSAL_LMS: dict[str, dict[str, Any]] = {
    "llama": {"model_type": "llama", "tie_word_embeddings": False},
    "qwen2": {"model_type": "qwen2", "tie_word_embeddings": True, "chat_template": CHATML_TEMPLATE},
}
_TINY_SHAPE = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 2, "max_position_embeddings": 256}  # fmt: skip


def make_tiny_causal_lm(kind: str, out_dir: Path, *, seed: int = 0) -> Path:
    """A tiny random-weight model of `kind` (:data:`TINY_CAUSAL_LMS`) with the offline tokenizer,
    saved as a hub snapshot would be (safetensors, bfloat16)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = dict(TINY_CAUSAL_LMS[kind])
    template = spec.pop("chat_template", None)
    tokenizer = train_tokenizer(out_dir, extra_special=("<|im_start|>", "<|im_end|>") if template else ())
    if template is not None:
        tokenizer.chat_template = template
        tokenizer.save_pretrained(out_dir)
    eos = tokenizer.eos_token_id
    config = AutoConfig.for_model(
        spec.pop("model_type"), vocab_size=len(tokenizer), bos_token_id=eos, eos_token_id=eos, **_TINY_SHAPE, **spec
    )
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    finally:
        torch.set_default_dtype(previous)
    model.generation_config.pad_token_id = eos
    model.save_pretrained(out_dir)
    return out_dir
