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
