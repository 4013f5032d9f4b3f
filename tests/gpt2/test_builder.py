"""The artifacts builder: what it packages, the manifests, and the parity gate's refusal."""

from __future__ import annotations

import argparse
import json
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from artifacts_builder import gpt2 as builder
from artifacts_builder.tarball import pack_directory
from llm_contracts.manifest import read_manifest, sha256_file, verify_files
from serving.gpt2.generation import (
    GENERATION_FILE,
    ONNX_FP16,
    ONNX_FP32,
    ModelInfo,
    input_names,
    output_names,
    shared_kv_input_names,
)


def test_parser_contract() -> None:
    parser = argparse.ArgumentParser()
    builder.add_arguments(parser)
    args = parser.parse_args(["--tiny"])
    assert args.tiny and args.out == Path("artifacts")
    assert (args.max_batch_size, args.max_length) == (10, 42)  # the seed's batch 10, length 42
    with pytest.raises(SystemExit):
        parser.parse_args(["--max-batch-size", "0"])


def test_outer_manifest_hashes_the_tarball(tiny_out: Path, model_tar: Path) -> None:
    manifest = read_manifest(tiny_out / "gpt2")
    entry = manifest["files"]["model.tar.gz"]
    assert entry == {"sha256": sha256_file(model_tar), "size": model_tar.stat().st_size}
    assert manifest["component"] == "gpt2"
    assert manifest["versions"]["onnxruntime"] and manifest["versions"]["torch"]
    assert manifest["tensorrt"] is None and manifest["gpu"] is None  # no GPU here
    assert all(r["passed"] for r in manifest["parity"])
    assert not list((tiny_out / "gpt2").glob(".staging-*")), "the staging folder must not be left behind"


def test_inner_manifest_lists_every_file_with_its_sha256(model_tar: Path, model_dir: Path) -> None:
    with tarfile.open(model_tar) as tar:
        names = {m.name for m in tar.getmembers() if m.isfile()}
    inner = read_manifest(model_dir)
    assert set(inner["files"]) == names - {"manifest.json"}
    verify_files(model_dir, inner)  # raises on any mismatch
    for expected in (ONNX_FP32, ONNX_FP16, GENERATION_FILE, "tokenizer/tokenizer.json", "pytorch/model.safetensors"):
        assert expected in names


def test_onnx_graphs_take_and_return_the_kv_cache(model_dir: Path) -> None:
    import onnx

    info = ModelInfo.load(model_dir)
    # ONNX Runtime's graph updates a buffer of some capacity in place; TensorRT's concatenates a past.
    layouts = (
        (ONNX_FP32, shared_kv_input_names, onnx.TensorProto.FLOAT, "capacity"),
        (ONNX_FP16, input_names, onnx.TensorProto.FLOAT16, "past"),
    )
    for name, names, past_type, length in layouts:
        graph = onnx.load(str(model_dir / name), load_external_data=False).graph
        assert [i.name for i in graph.input] == names(info.n_layer)
        assert [o.name for o in graph.output] == output_names(info.n_layer)
        past = next(i for i in graph.input if i.name == "past_key_values.0.key").type.tensor_type
        assert past.elem_type == past_type
        # batch and past length are dynamic; heads and head size are fixed
        dims = [d.dim_param or d.dim_value for d in past.shape.dim]
        assert dims == ["batch", info.n_head, length, info.head_dim]
        # logits stay fp32 even in the fp16 graph
        assert graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT


def test_cpu_graph_writes_its_kv_cache_in_place(model_dir: Path) -> None:
    """Each layer's attention is ONNX Runtime's GroupQueryAttention, whose present outputs are
    the graph's own (so the server can bind them to the past buffers) and nothing concatenates."""
    import onnx

    info = ModelInfo.load(model_dir)
    graph = onnx.load(str(model_dir / ONNX_FP32), load_external_data=False).graph
    attention = [n for n in graph.node if n.op_type == "GroupQueryAttention"]
    assert len(attention) == info.n_layer
    assert all(n.domain == "com.microsoft" for n in attention)
    assert [out for n in attention for out in n.output[1:]] == output_names(info.n_layer)[1:]
    assert not [n.name for n in graph.node if n.op_type == "Concat" and "past" in " ".join(n.input)]
    heads = {a.name: a.i for n in attention for a in n.attribute if a.name in ("num_heads", "kv_num_heads")}
    assert heads == {"num_heads": info.n_head, "kv_num_heads": info.n_head}


def test_parity_gate_failure_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], build: Callable[..., int]
) -> None:
    # A zero tolerance cannot be met (fp32 ONNX differs from PyTorch by ~1e-6): the gate must refuse.
    out = tmp_path / "out"
    (out / "gpt2").mkdir(parents=True)
    previous = out / "gpt2" / "model.tar.gz"
    previous.write_bytes(b"previous good build")
    assert build(out, "--fp32-tolerance", "0") == 1
    err = capsys.readouterr().err
    assert "parity gate failed for model.onnx" in err
    assert previous.read_bytes() == b"previous good build"
    assert not (out / "gpt2" / "manifest.json").exists()
    assert sorted(p.name for p in (out / "gpt2").iterdir()) == ["model.tar.gz"]


def test_bad_lengths_are_refused_with_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], build: Callable[..., int]
) -> None:
    assert build(tmp_path, "--max-length", "4096") == 2
    assert "--max-length 4096 exceeds the model's 128 positions" in capsys.readouterr().err


def test_generation_json_carries_the_limits(model_dir: Path) -> None:
    raw = json.loads((model_dir / GENERATION_FILE).read_text())
    assert raw["max_batch_size"] == 10 and raw["max_total_length"] == 42
    assert raw["eos_token_id"] == 0 and raw["model"] == "tiny-random-gpt2"


def test_documented_command_line(tmp_path: Path, builder_cli: list[str]) -> None:
    """`python -m artifacts_builder gpt2 --tiny --out DIR`, as the Makefile and the stack expect."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    cmd = [*builder_cli, "gpt2", "--tiny", "--out", str(tmp_path)]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    tar = tmp_path / "gpt2" / "model.tar.gz"
    assert read_manifest(tmp_path / "gpt2")["files"]["model.tar.gz"]["sha256"] == sha256_file(tar)
    assert "parity model.onnx" in done.stderr  # the long steps report their progress


def _assert_normalized(tar_path: Path) -> None:
    raw = tar_path.read_bytes()
    assert raw[:2] == b"\x1f\x8b" and raw[4:8] == b"\0\0\0\0", "the gzip header must carry mtime 0"
    assert raw[3] & 0x08 == 0, "the gzip header must carry no file name"
    with tarfile.open(tar_path) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {(0, 0, 0, "", "", 0o644)}


def test_two_builds_give_the_same_bytes(tmp_path: Path, build: Callable[..., int]) -> None:
    """The same inputs give the same model.tar.gz (export, tokenizer, weights, manifest and
    packaging are all deterministic): a rebuild leaves the S3 asset hash, so the endpoint, as it is."""
    assert build(tmp_path / "a") == 0
    assert build(tmp_path / "b") == 0
    first, second = (tmp_path / d / "gpt2" / "model.tar.gz" for d in ("a", "b"))
    assert sha256_file(first) == sha256_file(second)
    _assert_normalized(first)


def test_packaging_ignores_times_owners_and_order(tmp_path: Path) -> None:
    """The packaging step alone, on fixed files: only names and contents reach the archive."""
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    files = {"b.txt": b"bee", "a.bin": bytes(range(256)), "sub/c.json": b"{}"}
    for name, data in files.items():
        (source / name).write_bytes(data)
    first = pack_directory(source, tmp_path / "first.tar.gz")
    # other times, modes and creation order: the archive must not change
    for i, name in enumerate(reversed(list(files))):
        path = source / name
        path.unlink()
        path.write_bytes(files[name])
        os.utime(path, (1_000_000 + i, 2_000_000 + i))
        path.chmod(0o600)
    second = pack_directory(source, tmp_path / "second.tar.gz")
    assert first.read_bytes() == second.read_bytes()
    _assert_normalized(first)
    with tarfile.open(first) as tar:
        assert {m.name: tar.extractfile(m).read() for m in tar.getmembers()} == files  # type: ignore[union-attr]
    assert not list(tmp_path.glob("*.partial"))
