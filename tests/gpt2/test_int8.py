"""`--cpu-precision int8` and `int8-dynamic`: each int8 graph, its parity gate (that it passes
on the tiny model and refuses a damaged graph), and the server running the file the manifest names.

What int8-dynamic builds depends on the CPU it is for (`--target-instance-type`, by default the
build host): the tests that build for this host assert what is right for its CPU (the
`host_u8s8_saturates` fixture; the run lists the branch each took), and the other branch is
covered on every host by a target of the other kind or a recorded /proc/cpuinfo."""

from __future__ import annotations

import argparse
import json
import shutil
import tarfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from artifacts_builder import gpt2 as builder
from llm_contracts.manifest import read_manifest
from serving.gpt2.generation import (
    ONNX_FP16,
    ONNX_FP32,
    ONNX_INT8,
    ONNX_INT8_DYNAMIC,
    ModelInfo,
    SamplingParams,
    onnxruntime_file,
)
from serving.gpt2.local import LocalServer
from tests.gpt2.helpers import Quantized, pretend_avx2_host

#: --cpu-precision: (the graph it ships, the operator of each quantized linear layer)
PRECISIONS = {"int8": (ONNX_INT8, "MatMulNBits"), "int8-dynamic": (ONNX_INT8_DYNAMIC, "MatMulInteger")}
each_precision = pytest.mark.parametrize("precision", list(PRECISIONS))


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
    for precision in PRECISIONS:
        assert parser.parse_args(["--cpu-precision", precision]).cpu_precision == precision
    with pytest.raises(SystemExit):
        parser.parse_args(["--cpu-precision", "int4"])


@each_precision
def test_int8_gate_passes_and_the_manifest_names_the_int8_graph(
    precision: str, quantized: Callable[..., Quantized], request: pytest.FixtureRequest
) -> None:
    build = quantized(precision)
    graph = PRECISIONS[precision][0]
    outer = read_manifest(build.out / "gpt2")
    inner = read_manifest(build.model_dir)
    for manifest in (outer, inner):
        assert manifest["onnxruntime"]["file"] == graph
        assert manifest["onnxruntime"]["precision"] == precision
    reports = {r["onnx"]: r for r in outer["parity"]}
    # the fp32 graph is the int8 one's source: it must have passed its own (exact) gate first
    assert set(reports) == {ONNX_FP32, ONNX_FP16, graph}
    assert all(r["passed"] for r in reports.values())
    int8 = reports[graph]
    assert 0 < int8["max_abs_logit_diff"] <= int8["tolerance"]
    assert "std of PyTorch logits" in int8["criterion"]
    # int8 replaces the fp32 graph; the fp16 one stays for TensorRT
    assert graph in inner["files"] and ONNX_FP16 in inner["files"] and ONNX_FP32 not in inner["files"]
    assert not (build.model_dir / ONNX_FP32).exists()
    assert onnxruntime_file(build.model_dir) == graph
    if precision == "int8-dynamic":
        # built for this host: 8-bit weights where its products sum exactly, else 7-bit ones
        host_u8s8_saturates = request.getfixturevalue("host_u8s8_saturates")
        section = inner["onnxruntime"]
        assert section["target"] == {"instance_type": None, "int8_dot_product": not host_u8s8_saturates}
        assert section["quantization"]["weight_bits"] == (7 if host_u8s8_saturates else 8)
        assert section["needs_int8_dot_product"] is not host_u8s8_saturates
        assert section["gate_cpu_u8s8_saturates"] is host_u8s8_saturates


@each_precision
def test_int8_graph_has_no_fp32_weight_products(precision: str, quantized: Callable[..., Quantized]) -> None:
    import onnx
    from onnx import numpy_helper

    model_dir = quantized(precision).model_dir
    graph_file, operator = PRECISIONS[precision]
    graph = onnx.load(str(model_dir / graph_file)).graph
    constants = {t.name: t for t in graph.initializer}
    ops = [n.op_type for n in graph.node]
    info = ModelInfo.load(model_dir)
    # four linear layers per block and the LM head
    assert ops.count(operator) == 4 * info.n_layer + 1
    assert "Gemm" not in ops
    assert not [n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in constants]
    quantized_nodes = [n for n in graph.node if n.op_type == operator]
    if operator == "MatMulNBits":
        bits = {a.i for n in quantized_nodes for a in n.attribute if a.name == "bits"}
        assert bits == {8}
    else:
        bits = read_manifest(model_dir)["onnxruntime"]["quantization"]["weight_bits"]
        for node in quantized_nodes:
            weight = numpy_helper.to_array(constants[node.input[1]])
            assert str(weight.dtype) == "int8"
            # one zero point (and scale) per output column, not one per tensor
            assert numpy_helper.to_array(constants[node.input[3]]).shape == (weight.shape[1],)
            # symmetric per column: each column's largest weight at the range's end; 7 bits keep
            # 2 x 255 x |w| within int16, where a CPU without an int8 dot product adds pairs
            assert int(abs(weight.astype(int)).max()) == {8: 127, 7: 64}[bits]


def _damage(model_dir: Path, target: Path, graph_file: str, factor: float) -> Path:
    """A copy of the int8 graph with the weight scales of its first quantized layer multiplied
    by `factor`: what a quantizer that mis-scaled one layer would ship."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(model_dir / graph_file))
    first = next(n for n in model.graph.node if n.op_type in ("MatMulNBits", "MatMulInteger"))
    # MatMulNBits takes its scales as an input; MatMulInteger's result is scaled by a Mul after it
    name = first.input[2] if first.op_type == "MatMulNBits" else first.input[1].removesuffix("_quantized") + "_scale"
    scales = next(t for t in model.graph.initializer if t.name == name)
    scaled = numpy_helper.to_array(scales) * np.float32(factor)
    scales.CopyFrom(numpy_helper.from_array(scaled.astype(numpy_helper.to_array(scales).dtype), scales.name))
    onnx.save(model, str(target / graph_file))
    return target


@each_precision
def test_gate_rejects_a_damaged_int8_graph(precision: str, quantized: Callable[..., Quantized], tmp_path: Path) -> None:
    model_dir = quantized(precision).model_dir
    graph = PRECISIONS[precision][0]
    copy = tmp_path / "model"
    shutil.copytree(model_dir, copy)
    # the same gate on the intact copy passes: the rejection below is the damage's doing
    assert _gate(copy, graph).passed
    _damage(model_dir, copy, graph, 1.5)
    report = _gate(copy, graph)
    assert not report.passed
    assert report.max_abs_logit_diff > report.tolerance


@pytest.mark.parametrize(
    ("precision", "fix"),
    [("int8", "build with --cpu-precision fp32"), ("int8-dynamic", "build with --cpu-precision int8 (weight-only)")],
)
def test_failing_int8_gate_writes_nothing(
    precision: str, fix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], build: Callable[..., int]
) -> None:
    out = tmp_path / "out"
    (out / "gpt2").mkdir(parents=True)
    previous = out / "gpt2" / "model.tar.gz"
    previous.write_bytes(b"previous good build")
    # int8 rounding moves the logits by far more than 1e-6 of their spread
    assert build(out, "--cpu-precision", precision, "--int8-tolerance", "1e-6") == 1
    err = capsys.readouterr().err
    assert f"parity gate failed for {PRECISIONS[precision][0]}" in err
    assert fix in err
    assert previous.read_bytes() == b"previous good build"
    assert sorted(p.name for p in (out / "gpt2").iterdir()) == ["model.tar.gz"]


def test_manifest_naming_an_unlisted_graph_is_refused(model_dir: Path, tmp_path: Path) -> None:
    assert onnxruntime_file(model_dir) == ONNX_FP32  # a default build names the fp32 graph
    manifest = json.loads((model_dir / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "onnxruntime": {"file": ONNX_INT8}}))
    with pytest.raises(FileNotFoundError, match=r"names 'model_int8\.onnx' as the ONNX Runtime graph"):
        onnxruntime_file(tmp_path)
    assert onnxruntime_file(tmp_path / "no-manifest-here") == ONNX_FP32


@each_precision
def test_server_serves_the_int8_graph_over_http(
    precision: str,
    quantized: Callable[..., Quantized],
    running_tar: Callable[[Path, dict[str, str]], AbstractContextManager[LocalServer]],
) -> None:
    from serving.gpt2.backends import OnnxRuntimeBackend
    from serving.gpt2.predictor import Tokenizer

    build = quantized(precision)
    with tarfile.open(build.tar) as tar:
        assert ONNX_FP32 not in tar.getnames()  # only the int8 graph can answer
    request: dict[str, Any] = {"inputs": ["amazon", "lithium battery"], "parameters": {"max_new_tokens": 6}}
    with running_tar(build.tar, {"GPT2_THREADS": "1"}) as srv:
        status, body = srv.invoke(request)
    assert status == 200, body
    assert body["backend"] == "onnxruntime"
    # the same greedy tokens as the int8 graph run in this process
    direct = OnnxRuntimeBackend(build.model_dir, ModelInfo.load(build.model_dir), threads=1)
    assert direct.onnx_file == PRECISIONS[precision][0]
    tokenizer = Tokenizer(build.model_dir / "tokenizer")
    prompts = [tokenizer.encode(text) for text in request["inputs"]]
    expected = direct.generate(prompts, [SamplingParams(max_new_tokens=6)] * len(prompts))
    served = [output["completions"][0]["text"] for output in body["outputs"]]
    assert served == [tokenizer.decode(c.tokens) for c in expected]


@pytest.mark.parametrize(
    ("flags", "machine", "saturates"),
    [
        ("fpu avx2 avx512f avx512_vnni", "x86_64", False),  # Cascade Lake and later, Zen 4
        ("fpu avx2 avx_vnni", "x86_64", False),  # Alder Lake
        ("fpu avx avx2 fma", "x86_64", True),  # Zen 2/3, Skylake: u8 x s8 pairs sum in int16
        ("fp asimd", "aarch64", False),  # Arm's kernels accumulate in int32, with or without sdot
    ],
)
def test_u8s8_saturation_is_read_from_the_cpu(flags: str, machine: str, saturates: bool, tmp_path: Path) -> None:
    from serving.gpt2.backends import u8s8_saturates

    cpuinfo = tmp_path / "cpuinfo"
    key = "Features" if machine == "aarch64" else "flags"
    cpuinfo.write_text(f"processor\t: 0\n{key}\t\t: {flags}\n\nprocessor\t: 1\n{key}\t\t: {flags}\n")
    assert u8s8_saturates(cpuinfo, machine) is saturates
    assert u8s8_saturates(tmp_path / "missing", "x86_64") is None


@pytest.mark.parametrize(
    ("manifest", "refused"),
    [
        ({"needs_int8_dot_product": True}, True),  # 8-bit weights
        ({"needs_int8_dot_product": False}, False),  # 7-bit weights cannot saturate
        # payloads built before the key: gated on a CPU whose products did (not) saturate
        ({"gate_cpu_u8s8_saturates": False}, True),
        ({"gate_cpu_u8s8_saturates": True}, False),
        ({"gate_cpu_u8s8_saturates": None}, False),
    ],
)
def test_an_8_bit_dynamic_graph_is_refused_on_a_cpu_whose_products_saturate(
    manifest: dict[str, Any],
    refused: bool,
    quantized: Callable[..., Quantized],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Served on a recorded AVX2 CPU: a graph with 8-bit weights is refused, with the fix; one
    with 7-bit weights (or an older payload gated on such a CPU itself, or one that does not say) runs."""
    from serving.gpt2 import backends

    build = quantized("int8-dynamic")
    copy = tmp_path / "model"
    shutil.copytree(build.model_dir, copy)
    written = json.loads((copy / "manifest.json").read_text())
    for key in ("needs_int8_dot_product", "gate_cpu_u8s8_saturates"):
        written["onnxruntime"].pop(key)
    written["onnxruntime"].update(manifest)
    (copy / "manifest.json").write_text(json.dumps(written))
    pretend_avx2_host(tmp_path, monkeypatch)
    if refused:
        with pytest.raises(
            backends.BackendUnavailable, match=r"would saturate.*--target-instance-type .* ml\.c5\.xlarge"
        ):
            backends.OnnxRuntimeBackend(copy, ModelInfo.load(copy), threads=1)
    else:
        assert backends.OnnxRuntimeBackend(copy, ModelInfo.load(copy), threads=1).onnx_file == ONNX_INT8_DYNAMIC


@pytest.mark.parametrize(("precision", "moves"), [("fp32", False), ("int8-dynamic", True)])
def test_the_int8_gate_runs_the_prompts_batched_as_the_server_does(
    precision: str, moves: bool, model_dir: Path, quantized: Callable[..., Quantized]
) -> None:
    """Batched teacher forcing reproduces the lone one on the fp32 graph (so it feeds the rows
    right), and shows what it is there for on the dynamic graph: a row's logits move with its
    batch-mates (one activation scale per tensor), which the gate now bounds."""
    import numpy as np
    from transformers import AutoTokenizer, GPT2LMHeadModel

    from serving.gpt2.backends import OnnxRuntimeBackend

    folder = model_dir if precision == "fp32" else quantized(precision).model_dir
    model = GPT2LMHeadModel.from_pretrained(folder / "pytorch", dtype="float32").eval()  # type: ignore[no-untyped-call]
    tokenizer = AutoTokenizer.from_pretrained(folder / "tokenizer")
    info = ModelInfo.load(folder)
    prompts = [tokenizer(p).input_ids for p in builder.PARITY_PROMPTS]
    expected = builder._reference(model, prompts, 6, info.eos_token_id)
    backend = OnnxRuntimeBackend(folder, info, threads=1)
    batched = builder._teacher_forced_batched(backend, prompts, expected, info.max_batch_size, info.eos_token_id)
    alone = [builder._teacher_forced(backend, p, t) for p, t in zip(prompts, expected, strict=True)]
    assert [len(b) for b in batched] == [min(len(t) for t in expected) + 1] * len(prompts)
    shift = max(float(np.abs(a[: len(b)] - b).max()) for a, b in zip(alone, batched, strict=True))
    assert (shift > 1e-3) is moves, shift
    if moves:
        report = next(r for r in read_manifest(folder)["parity"] if r["onnx"] == ONNX_INT8_DYNAMIC)
        assert "in a full batch" in report["criterion"] and report["max_abs_logit_diff"] <= report["tolerance"]


@pytest.mark.parametrize(
    ("family", "dot"),
    [("t2", False), ("c4", False), ("c5", False), ("m5d", False), ("r5", False),  # Haswell to Skylake/Cascade Lake
     ("c6i", True), ("m7i", True), ("c6g", True), ("c7g", True), ("r8g", True)],  # VNNI, AMX, Arm
)  # fmt: skip
def test_int8_dot_product_of_each_sagemaker_cpu_family(family: str, dot: bool) -> None:
    from llm_contracts import instances

    assert instances.int8_dot_product(f"ml.{family}.xlarge") is dot


def test_every_sagemaker_cpu_family_has_its_int8_facts() -> None:
    """botocore's list of hosting instance types, less the accelerated ones: a family SageMaker
    adds fails here until the table says what its CPU sums int8 products with."""
    import botocore.session

    from llm_contracts import instances

    model = botocore.session.get_session().get_service_model("sagemaker")
    families = {name.split(".")[1] for name in model.shape_for("ProductionVariantInstanceType").enum}
    accelerated = {f for f in families if f in instances.GPU_FAMILIES or f in instances.NEURON_FAMILIES}
    accelerated |= {f for f in families if f[0] in "gp" or f == "dl1"}  # GPUs, Gaudi
    assert families - accelerated <= set(instances.CPU_FAMILIES), sorted(
        families - accelerated - set(instances.CPU_FAMILIES)
    )
    with pytest.raises(ValueError, match=r"'ml\.g5\.xlarge' is not of a SageMaker CPU family .* ml\.c5, ml\.c5d"):
        instances.int8_dot_product("ml.g5.xlarge")


@pytest.mark.parametrize(
    ("target", "host_saturates", "bits"),
    [
        (None, False, 8),  # this host, with an int8 dot product
        (None, True, 7),  # this host, without
        (None, None, 7),  # a host whose CPU cannot be read counts as without
        ("ml.c5.xlarge", False, 7),  # may land on Skylake: 7 bits, built anywhere
        ("ml.c5.xlarge", True, 7),
        ("ml.c6i.xlarge", False, 8),  # VNNI, gated where products sum as on the target
        ("ml.c6i.xlarge", True, None),  # ... and refused where they saturate
        ("ml.c6i.xlarge", None, None),
        ("ml.c7g.xlarge", True, None),  # Arm sums in int32 too
    ],
)
def test_the_target_picks_the_weights_and_where_they_can_be_gated(
    target: str | None, host_saturates: bool | None, bits: int | None
) -> None:
    if bits is None:
        with pytest.raises(builder.TargetError, match=rf"--target-instance-type {target} .*build on a host with"):
            builder.int8_target(target, host_saturates)
    else:
        assert builder.int8_target(target, host_saturates).weight_bits == bits


@pytest.mark.parametrize("host", ["this host", "a recorded AVX2 host"])
def test_a_build_for_a_vnni_target_is_refused_where_the_gate_cannot_run_its_kernels(
    host: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    build: Callable[..., int],
    request: pytest.FixtureRequest,
) -> None:
    """On a host whose products saturate, in one line before any work; on one with an int8 dot
    product the same target is planned with 8-bit weights."""
    if host == "this host":
        saturates = request.getfixturevalue("host_u8s8_saturates")
    else:
        pretend_avx2_host(tmp_path, monkeypatch)
        saturates = True
    args = ["--cpu-precision", "int8-dynamic", "--target-instance-type", "ml.c6i.xlarge"]
    if not saturates:  # this host has an int8 dot product: the plan is an 8-bit graph
        parser = argparse.ArgumentParser()
        builder.add_arguments(parser)
        assert builder._target(parser.parse_args(args), saturates) == builder.Int8Target("ml.c6i.xlarge", True)
        return
    out = tmp_path / "out"
    assert build(out, *args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: --target-instance-type ml.c6i.xlarge sums int8 products exactly"), err
    assert "this build host's int8 dot product has none" in err and "ml.c5.xlarge" in err
    assert not out.exists()


def test_a_target_goes_with_int8_dynamic_only(
    capsys: pytest.CaptureFixture[str], build: Callable[..., int], tmp_path: Path
) -> None:
    assert build(tmp_path / "out", "--cpu-precision", "int8", "--target-instance-type", "ml.c5.xlarge") == 2
    assert "--cpu-precision int8 runs the same on every CPU: drop it" in capsys.readouterr().err
    assert build(tmp_path / "out", "--cpu-precision", "int8-dynamic", "--target-instance-type", "ml.g5.xlarge") == 2
    assert "is not of a SageMaker CPU family" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_build_for_a_cpu_without_an_int8_dot_product_passes_its_gate_and_serves_everywhere(
    quantized: Callable[..., Quantized],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    running_tar: Callable[[Path, dict[str, str]], AbstractContextManager[LocalServer]],
) -> None:
    """ml.c5 may land on Skylake: 7-bit weights, built on any host at the default tolerance, whose
    products cannot saturate, so the server takes the graph on a CPU without VNNI too."""
    from serving.gpt2 import backends

    build = quantized("int8-dynamic", "ml.c5.xlarge")
    section = read_manifest(build.model_dir)["onnxruntime"]
    assert section["target"] == {"instance_type": "ml.c5.xlarge", "int8_dot_product": False}
    assert section["quantization"]["weight_bits"] == 7 and section["needs_int8_dot_product"] is False
    report = next(r for r in read_manifest(build.out / "gpt2")["parity"] if r["onnx"] == ONNX_INT8_DYNAMIC)
    assert report["passed"] and "0.25 x std" in report["criterion"]
    with running_tar(build.tar, {"GPT2_THREADS": "1"}) as srv:
        status, body = srv.invoke({"inputs": ["amazon"], "parameters": {"max_new_tokens": 4}})
    assert status == 200, body
    pretend_avx2_host(tmp_path, monkeypatch)
    assert backends.u8s8_saturates() is True
    backend = backends.OnnxRuntimeBackend(build.model_dir, ModelInfo.load(build.model_dir), threads=1)
    assert backend.onnx_file == ONNX_INT8_DYNAMIC


def _logits(model_dir: Path, emulate: list[str]) -> Any:
    import subprocess
    import sys

    import numpy as np

    driver = Path(__file__).with_name("logits_driver.py")
    command = [*emulate, sys.executable, str(driver), str(model_dir)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return np.array(json.loads(done.stdout.strip().splitlines()[-1]))


def test_on_an_emulated_avx2_cpu_7_bit_weights_compute_the_same_logits_and_8_bit_ones_do_not(
    quantized: Callable[..., Quantized], qemu_haswell: list[str], request: pytest.FixtureRequest
) -> None:
    """ONNX Runtime under qemu's Haswell (AVX2, no VNNI) runs the int16-pair kernels a CPU
    without an int8 dot product runs: the 7-bit graph gives this host's logits to the bit; the
    8-bit graph (built where this host has an int8 dot product) gives others, its products
    saturating, which shows the emulation reaches those kernels."""
    import numpy as np

    seven = quantized("int8-dynamic", "ml.c5.xlarge").model_dir
    assert np.array_equal(_logits(seven, qemu_haswell), _logits(seven, []))
    if request.getfixturevalue("host_u8s8_saturates"):
        return  # no 8-bit graph is built on this host (the builder refuses it)
    eight = quantized("int8-dynamic").model_dir
    assert read_manifest(eight)["onnxruntime"]["quantization"]["weight_bits"] == 8
    native, emulated = _logits(eight, []), _logits(eight, qemu_haswell)
    assert float(np.abs(native - emulated).max()) > 0.25 * float(native.std(axis=-1).mean())
