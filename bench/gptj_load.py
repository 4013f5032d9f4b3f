"""GPT-J cold start: how fast each weights format loads, against the time to read its bytes.

A GPT-J-architecture fp16 model with random weights (full width and vocabulary, fewer
layers: about 1.6 GB) is built once under bench/results/gptj/. Then, each load in a fresh
process (imports timed apart), cold (the file's pages evicted from the page cache) and warm:

* ``raw_read``: read the weights file once (the floor for any loader);
* ``from_pretrained``: transformers ``from_pretrained`` from safetensors (what the payload ships);
* ``torch_load``: ``torch.load`` of the whole pickled model (the seed's ``torch.save`` way);
* ``torch_load_mmap``: the same with ``mmap=True``;
* ``meta_assign``: model on the meta device, safetensors ``load_file``, ``load_state_dict(assign=True)``;
* ``shipped``: the endpoint's cold start as GptjStack ships it: the payload folder as
  SageMaker lays out an uncompressed S3 prefix in /opt/ml/model (nothing to extract), then
  ``code/inference.py``'s ``model_fn`` (sha256 of every file, build, one generated token),
  with the raw read of the same files measured in the same process for the ratio;
* ``shipped_tarball``: the same payload as ``model.tar.gz`` (``gptj.model_data`` pointing at
  one): extract it as SageMaker does, then ``model_fn``, against the archive's raw read.

And the payload builder's peak RSS against the model's size on disk.

    .venv/bin/python -m bench.gptj_load [--repeat 3] [--python .venv-hf/bin/python]

Cold: ``POSIX_FADV_DONTNEED`` on each file after ``sync``, which empties the page cache of
those files only (``echo 3 > /proc/sys/vm/drop_caches`` would empty everyone's). The raw-read
numbers show whether the eviction took.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from llm_contracts.manifest import sha256_file

ROOT = Path(__file__).resolve().parents[1]

WORK = ROOT / "bench" / "results" / "gptj"
# GPT-J 6B's width, heads, rotary size, context and vocabulary; 2 of its 28 layers.
SHAPE = {"n_layer": 2, "n_embd": 4096, "n_head": 16, "rotary_dim": 64, "n_positions": 2048, "vocab_size": 50400}
METHODS = ("raw_read", "from_pretrained", "torch_load", "torch_load_mmap", "meta_assign")


def evict(*paths: Path) -> None:
    os.sync()
    for path in paths:
        files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
        for file in files:
            fd = os.open(file, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def raw_read(*paths: Path) -> float:
    """Seconds to read the files (every file of a folder) once, one after the other."""
    files = sorted(f for p in paths for f in ([q for q in p.rglob("*") if q.is_file()] if p.is_dir() else [p]))
    buffer = bytearray(16 * 1024 * 1024)
    started = time.perf_counter()
    for file in files:
        with open(file, "rb", buffering=0) as f:
            while f.readinto(buffer):
                pass
    return time.perf_counter() - started


# --- children: one load in a fresh process -------------------------------------------------------


def _dtype_key() -> str:
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def child(method: str, state: str, model: Path) -> dict[str, Any]:
    """One load, first in its process (a second load in the same process reuses the first
    one's freed memory and looks several times faster than any cold start can be)."""
    started = time.perf_counter()
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    imports = time.perf_counter() - started
    weights, pickle = model / "model.safetensors", model / "model.pt"
    target = pickle if method.startswith("torch_load") else weights
    if target is pickle and sha256_file(pickle) != (model / "model.pt.sha256").read_text().strip():
        raise SystemExit(f"{pickle} does not match the sha256 recorded when it was written: not unpickling it")
    if state == "cold":
        evict(target)
    else:
        raw_read(target)
    t0 = time.perf_counter()
    if method == "raw_read":
        raw_read(weights)
    elif method == "from_pretrained":
        AutoModelForCausalLM.from_pretrained(model, **{_dtype_key(): torch.float16})
    elif method == "torch_load":
        torch.load(pickle, weights_only=False)  # its sha256 matched the record above
    elif method == "torch_load_mmap":
        torch.load(pickle, weights_only=False, mmap=True)
    elif method == "meta_assign":
        from safetensors.torch import load_file

        config = AutoConfig.from_pretrained(model)
        with torch.device("meta"):
            loaded = AutoModelForCausalLM.from_config(config, **{_dtype_key(): torch.float16})  # type: ignore[no-untyped-call]
        loaded.load_state_dict(load_file(weights), assign=True, strict=False)
    seconds = time.perf_counter() - t0
    versions = transformers.__version__
    return {"method": method, "state": state, "s": seconds, "imports_s": imports, "transformers": versions}


def _container_imports() -> float:
    """What the container has imported before it calls model_fn: the toolkit's handler
    service (which imports torch and transformers' modeling code), timed apart."""
    started = time.perf_counter()
    try:
        import sagemaker_huggingface_inference_toolkit.handler_service  # noqa: F401
    except ImportError:  # run outside .venv-hf: the same libraries, without the toolkit
        import transformers.modeling_utils  # noqa: F401
    return time.perf_counter() - started


def _model_fn(model_dir: Path) -> dict[str, Any]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("inference", model_dir / "code" / "inference.py")
    assert spec is not None and spec.loader is not None
    inference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inference)
    return inference.model_fn(str(model_dir))  # type: ignore[no-any-return]


def child_shipped(payload: Path) -> dict[str, Any]:
    """Raw read of the payload's files, then the endpoint's cold start, both from a cold cache.
    The folder is what SageMaker puts in /opt/ml/model from the uncompressed prefix."""
    os.environ.setdefault("GPTJ_DTYPE", "float16")  # load the bytes as shipped (GPU dtype)
    imports = _container_imports()
    evict(payload)
    before = raw_read(payload)
    evict(payload)
    t0 = time.perf_counter()
    loaded = _model_fn(payload)
    total = time.perf_counter() - t0
    timings = loaded["timings"]
    del loaded  # the model's tensors map the files: mapped pages cannot be evicted
    gc.collect()
    evict(payload)
    after = raw_read(payload)
    # This VM's disk is cached again by its host, so a read right after another one of the
    # same bytes can be faster even with the guest's page cache dropped: the raw read is taken
    # on both sides of the load and averaged, so that neither side has that advantage alone.
    read = (before + after) / 2
    return {
        "method": "shipped",
        "imports_s": imports,
        "raw_read_before_s": before,
        "raw_read_after_s": after,
        "raw_read_s": read,
        **timings,
        "total_s": total,
        "ratio_to_raw_read": total / read,
    }


def child_shipped_tarball(archive: Path, scratch: Path) -> dict[str, Any]:
    """Raw read of the archive, then extraction and the endpoint's cold start."""
    os.environ.setdefault("GPTJ_DTYPE", "float16")
    imports = _container_imports()
    evict(archive)
    read = raw_read(archive)
    evict(archive)
    model_dir = scratch / "model"
    shutil.rmtree(model_dir, ignore_errors=True)
    model_dir.mkdir(parents=True)
    t0 = time.perf_counter()
    # [?] SageMaker's own extractor is not documented; GNU tar is the common tool for it.
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(model_dir)], check=True)
    extracted = time.perf_counter()
    loaded = _model_fn(model_dir)
    total = time.perf_counter() - t0
    shutil.rmtree(model_dir)
    return {
        "method": "shipped_tarball",
        "imports_s": imports,
        "raw_read_s": read,
        "extract_s": extracted - t0,
        **loaded["timings"],
        "total_s": total,
        "ratio_to_raw_read": total / read,
    }


# --- parent ------------------------------------------------------------------------------------


def prepare(python: str) -> dict[str, Any]:
    source = WORK / "source"
    if not (source / "model.safetensors").exists():
        print("building the random GPT-J-architecture model ...", file=sys.stderr)
        # In a child: Linux keeps ru_maxrss across fork+exec, so the builder started below from
        # a parent that had held the model would report the parent's peak as its own.
        code = (
            "import sys, json; from pathlib import Path; from artifacts_builder import gptj; "
            "gptj.make_random_model(Path(sys.argv[1]), **json.loads(sys.argv[2]))"
        )
        subprocess.run([sys.executable, "-c", code, str(source), json.dumps(SHAPE)], check=True, cwd=ROOT)
    if not (source / "model.pt").exists() or not (source / "model.pt.sha256").exists():
        # The pickle is written by the interpreter that will load it: a pickle only loads
        # under the transformers that wrote it.
        code = (
            "import sys, torch; from transformers import AutoModelForCausalLM as M; "
            "m = M.from_pretrained(sys.argv[1], torch_dtype=torch.float16); torch.save(m, sys.argv[1] + '/model.pt')"
        )
        subprocess.run([python, "-c", code, str(source)], check=True, stderr=subprocess.DEVNULL)
        # The sha256 the loads check before unpickling (torch.load(weights_only=False) runs code).
        (source / "model.pt.sha256").write_text(sha256_file(source / "model.pt"))
    out = WORK / "artifacts"
    proc = subprocess.run(
        [sys.executable, "-m", "artifacts_builder", "gptj", "--model", str(source), "--out", str(out), "--tarball"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    peak = float(proc.stdout.split("peak RSS ")[1].split()[0]) * 1e9
    weights = (source / "model.safetensors").stat().st_size
    return {
        "source": source,
        "payload": out / "gptj" / "model",
        "shards": len(list((out / "gptj" / "model").glob("*.safetensors"))),
        "archive": out / "gptj" / "model.tar.gz",
        "weights_bytes": weights,
        "pickle_bytes": (source / "model.pt").stat().st_size,
        "archive_bytes": (out / "gptj" / "model.tar.gz").stat().st_size,
        "builder_peak_rss_bytes": peak,
        "builder_rss_ratio": peak / weights,
    }


def run_child(python: str, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [python, "-m", "bench.gptj_load", *args],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ},
    )
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    default_python = ROOT / ".venv-hf" / "bin" / "python"
    parser.add_argument(
        "--python",
        default=str(default_python if default_python.exists() else sys.executable),
        help="interpreter of the loads (default: .venv-hf's, pinned to the container's transformers)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "shipped":
        print(json.dumps(child_shipped(args.path)))
        return 0
    if args.child == "shipped_tarball":
        print(json.dumps(child_shipped_tarball(args.path, WORK)))
        return 0
    if args.child:
        method, state = args.child.split(":")
        print(json.dumps(child(method, state, args.path)))
        return 0

    setup = prepare(args.python)
    runs: dict[str, list[dict[str, Any]]] = {f"{m}:{s}": [] for m in METHODS for s in ("cold", "warm")}
    shipped: list[dict[str, Any]] = []
    tarball: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        for key, results in runs.items():
            results.append(run_child(args.python, "--child", key, "--path", str(setup["source"])))
        shipped.append(run_child(args.python, "--child", "shipped", "--path", str(setup["payload"])))
        tarball.append(run_child(args.python, "--child", "shipped_tarball", "--path", str(setup["archive"])))
    summary: dict[str, Any] = {k: v for k, v in setup.items() if not isinstance(v, Path)}
    summary["transformers"] = shipped[0].get("transformers") or runs["raw_read:cold"][0]["transformers"]
    summary["repeat"] = args.repeat
    for method in METHODS:
        summary[method] = {
            f"{state}_s": statistics.median(r["s"] for r in runs[f"{method}:{state}"]) for state in ("cold", "warm")
        }
        summary[method]["imports_s"] = statistics.median(r["imports_s"] for r in runs[f"{method}:cold"])
    for name, results in (("shipped", shipped), ("shipped_tarball", tarball)):
        summary[name] = {
            key: statistics.median(r[key] for r in results) for key in results[0] if isinstance(results[0][key], float)
        }
        summary[name]["ratios_to_raw_read"] = [round(r["ratio_to_raw_read"], 3) for r in results]
        summary[name]["runs"] = results  # the spread matters as much as the median here
    raw = summary["raw_read"]
    for method in METHODS[1:]:
        summary[method]["cold_vs_raw_read"] = summary[method]["cold_s"] / raw["cold_s"]
    summary["torch_load_over_from_pretrained"] = {
        state: summary["torch_load"][f"{state}_s"] / summary["from_pretrained"][f"{state}_s"]
        for state in ("cold", "warm")
    }
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
