"""`python -m artifacts_builder llm`: the payload of any causal language model the pinned vLLM
serves, from a folder or the hub (answered here by a fake hub from a local folder), and what it
refuses before it downloads or writes anything."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from artifacts_builder.llm import BuildError, build
from llm_contracts.causal_lm import ModelFacts, read_safetensors_header
from llm_contracts.manifest import PAYLOAD_MANIFEST, read_manifest, sha256_file, verify_files
from tests.inf2.helpers import FakeHub
from tests.infra.helpers import ROOT

REPO = "example/tiny-qwen"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def llm_build(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """The builder in process, into a fresh output folder."""

    def run(**kwargs: Any) -> Path:
        return build(out=tmp_path_factory.mktemp("out"), **{"model": None, **kwargs})

    return run


def test_the_tiny_models_are_built_as_the_engine_loads_them(llm_build: Callable[..., Path]) -> None:
    for kind in ("llama", "qwen2"):
        payload = llm_build(tiny=kind)
        manifest = read_manifest(payload, PAYLOAD_MANIFEST)
        verify_files(payload, manifest)
        assert manifest["component"] == "llm-payload" and manifest["model"]["architecture"].endswith("ForCausalLM")
        assert {"config.json", "tokenizer.json", "model.safetensors"} <= set(manifest["files"])
        # Each tensor as the checkpoint stores it: bfloat16 stays bfloat16.
        dtypes = {info["dtype"] for info in read_safetensors_header(payload / "model.safetensors").values()}
        assert dtypes == {"BF16"}
        facts = ModelFacts.from_payload(payload, manifest["files"])
        assert (facts.head_size, facts.kv_heads, facts.max_model_len) == (32, 2, 256)
        outer = json.loads((payload.parent / "manifest.json").read_text())
        assert outer["model"]["source"] == f"tiny-random-{kind}"
    # Qwen's own chat template (and tied embeddings: no lm_head.weight, and no missing key).
    files = read_manifest(llm_build(tiny="qwen2"), PAYLOAD_MANIFEST)["files"]
    assert "chat_template.jinja" in files


def test_a_folder_records_where_it_came_from(
    llm_build: Callable[..., Path], tiny_sources: Callable[[str], Path]
) -> None:
    source = tiny_sources("llama")
    payload = llm_build(model=str(source))
    assert json.loads((payload.parent / "manifest.json").read_text())["model"]["source"] == str(source.resolve())
    with pytest.raises(BuildError, match="--revision main is for a hub model"):
        llm_build(model=str(source), revision="main")


def test_a_chat_template_is_written_into_the_payload(
    llm_build: Callable[..., Path], tiny_sources: Callable[[str], Path], tmp_path: Path
) -> None:
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    payload = llm_build(model=str(tiny_sources("llama")), chat_template=template)
    assert (payload / "chat_template.jinja").read_text() == template.read_text()
    assert "chat_template.jinja" in read_manifest(payload, PAYLOAD_MANIFEST)["files"]


def test_pytorch_bin_weights_are_read_without_unpickling_code_and_shipped_as_safetensors(
    llm_build: Callable[..., Path], tiny_sources: Callable[[str], Path], tmp_path: Path
) -> None:
    import torch
    from safetensors.torch import load_file

    source = Path(shutil.copytree(tiny_sources("llama"), tmp_path / "bin"))
    tensors = load_file(source / "model.safetensors")
    (source / "model.safetensors").unlink()
    torch.save(tensors, source / "pytorch_model.bin")
    payload = llm_build(model=str(source))
    assert not any(name.endswith((".bin", ".pt", ".pkl")) for name in read_manifest(payload, PAYLOAD_MANIFEST)["files"])
    rebuilt = load_file(payload / "model.safetensors")
    assert rebuilt.keys() == tensors.keys() and all(torch.equal(rebuilt[k], tensors[k]) for k in tensors)


def test_a_missing_weight_fails_the_build(
    llm_build: Callable[..., Path], tiny_sources: Callable[[str], Path], tmp_path: Path
) -> None:
    from safetensors.torch import load_file, save_file

    source = Path(shutil.copytree(tiny_sources("llama"), tmp_path / "short"))
    tensors = load_file(source / "model.safetensors")
    del tensors["lm_head.weight"]
    save_file(tensors, source / "model.safetensors")
    with pytest.raises(BuildError, match=r"lacks 1 weights the model needs \(lm_head.weight"):
        llm_build(model=str(source))


def _older_layout(kind: str, folder: Path) -> Path:
    """A tiny random GPT-NeoX or OPT (hidden size 64, 2 layers, the offline tokenizer's vocabulary
    of a few hundred), saved as its hub checkpoints are: GPT-NeoX's output embedding is
    ``embed_out`` (transformers 5 calls it ``lm_head`` in memory), and facebook/opt-*'s keys are
    its base model's (``decoder.*``, no ``model.``), its head tied to ``decoder.embed_tokens``."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM, GPTNeoXConfig, OPTConfig

    from artifacts_builder.tiny import train_tokenizer

    tokenizer = train_tokenizer(folder)
    eos = tokenizer.eos_token_id
    shape: dict[str, Any] = {"vocab_size": len(tokenizer), "hidden_size": 64, "num_attention_heads": 4,
                             "num_hidden_layers": 2, "max_position_embeddings": 128, "bos_token_id": eos,
                             "eos_token_id": eos, "pad_token_id": eos}  # fmt: skip
    config: Any = (
        GPTNeoXConfig(**shape, intermediate_size=128, tie_word_embeddings=False)
        if kind == "gpt_neox"
        else OPTConfig(**shape, ffn_dim=128, word_embed_proj_dim=64, tie_word_embeddings=True)
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).to(torch.bfloat16).save_pretrained(folder)  # type: ignore[no-untyped-call]
    if kind == "opt":
        tensors = load_file(folder / "model.safetensors")
        save_file({k.removeprefix("model."): v for k, v in tensors.items()}, folder / "model.safetensors")
    return folder


@pytest.mark.parametrize(("kind", "head"), [("gpt_neox", "embed_out.weight"), ("opt", "decoder.embed_tokens.weight")])
def test_an_output_embedding_named_or_tied_as_the_architecture_does_is_found(
    llm_build: Callable[..., Path], tmp_path: Path, kind: str, head: str
) -> None:
    source = _older_layout(kind, tmp_path / kind)
    stored = read_safetensors_header(source / "model.safetensors")
    assert head in stored and "lm_head.weight" not in stored
    payload = llm_build(model=str(source))
    manifest = read_manifest(payload, PAYLOAD_MANIFEST)
    verify_files(payload, manifest)
    # The checkpoint's own names, which vLLM's loader of the architecture reads (gpt_neox.py's embed_out).
    assert read_safetensors_header(payload / "model.safetensors").keys() == stored.keys()
    assert manifest["model"]["architecture"] == {"gpt_neox": "GPTNeoXForCausalLM", "opt": "OPTForCausalLM"}[kind]


def test_a_missing_output_embedding_is_named_as_the_checkpoint_stores_it(
    llm_build: Callable[..., Path], tmp_path: Path
) -> None:
    from safetensors.torch import load_file, save_file

    source = _older_layout("gpt_neox", tmp_path / "neox")
    tensors = load_file(source / "model.safetensors")
    del tensors["embed_out.weight"]
    save_file(tensors, source / "model.safetensors")
    with pytest.raises(BuildError, match=r"lacks 1 weights the model needs \(embed_out.weight\)"):
        llm_build(model=str(source))


def _with_config(source: Path, into: Path, **changes: Any) -> Path:
    folder = Path(shutil.copytree(source, into))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


def test_an_architecture_vllm_does_not_serve_is_refused_before_anything_is_written(
    tiny_sources: Callable[[str], Path], tmp_path: Path
) -> None:
    source = _with_config(tiny_sources("qwen2"), tmp_path / "mpt", architectures=["MPTForCausalLM"])
    out = tmp_path / "out"
    with pytest.raises(
        BuildError, match=r"cannot be served by the vllm engine: vLLM served MPTForCausalLM until 0\.28\.0"
    ):
        build(model=str(source), out=out)
    assert not (out / "llm" / "model").exists() and not (out / "llm" / "manifest.json").exists()


def test_a_quantization_the_configured_gpu_lacks_is_refused(
    tiny_sources: Callable[[str], Path], tmp_path: Path
) -> None:
    source = _with_config(
        tiny_sources("qwen2"),
        tmp_path / "mxfp4",
        quantization_config={"quant_method": "mxfp4"},
    )
    with pytest.raises(BuildError, match=r"on llm.instance_type=ml.g4dn.xlarge: its mxfp4 quantization needs a GPU"):
        build(model=str(source), out=tmp_path / "out", context={"llm.instance_type": "ml.g4dn.xlarge"})


def test_from_the_hub_only_config_json_is_fetched_before_the_check(
    tiny_sources: Callable[[str], Path], tmp_path: Path
) -> None:
    source = _with_config(tiny_sources("qwen2"), tmp_path / "src", architectures=["MPTForCausalLM"])
    hub = FakeHub(source, into=tmp_path, repo=REPO)
    with pytest.raises(BuildError, match="example/tiny-qwen at 0123456789abcdef"):
        build(model=REPO, revision=COMMIT, out=tmp_path / "out", api=hub)
    assert hub.downloads == ["config.json"]


def test_from_the_hub_at_a_commit(tiny_sources: Callable[[str], Path], tmp_path: Path) -> None:
    hub = FakeHub(tiny_sources("qwen2"), into=tmp_path, repo=REPO)
    payload = build(model=REPO, revision=COMMIT, out=tmp_path / "out", api=hub)
    record = json.loads((payload.parent / "manifest.json").read_text())["model"]
    assert (record["source"], record["revision"]) == (REPO, COMMIT)
    # The model card and other formats' weights stay on the hub.
    assert "README.md" not in hub.downloads and "tf_model.h5" not in hub.downloads
    assert (payload / "chat_template.jinja").is_file()


def test_a_download_that_does_not_match_the_hubs_sha256_is_refused(
    tiny_sources: Callable[[str], Path], tmp_path: Path
) -> None:
    hub = FakeHub(tiny_sources("qwen2"), into=tmp_path, repo=REPO)
    info = hub.model_info(REPO, revision=COMMIT, files_metadata=True)
    weights = hub.folder / "model.safetensors"
    original = sha256_file(weights)
    hub.model_info = lambda *a, **k: info  # type: ignore[method-assign]  # the listing from before
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert sha256_file(weights) != original
    with pytest.raises(BuildError, match="does not match the sha256 the hub gives"):
        build(model=REPO, revision=COMMIT, out=tmp_path / "out", api=hub)


def test_the_command_line(builder_cli: list[str], tmp_path: Path) -> None:
    done = subprocess.run([*builder_cli, "llm", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and "--tiny {llama,qwen2}" in done.stdout and "end-of-life" not in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "artifacts_builder", "llm", "--model", "./no/such/folder", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "llm: error: --model './no/such/folder' is not a folder" in done.stderr


def test_the_command_prints_the_commit_and_a_deploy_line_synthesis_accepts(
    tiny_sources: Callable[[str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The reader deploys with what the builder prints: the commit `main` resolved to, and a
    `cdk deploy` line whose settings name the payload it wrote (the checks synthesis makes)."""
    from artifacts_builder import llm as llm_builder
    from artifacts_builder.__main__ import main
    from project_config import ConfigError, from_cdk_json, parse_context_pairs
    from project_config.llm import check_payload, check_source

    hub = FakeHub(tiny_sources("qwen2"), into=tmp_path, repo=REPO, commit="main", resolves_to=COMMIT)
    monkeypatch.setattr(llm_builder, "hub_api", lambda: hub)
    out = tmp_path / "out"

    def deploy_pairs(*argv: str) -> tuple[str, list[str]]:
        """What the builder printed, and the -c pairs of its deploy line, checked as synthesis checks them."""
        assert main(["llm", *argv, "--out", str(out), "-c", "llm.instance_type=ml.g5.xlarge"]) == 0
        printed = capsys.readouterr().out
        words = shlex.split(printed.rstrip().splitlines()[-1])
        assert words[:4] == ["npx", "cdk", "deploy", "LlmStack"] and words[4::2] == ["-c"] * len(words[5::2])
        settings = from_cdk_json(parse_context_pairs(words[5::2])).llm
        check_source(settings)
        check_payload(settings)
        return printed, words[5::2]

    printed, pairs = deploy_pairs("--model", REPO)
    assert f"llm: {REPO} at main is commit {COMMIT}\n" in printed
    artifacts = f"project.artifacts_dir={out.resolve()}"
    assert pairs == [f"llm.model={REPO}", f"llm.revision={COMMIT}", "llm.instance_type=ml.g5.xlarge", artifacts]
    # The printed settings are what synthesis needs: another commit is refused.
    wrong = [pair if not pair.startswith("llm.revision=") else f"llm.revision={'f' * 40}" for pair in pairs]
    with pytest.raises(ConfigError, match=f"allowed is the model .* was built from \\({REPO} at {COMMIT}\\)"):
        check_source(from_cdk_json(parse_context_pairs(wrong)).llm)

    source = tiny_sources("llama")
    printed, pairs = deploy_pairs("--model", str(source))
    assert "commit" not in printed  # a folder has none
    assert pairs == [f"llm.model={source.resolve()}", "llm.instance_type=ml.g5.xlarge", artifacts]
