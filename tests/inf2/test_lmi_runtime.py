"""The inf2 bundle under the LMI neuronx image's own Python and library versions, not this
project's: its tokenizer and config under Python 3.10 with transformers 4.43.1 and tokenizers
0.19.1 (.venv-lmi310), and the handler end to end under transformers 4.43.1 with the CPU torch
(.venv-lmi), transformers-neuronx stubbed (tests/inf2/lmi_driver.py). `make test` builds both
environments (serving/inf2/requirements-lmi310.txt and requirements-lmi.txt say what they hold
and how they differ from the image)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from artifacts_builder.inf2 import run
from artifacts_builder.legacy_tokenizer import TokenizerFormatError, legacy_tokenizer_json
from llm_contracts.inf2 import HUB_FILES

from .helpers import COMMIT, ROOT, FakeHub, builder_args, hub_cache

DRIVER = Path(__file__).with_name("lmi_driver.py")
LMI310 = ROOT / ".venv-lmi310" / "bin" / "python"
LMI = ROOT / ".venv-lmi" / "bin" / "python"
PROMPTS = ["Hello, I am a language model,", "Welcome to Amazon Elastic Compute Cloud,", "naïve café ✓ 0123 ###"]


def drive(
    python: Path, spec: dict[str, Any], *, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    if not python.exists():
        venv = python.parents[1].name
        pytest.fail(f"{python} is missing: build the environment pinned to the LMI image with "
                    f"`make {venv}/.installed` (make test does it first)")  # fmt: skip
    proc = subprocess.run([str(python), str(DRIVER)], input=json.dumps(spec), capture_output=True, text=True,
                          timeout=600, cwd=ROOT, check=False, env={**os.environ, **(env or {})})  # fmt: skip
    if check:
        assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def result(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def unpack(bundle: Path, target: Path) -> Path:
    with tarfile.open(bundle) as tar:
        tar.extractall(target, filter="data")
    return target


def merges(model_dir: Path) -> list[Any]:
    return list(json.loads((model_dir / "tokenizer.json").read_text())["model"]["merges"])


def ours(model_dir: Path) -> dict[str, Any]:
    """The same reads with this project's transformers and tokenizers."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    return {"ids": ids, "decoded": [tokenizer.decode(i, skip_special_tokens=True) for i in ids]}


def test_the_tiny_bundle_loads_under_the_image_python_and_tokenizers(tiny_artifacts: Path, tmp_path: Path) -> None:
    model_dir = unpack(tiny_artifacts / "inf2" / "bundle.tar.gz", tmp_path) / "model"
    assert all(isinstance(m, str) for m in merges(model_dir))  # the form every tokenizers release reads
    got = result(drive(LMI310, {"mode": "tokenizer", "model_dir": str(model_dir), "prompts": PROMPTS}))
    assert got["versions"]["python"].startswith("3.10.") and "torch" not in got["versions"]
    assert (got["versions"]["transformers"], got["versions"]["tokenizers"]) == ("4.43.1", "0.19.1")
    assert {k: got[k] for k in ("ids", "decoded")} == ours(model_dir)
    assert got["decoded"] == PROMPTS
    config = json.loads((model_dir / "config.json").read_text())
    assert got["config"] == {k: config[k] for k in got["config"]}
    assert got["eos_token_id"] == config["eos_token_id"]


def test_a_model_dir_saved_with_new_tokenizers_is_rewritten_for_the_image(tiny_model_dir: Path, tmp_path: Path) -> None:
    # The folder as this project's tokenizers 0.23 saved it: merges as pairs, which 0.19.1 refuses.
    assert all(isinstance(m, list) for m in merges(tiny_model_dir))
    refused = drive(LMI310, {"mode": "tokenizer", "model_dir": str(tiny_model_dir), "prompts": PROMPTS}, check=False)
    assert refused.returncode != 0 and "did not match any variant of untagged enum ModelWrapper" in refused.stderr
    assert run(builder_args(tmp_path / "out", "--model-dir", str(tiny_model_dir))) == 0
    model_dir = unpack(tmp_path / "out" / "inf2" / "bundle.tar.gz", tmp_path / "bundle") / "model"
    assert merges(model_dir) == [" ".join(m) for m in merges(tiny_model_dir)]
    got = result(drive(LMI310, {"mode": "tokenizer", "model_dir": str(model_dir), "prompts": PROMPTS}))
    assert {k: got[k] for k in ("ids", "decoded")} == ours(tiny_model_dir)


def test_a_merge_with_a_space_is_refused_naming_it(tiny_model_dir: Path, tmp_path: Path) -> None:
    path = Path("tokenizer.json")
    data = {"model": {"type": "BPE", "merges": [["a", "b"], ["c d", "e"]]}}
    with pytest.raises(TokenizerFormatError, match=r"model\.merges\[1\]=\['c d', 'e'\] has a token containing a space"):
        legacy_tokenizer_json(data, path=path)
    assert legacy_tokenizer_json({"model": {"type": "BPE", "merges": ["a b"]}}, path=path)["model"]["merges"] == ["a b"]
    unigram = {"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}
    assert legacy_tokenizer_json(unigram, path=path) == unigram
    # The builder refuses such a folder and writes nothing.
    folder = Path(shutil.copytree(tiny_model_dir, tmp_path / "spaced"))
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["model"]["merges"].append(["x y", "z"])
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert run(builder_args(tmp_path / "out", "--model-dir", str(folder))) == 2
    assert not (tmp_path / "out" / "inf2" / "bundle.tar.gz").exists()


def greedy_alone(model_py: ModuleType, model_dir: Path, prompts: list[str], new: int) -> list[str]:
    """The reference with this project's transformers: the handler's own fp16 split load, run in
    fp32 as the stub runs the split checkpoint, one unpadded prompt at a time, greedy."""
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    config = model_py.ServerConfig.from_properties({"model_id": str(model_dir), "dtype": "fp16"})
    model = model_py.load_for_split(config).float().eval()
    texts = []
    for prompt in prompts:
        ids = torch.tensor([tokenizer(prompt)["input_ids"]])
        out = model.generate(ids, max_new_tokens=new, min_new_tokens=1, do_sample=False,
                             pad_token_id=tokenizer.eos_token_id)  # fmt: skip
        tokens = out[0, ids.shape[1] :].tolist()
        if tokenizer.eos_token_id in tokens:
            tokens = tokens[: tokens.index(tokenizer.eos_token_id) + 1]
        texts.append(str(tokenizer.decode(ids[0].tolist() + tokens, skip_special_tokens=True)))
    return texts


@pytest.mark.slow
def test_the_handler_serves_the_bundle_under_the_image_transformers(model_py: ModuleType, tmp_path: Path) -> None:
    assert run(builder_args(tmp_path / "out", "--tiny", "-c", "inf2.n_positions=64")) == 0
    bundle = unpack(tmp_path / "out" / "inf2" / "bundle.tar.gz", tmp_path / "opt-ml-model")
    good = {"text": PROMPTS[:2], "max_new_tokens": 6, "do_sample": False}
    other = {"text": PROMPTS[2], "max_new_tokens": 6, "do_sample": False}
    bad = {"text": "Hi", "seq_length": 65}
    spec = {"mode": "handler", "bundle_dir": str(bundle), "cache_dir": str(tmp_path / "cache"),
            "batches": [[good], [bad], [good, bad, other]]}  # fmt: skip
    got = result(drive(LMI, spec))
    assert got["versions"]["transformers"] == "4.43.1" and got["versions"]["tokenizers"] == "0.19.1"
    assert got["warm_up"] == 204
    loaded = [c for c in got["calls"] if c["call"] == "from_pretrained"]
    assert loaded == [{"call": "from_pretrained", "batch_size": 4, "amp": "f16", "tp_degree": 8, "n_positions": 64}]
    # Loaded in fp16 (blocks and head) with transformers 4.43's keyword, torch_dtype, not 4.56's dtype.
    split = next(c for c in got["calls"] if c["call"] == "save_pretrained_split")
    assert split["dtypes"] == ["torch.float16", "torch.float32"]
    samples = [c for c in got["calls"] if c["call"] == "sample"]
    # The calibration passes at load: a short one and one of every position, the fixed cost apart.
    assert [c["sequence_length"] for c in samples[:2]] == [8, 64]
    assert all(c["rows"] == 4 for c in samples)

    [[alone], [refused], batch] = got["responses"]
    expected = greedy_alone(model_py, bundle / "model", PROMPTS, 6)
    assert alone["status"] == 200 and alone["headers"] == {"content-type": "application/json"}
    assert alone["body"]["outputs"] == expected[:2]
    assert refused["status"] == 400 and "seq_length=65" in refused["body"]["error"]
    assert [r["status"] for r in batch] == [200, 200, 200]  # DJL's static batching: the batch's status
    assert batch[0]["body"]["outputs"] == expected[:2] and batch[2]["body"]["outputs"] == expected[2:]
    assert batch[1]["body"]["code"] == 400 and "seq_length=65" in batch[1]["body"]["error"]


@pytest.mark.slow
def test_a_hub_model_is_downloaded_checked_and_served_under_the_image_huggingface_hub(
    model_py: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handler's real download (huggingface_hub's snapshot_download, the image's 0.24.5) of a
    hub model at the bundle's commit, from a hub cache, offline; then a tampered weight file."""
    from artifacts_builder import inf2 as inf2_builder

    # The hub repository: the tiny model as a bundle ships it (its tokenizer readable by 0.19.1).
    assert run(builder_args(tmp_path / "tiny", "--tiny")) == 0
    model = unpack(tmp_path / "tiny" / "inf2" / "bundle.tar.gz", tmp_path / "tiny-bundle") / "model"
    hub = FakeHub(model, into=tmp_path, repo="facebook/opt-125m")
    monkeypatch.setattr(inf2_builder, "hub_api", lambda: hub)
    settings = {"model_id": hub.repo, "model_revision": COMMIT, "tensor_parallel_degree": 4, "n_positions": 64}
    assert run(builder_args(tmp_path / "out", *[a for k, v in settings.items() for a in ("-c", f"inf2.{k}={v}")])) == 0
    bundle = unpack(tmp_path / "out" / "inf2" / "bundle.tar.gz", tmp_path / "opt-ml-model")
    listed = json.loads((bundle / HUB_FILES).read_text())["files"]
    cache = tmp_path / "hf-home" / "hub"
    snapshot = hub_cache(cache, repo=hub.repo, commit=COMMIT, files={n: hub.folder / n for n in listed})
    request = {"text": PROMPTS[:2], "max_new_tokens": 6, "do_sample": False}
    spec = {"mode": "handler", "bundle_dir": str(bundle), "cache_dir": str(tmp_path / "cache"), "batches": [[request]]}
    offline = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}

    got = result(drive(LMI, spec, env=offline))
    assert got["versions"]["huggingface_hub"] == "0.24.5"
    [[answer]] = got["responses"]
    assert answer["status"] == 200 and answer["body"]["outputs"] == greedy_alone(model_py, model, PROMPTS[:2], 6)

    # A weight file that differs from the bundle's sha256: the load fails, and the file is gone.
    shutil.rmtree(tmp_path / "cache")
    blob = (snapshot / "model.safetensors").resolve()
    blob.write_bytes(blob.read_bytes()[:-1] + b"\0")
    failed = drive(LMI, spec, check=False, env=offline)
    assert failed.returncode != 0 and "model.safetensors of facebook/opt-125m@" in failed.stderr
    assert "refused and deleted" in failed.stderr and not blob.exists()
