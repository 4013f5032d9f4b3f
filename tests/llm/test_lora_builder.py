"""The LoRA adapter builder (artifacts_builder/lora.py) against the tiny Llama payload: a good
adapter is packed as SageMaker takes one; every way vLLM would refuse or misapply one is refused,
all at once, before anything is written."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from artifacts_builder.llm import build as build_llm
from artifacts_builder.lora import build, make_tiny_adapter
from artifacts_builder.payload import BuildError
from llm_contracts.lora import ADAPTER_CONFIG, ADAPTER_WEIGHTS, environment, lora_bytes, smallest_allowed_rank
from llm_contracts.manifest import PAYLOAD_MANIFEST, read_manifest, verify_files


@pytest.fixture(scope="module")
def lora_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama's llm payload (the folder; its manifest beside it)."""
    return build_llm(out=tmp_path_factory.mktemp("base"), model=None, tiny="llama")


@pytest.fixture
def adapter(lora_base: Path, tmp_path: Path) -> Callable[..., Path]:
    def make(seed: int = 1, **config: object) -> Path:
        folder = make_tiny_adapter(lora_base, tmp_path / f"adapter-{seed}", seed=seed)
        if config:
            path = folder / ADAPTER_CONFIG
            path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
        return folder

    return make


def test_an_adapter_is_packed_as_sagemaker_takes_it(
    lora_base: Path, adapter: Callable[..., Path], tmp_path: Path
) -> None:
    archive = build(adapter(), lora_base, tmp_path / "out", name="support", max_rank=16)
    assert archive == tmp_path / "out" / "support" / "support.tar.gz"
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == [ADAPTER_CONFIG, ADAPTER_WEIGHTS]  # at the archive's root
    manifest = read_manifest(tmp_path / "out" / "support")
    verify_files(tmp_path / "out" / "support", manifest)
    # What the stack ships: the archive alone, under a key that keeps its .tar.gz.
    shipped = read_manifest(tmp_path / "out" / "support", PAYLOAD_MANIFEST)
    assert list(shipped["files"]) == ["support.tar.gz"]
    assert manifest["adapter"]["rank"] == 8 and manifest["base"]["source"] == "tiny-random-llama"
    again = build(adapter(), lora_base, tmp_path / "again", name="support", max_rank=16)
    assert again.read_bytes() == archive.read_bytes()  # reproducible: the same adapter, the same archive


def test_a_bin_adapter_is_read_without_unpickling_code(
    lora_base: Path, adapter: Callable[..., Path], tmp_path: Path
) -> None:
    import torch
    from safetensors.torch import load_file

    folder = adapter()
    tensors = load_file(str(folder / ADAPTER_WEIGHTS))
    torch.save(tensors, folder / "adapter_model.bin")
    (folder / ADAPTER_WEIGHTS).unlink()
    build(folder, lora_base, tmp_path / "out", name="legacy", max_rank=16)
    shipped = load_file(str(tmp_path / "out" / "legacy" / ADAPTER_WEIGHTS))
    assert shipped.keys() == tensors.keys()


def test_every_problem_is_refused_at_once_before_anything_is_written(
    lora_base: Path, adapter: Callable[..., Path], tmp_path: Path
) -> None:
    from safetensors.torch import load_file, save_file

    folder = adapter(base_model_name_or_path="meta-llama/Llama-3.1-8B", r=32, use_dora=True)
    tensors = load_file(str(folder / ADAPTER_WEIGHTS))
    name = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    tensors["base_model.model.model.layers.0.mlp.w9.lora_A.weight"] = tensors[name].clone()
    tensors["base_model.model.model.layers.7.self_attn.q_proj.lora_A.weight"] = tensors[name].clone()
    save_file(tensors, str(folder / ADAPTER_WEIGHTS))
    out = tmp_path / "out"
    with pytest.raises(BuildError) as refused:
        build(folder, lora_base, out, name="bad", max_rank=16)
    said = str(refused.value)
    for part in (
        "base_model_name_or_path='meta-llama/Llama-3.1-8B' is not the base payload's model 'tiny-random-llama'",
        "r=32 is above the engine's max_lora_rank=16: raise llm.max_lora_rank to one of 32, 64",
        "use_dora=True: vLLM does not serve it",
        "llama has no LoRA module 'w9'",
        "layer 7, and the base has 2",
        "q_proj.lora_A.weight: shape (8, 128); the base's q_proj at r=32 needs (32, 128)",
    ):
        assert part in said, said
    assert not out.exists()


def test_an_adapter_of_another_shape_is_refused(lora_base: Path, adapter: Callable[..., Path], tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    folder = adapter()
    tensors = load_file(str(folder / ADAPTER_WEIGHTS))
    name = "base_model.model.model.layers.1.mlp.down_proj.lora_A.weight"
    tensors[name] = tensors[name][:, :128].contiguous()  # an adapter of a base with intermediate 128
    save_file(tensors, str(folder / ADAPTER_WEIGHTS))
    with pytest.raises(
        BuildError, match=r"down_proj.lora_A.weight: shape \(8, 128\); the base's down_proj at r=8 needs \(8, 256\)"
    ):
        build(folder, lora_base, tmp_path / "out", name="narrow", max_rank=16)


def test_the_engine_settings_and_sizes_follow_from_the_adapters() -> None:
    assert environment(max_loras=2, max_rank=16, max_cpu_loras=4) == {
        "SM_VLLM_ENABLE_LORA": "true",
        "SM_VLLM_MAX_LORAS": "2",
        "SM_VLLM_MAX_LORA_RANK": "16",
        "SM_VLLM_MAX_CPU_LORAS": "4",
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true",
    }
    assert [smallest_allowed_rank(r) for r in (1, 2, 16, 17, 512, 513)] == [1, 8, 16, 32, 512, None]
    tiny = {"model_type": "llama", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2}  # fmt: skip
    # A layer at r=8: q,o 8*(128+128) each, k,v 8*(128+64) each, gate,up 8*(128+256) each, down 8*(256+128).
    per_layer = 8 * (2 * 256 + 2 * 192 + 3 * 384)
    assert lora_bytes(tiny, 8) == 2 * per_layer * 2


def test_the_command_line_builds_beside_the_base_and_refuses_in_one_line(
    lora_base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from artifacts_builder.__main__ import main

    out = lora_base.parent.parent
    assert main(["lora", "--name", "support", "--tiny-seed", "3", "--out", str(out)]) == 0
    assert (out / "llm" / "adapters" / "support" / "support.tar.gz").is_file()
    assert "lora: wrote" in capsys.readouterr().out
    refusals = {
        ("--name", "no_underscores", "--tiny-seed", "1", "--out", str(out)): "--name 'no_underscores' is not",
        ("--name", "a", "--tiny-seed", "1", "--out", str(tmp_path)): "no llm payload in",
        ("--name", "hub", "--adapter", "owner/adapter", "--out", str(out)): "a hub adapter needs --revision",
    }
    for argv, said in refusals.items():
        assert main(["lora", *argv]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err


def test_the_benchmark_merges_an_adapter_into_the_base_s_weights(
    lora_base: Path, adapter: Callable[..., Path], tmp_path: Path
) -> None:
    """bench/lora_adapters.py's merged model: each adapted weight is W + alpha/r * B @ A, the rest as they were."""
    from safetensors.torch import load_file

    from bench.lora_adapters import merged_payload

    source = adapter(seed=5)
    merged = merged_payload(lora_base, source, tmp_path / "merged")
    before, after = load_file(str(lora_base / "model.safetensors")), load_file(str(merged / "model.safetensors"))
    lora = load_file(str(source / ADAPTER_WEIGHTS))
    name = "model.layers.1.mlp.down_proj.weight"
    a = lora["base_model.model.model.layers.1.mlp.down_proj.lora_A.weight"].float()
    b = lora["base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"].float()
    expected = (before[name].float() + 2.0 * (b @ a)).to(before[name].dtype)  # alpha 16 / r 8
    assert (after[name] == expected).all()
    assert (after["model.embed_tokens.weight"] == before["model.embed_tokens.weight"]).all()
    assert not (
        after["model.layers.0.self_attn.q_proj.weight"] == before["model.layers.0.self_attn.q_proj.weight"]
    ).all()
