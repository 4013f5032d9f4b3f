"""``tokenizer.json`` in the format that every tokenizers release reads.

tokenizers 0.20 and later write a BPE model's merges as pairs (``[["a", "b"], ...]``);
releases before 0.20 read only the older form, one string per merge (``["a b", ...]``), and
refuse the pairs ("data did not match any variant of untagged enum ModelWrapper"). The LMI
neuronx image that Inf2Stack deploys ships tokenizers 0.19.1 (transformers 4.43.1), so a
bundle written with this project's tokenizers would fail the warm-up call at
``AutoTokenizer.from_pretrained``. Every tokenizers release still reads the string form,
so the bundle carries that. A merge whose tokens hold a space has no string form (the
space is the separator) and is refused. Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The reader the bundle must satisfy (serving/inf2/requirements-lmi310.txt).
OLDEST_READER = "tokenizers 0.19.1 (the LMI neuronx 0.29.0 image)"


class TokenizerFormatError(ValueError):
    """A tokenizer.json that the image's tokenizers cannot be given."""


def _merge_string(merge: Any, index: int, path: Path) -> str:
    if isinstance(merge, str):
        if merge.count(" ") != 1:
            raise TokenizerFormatError(
                f"{path}: model.merges[{index}]={merge!r} is invalid: allowed is two tokens separated by one space"
            )
        return merge
    if not (isinstance(merge, list) and len(merge) == 2 and all(isinstance(t, str) and t for t in merge)):
        raise TokenizerFormatError(
            f"{path}: model.merges[{index}]={merge!r} is invalid: allowed is a pair of non-empty token strings"
        )
    if any(" " in token for token in merge):
        raise TokenizerFormatError(
            f"{path}: model.merges[{index}]={merge!r} has a token containing a space, which {OLDEST_READER} "
            "cannot read (its merges are 'left right' strings); use a tokenizer whose pre-tokenizer maps spaces "
            "to another symbol (byte-level BPE writes 'Ġ'), or an image with tokenizers 0.20 or later"
        )
    return f"{merge[0]} {merge[1]}"


def legacy_tokenizer_json(data: dict[str, Any], *, path: Path) -> dict[str, Any]:
    """`data` (a parsed tokenizer.json) with a BPE model's merges as ``"left right"``
    strings; other models (WordPiece, Unigram, WordLevel) have no merges and pass as they are."""
    model = data.get("model")
    if not isinstance(model, dict) or model.get("type") != "BPE":
        return data
    merges = model.get("merges", [])
    if not isinstance(merges, list):
        raise TokenizerFormatError(f"{path}: model.merges is {type(merges).__name__}: allowed is a list")
    legacy = [_merge_string(merge, i, path) for i, merge in enumerate(merges)]
    return {**data, "model": {**model, "merges": legacy}}


def rewrite_for_old_readers(folder: Path) -> bool:
    """Rewrite ``folder/tokenizer.json`` (if any) in place; True when it changed."""
    path = folder / "tokenizer.json"
    if not path.is_file():
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise TokenizerFormatError(f"{path} is not JSON ({exc}): give the folder a tokenizer.json that loads") from None
    if not isinstance(data, dict):
        raise TokenizerFormatError(f"{path} holds a {type(data).__name__}: allowed is a tokenizer.json object")
    legacy = legacy_tokenizer_json(data, path=path)
    if legacy == data:
        return False
    # tokenizers' own layout: indented, non-ASCII tokens as they are.
    path.write_text(json.dumps(legacy, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return True
