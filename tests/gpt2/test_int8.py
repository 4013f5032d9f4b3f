"""`--cpu-precision int8`: the weight-only int8 graph, its own parity gate (that it passes on
the tiny model and refuses a damaged graph), and the server running the file the manifest names."""

from __future__ import annotations

import json
import shutil
import tarfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from artifacts_builder import gpt2 as builder
from artifacts_builder.manifest import read_manifest
from serving.gpt2.generation import ONNX_FP16, ONNX_FP32, ONNX_INT8, ModelInfo, SamplingParams, onnxruntime_file
from serving.gpt2.local import LocalServer


def _gate(model_dir: Path, onnx_file: str, **tolerances: float) -> builder.ParityReport:
    """The builder's parity gate on one int8 graph of `model_dir`, against the payload's own PyTorch weights."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(model_dir / "pytorch", dtype="float32").eval()  # type: ignore[no-untyped-call]
    tokenizer = AutoTokenizer.from_pretrained(model_dir / "tokenizer")
    tol = {"tol32": 1e-3, "tol16": 2e-2, **tolerances}
    [report] = builder.parity_gate(
        model, tokenizer, model_dir, ModelInfo.load(model_dir), new_tokens=8, checks=[(onnx_file, "int8")], **tol
    )
    return report


def test_parser_default_stays_fp32() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    builder.add_arguments(parser)
    args = parser.parse_args(["--tiny"])
    assert (args.cpu_precision, args.int8_tolerance) == ("fp32", 0.25)
    assert parser.parse_args(["--cpu-precision", "int8"]).cpu_precision == "int8"
    with pytest.raises(SystemExit):
        parser.parse_args(["--cpu-precision", "int4"])


def test_int8_gate_passes_and_the_manifest_names_the_int8_graph(int8_out: Path, int8_model_dir: Path) -> None:
    outer = read_manifest(int8_out / "gpt2")
    inner = read_manifest(int8_model_dir)
    for manifest in (outer, inner):
        assert manifest["onnxruntime"]["file"] == ONNX_INT8
        assert manifest["onnxruntime"]["precision"] == "int8"
    reports = {r["onnx"]: r for r in outer["parity"]}
    # the fp32 graph is the int8 one's source: it must have passed its own (exact) gate first
    assert set(reports) == {ONNX_FP32, ONNX_FP16, ONNX_INT8}
    assert all(r["passed"] for r in reports.values())
    int8 = reports[ONNX_INT8]
    assert 0 < int8["max_abs_logit_diff"] <= int8["tolerance"]
    assert "std of PyTorch logits" in int8["criterion"]
    # int8 replaces the fp32 graph; the fp16 one stays for TensorRT
    assert ONNX_INT8 in inner["files"] and ONNX_FP16 in inner["files"] and ONNX_FP32 not in inner["files"]
    assert not (int8_model_dir / ONNX_FP32).exists()
    assert onnxruntime_file(int8_model_dir) == ONNX_INT8


def test_int8_graph_has_no_fp32_weight_products(int8_model_dir: Path) -> None:
    import onnx

    graph = onnx.load(str(int8_model_dir / ONNX_INT8)).graph
    constants = {t.name for t in graph.initializer}
    ops = [n.op_type for n in graph.node]
    info = ModelInfo.load(int8_model_dir)
    # four linear layers per block and the LM head
    assert ops.count("MatMulNBits") == 4 * info.n_layer + 1
    assert "Gemm" not in ops
    assert not [n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in constants]
    bits = {a.i for n in graph.node if n.op_type == "MatMulNBits" for a in n.attribute if a.name == "bits"}
    assert bits == {8}


def _damage(model_dir: Path, target: Path, factor: float) -> Path:
    """A copy of the int8 graph with the scales of one quantized layer multiplied by
    `factor`: what a quantizer that mis-scaled one layer would ship."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(model_dir / ONNX_INT8))
    first = next(n for n in model.graph.node if n.op_type == "MatMulNBits")
    scales = next(t for t in model.graph.initializer if t.name == first.input[2])
    scaled = numpy_helper.to_array(scales) * np.float32(factor)
    scales.CopyFrom(numpy_helper.from_array(scaled.astype(numpy_helper.to_array(scales).dtype), scales.name))
    onnx.save(model, str(target / ONNX_INT8))
    return target


def test_gate_rejects_a_damaged_int8_graph(int8_model_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(int8_model_dir, copy)
    # the same gate on the intact copy passes: the rejection below is the damage's doing
    assert _gate(copy, ONNX_INT8).passed
    _damage(int8_model_dir, copy, 1.5)
    report = _gate(copy, ONNX_INT8)
    assert not report.passed
    assert report.max_abs_logit_diff > report.tolerance


def test_failing_int8_gate_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], build: Callable[..., int]
) -> None:
    out = tmp_path / "out"
    (out / "gpt2").mkdir(parents=True)
    previous = out / "gpt2" / "model.tar.gz"
    previous.write_bytes(b"previous good build")
    # int8 rounding moves the logits by far more than 1e-6 of their spread
    assert build(out, "--cpu-precision", "int8", "--int8-tolerance", "1e-6") == 1
    err = capsys.readouterr().err
    assert "parity gate failed for model_int8.onnx" in err
    assert "build with --cpu-precision fp32" in err
    assert previous.read_bytes() == b"previous good build"
    assert sorted(p.name for p in (out / "gpt2").iterdir()) == ["model.tar.gz"]


def test_manifest_naming_an_unlisted_graph_is_refused(model_dir: Path, tmp_path: Path) -> None:
    assert onnxruntime_file(model_dir) == ONNX_FP32  # a default build names the fp32 graph
    manifest = json.loads((model_dir / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "onnxruntime": {"file": ONNX_INT8}}))
    with pytest.raises(FileNotFoundError, match=r"names 'model_int8\.onnx' as the ONNX Runtime graph"):
        onnxruntime_file(tmp_path)
    assert onnxruntime_file(tmp_path / "no-manifest-here") == ONNX_FP32


def test_server_serves_the_int8_graph_over_http(
    int8_tar: Path,
    int8_model_dir: Path,
    running_tar: Callable[[Path, dict[str, str]], AbstractContextManager[LocalServer]],
) -> None:
    from serving.gpt2.backends import OnnxRuntimeBackend
    from serving.gpt2.predictor import Tokenizer

    with tarfile.open(int8_tar) as tar:
        assert ONNX_FP32 not in tar.getnames()  # only the int8 graph can answer
    request: dict[str, Any] = {"inputs": ["amazon", "lithium battery"], "parameters": {"max_new_tokens": 6}}
    with running_tar(int8_tar, {"GPT2_THREADS": "1"}) as srv:
        status, body = srv.invoke(request)
    assert status == 200, body
    assert body["backend"] == "onnxruntime"
    # the same greedy tokens as the int8 graph run in this process
    direct = OnnxRuntimeBackend(int8_model_dir, ModelInfo.load(int8_model_dir), threads=1)
    assert direct.onnx_file == ONNX_INT8
    tokenizer = Tokenizer(int8_model_dir / "tokenizer")
    prompts = [tokenizer.encode(text) for text in request["inputs"]]
    expected = direct.generate(prompts, [SamplingParams(max_new_tokens=6)] * len(prompts))
    served = [output["completions"][0]["text"] for output in body["outputs"]]
    assert served == [tokenizer.decode(c.tokens) for c in expected]
