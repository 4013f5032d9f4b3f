"""model_fn's loader: shards hashed in parallel, then mapped through the handles that were
hashed, the model built straight from the maps; what it refuses and what it must equal."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llm_contracts.gptj import PAYLOAD_MANIFEST
from tests.gptj.helpers import load_inference


@pytest.fixture
def payload(model_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(model_dir, tmp_path / "model"))


def _shards(folder: Path) -> list[str]:
    return list(json.loads((folder / PAYLOAD_MANIFEST).read_text())["weights"])


def test_built_from_the_maps_equals_from_pretrained(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("GPTJ_DTYPE", "float16")
    inference = load_inference(model_dir)
    loaded = inference.model_fn(str(model_dir))["model"]
    reference = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float16).eval()
    ids = torch.tensor([[5, 17, 42, 9, 3, 77]])
    with torch.inference_mode():
        assert torch.equal(loaded(ids).logits, reference(ids).logits)
    assert loaded.generation_config.to_dict() == reference.generation_config.to_dict()
    # Every weight came from the payload: none was left on the meta device or freshly initialised.
    assert not any(t.is_meta for t in [*loaded.parameters(), *loaded.buffers()])
    for name, tensor in reference.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name


def test_every_altered_shard_is_found_and_the_first_is_named(payload: Path) -> None:
    first, second = _shards(payload)[1:3]
    for name in (second, first):
        data = bytearray((payload / name).read_bytes())
        data[len(data) // 2] ^= 0x10
        (payload / name).write_bytes(bytes(data))
    inference = load_inference(payload)
    with pytest.raises(inference.IntegrityError, match=rf"{first} has sha256 [0-9a-f]{{64}}, the manifest says"):
        inference.model_fn(str(payload))


def test_manifest_naming_a_non_weight_file_as_weights_is_refused(payload: Path) -> None:
    manifest = json.loads((payload / PAYLOAD_MANIFEST).read_text())
    manifest["weights"] = ["config.json"]
    (payload / PAYLOAD_MANIFEST).write_text(json.dumps(manifest))
    inference = load_inference(payload)
    with pytest.raises(inference.IntegrityError, match=r"lists no weights of a known format"):
        inference.model_fn(str(payload))


def test_a_payload_missing_a_weight_fails_to_load(payload: Path) -> None:
    """A consistent manifest over incomplete weights (a broken builder): strict loading
    refuses it instead of generating from uninitialised parameters."""
    from safetensors.torch import load_file, save_file

    from llm_contracts.manifest import file_entry

    shard = _shards(payload)[-1]
    tensors = load_file(payload / shard)
    tensors.pop(sorted(tensors)[0])
    save_file(tensors, payload / shard, metadata={"format": "pt"})
    manifest = json.loads((payload / PAYLOAD_MANIFEST).read_text())
    manifest["files"][shard] = file_entry(payload / shard)
    (payload / PAYLOAD_MANIFEST).write_text(json.dumps(manifest))
    inference = load_inference(payload)
    with pytest.raises(RuntimeError, match=r"Missing key\(s\)"):
        inference.model_fn(str(payload))


def test_a_shard_without_tensor_data_loads(payload: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard may hold no tensor bytes (no tensor, or only zero-size ones): its map then ends
    with the header, which torch.frombuffer refuses unless the loader handles it."""
    import torch
    from safetensors.torch import save_file

    from llm_contracts.manifest import file_entry

    save_file({"unused.empty": torch.empty(0, dtype=torch.float16)}, payload.parent / "empty.safetensors")
    inference = load_inference(payload)
    with open(payload.parent / "empty.safetensors", "rb") as f:
        tensors = inference._tensors(torch, "empty.safetensors", inference._map(f))
    assert list(tensors) == ["unused.empty"] and tensors["unused.empty"].numel() == 0

    save_file({}, payload / "model-none.safetensors")
    manifest = json.loads((payload / PAYLOAD_MANIFEST).read_text())
    manifest["files"]["model-none.safetensors"] = file_entry(payload / "model-none.safetensors")
    manifest["weights"].append("model-none.safetensors")
    (payload / PAYLOAD_MANIFEST).write_text(json.dumps(manifest))
    monkeypatch.setenv("GPTJ_DTYPE", "float16")
    loaded = inference.model_fn(str(payload))
    assert not any(t.is_meta for t in loaded["model"].parameters())


def test_an_entry_without_size_is_refused(payload: Path) -> None:
    manifest = json.loads((payload / PAYLOAD_MANIFEST).read_text())
    del manifest["files"]["config.json"]["size"]
    (payload / PAYLOAD_MANIFEST).write_text(json.dumps(manifest))
    inference = load_inference(payload)
    with pytest.raises(inference.IntegrityError, match=r"has no size and sha256 for 'config.json'"):
        inference.model_fn(str(payload))


def test_each_worker_loads_onto_the_gpu_the_model_server_gives_it(model_dir: Path) -> None:
    import inspect
    from types import SimpleNamespace

    inference = load_inference(model_dir)
    # The toolkit passes its context only to a model_fn that takes two parameters.
    assert list(inspect.signature(inference.model_fn).parameters) == ["model_dir", "context"]
    assert inference._gpu_id(SimpleNamespace(system_properties={"gpu_id": "3"})) == 3
    assert inference._gpu_id(SimpleNamespace(system_properties={})) == 0
    assert inference._gpu_id(None) == 0


def test_a_request_too_big_for_the_gpu_is_refused_and_the_next_one_served(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No GPU here: `generate` raises what CUDA raises when the beams' cache does not fit."""
    import torch

    inference = load_inference(model_dir)
    model = inference.model_fn(str(model_dir))
    real = model["model"].generate

    def generate(**kwargs: object) -> torch.Tensor:
        if kwargs.get("num_beams", 1) > 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.50 GiB")
        return real(**kwargs)

    monkeypatch.setattr(model["model"], "generate", generate)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    with pytest.raises(inference.RequestError, match=r"more GPU memory .* x 4 beams\): ask for fewer beams"):
        inference.predict_fn({"inputs": "Hello", "parameters": {"max_new_tokens": 4, "num_beams": 4}}, model)
    (out,) = inference.predict_fn({"inputs": "Hello", "parameters": {"max_new_tokens": 4}}, model)
    assert out["generated_text"].startswith("Hello")
