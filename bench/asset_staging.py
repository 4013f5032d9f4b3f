"""What keeping a large payload out of ``cdk.out`` saves: synthesis time and disk, three ways.

A file of ``--size-gb`` (default 12, GPT-J 6B fp16's payload) is written once under
bench/results/asset_staging/ (not sparse: a 64 MiB random block repeated, so that every byte
is on disk). Then a bare app with one asset of that file, its hash given (as the manifest's
sha256 is), is synthesized in a fresh process, each way:

* ``model_asset``: ``ModelAsset``, staging off for that asset alone (what the stacks do);
* ``staged``: an ``s3_assets.Asset`` as CDK stages it by default: a copy in ``cdk.out``;
* ``hard_link``: the same asset, its staged file made beforehand as a hard link to the payload
  (CDK skips the copy of a staged file that exists).

Each reports the time the asset's construction took (where CDK copies a staged file), the
synthesis's wall time (the app's process, jsii's start included) and the disk ``cdk.out``
takes that nothing else holds (blocks of files with one link).

    .venv/bin/python -m bench.asset_staging [--size-gb 12] [--keep]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "results" / "asset_staging"
WAYS = ("model_asset", "staged", "hard_link")
SHA256 = "ab" * 32

# The app of one way, run in its own process: argv = way, payload, outdir.
_APP = f"""
import json, sys, time
from pathlib import Path
from aws_cdk import App, AssetHashType, CfnWaitConditionHandle, Stack
from aws_cdk import aws_s3_assets as s3_assets
from llm_inference_cdk import ModelAsset

way, payload, outdir = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
sha = "{SHA256}"
stack = Stack(App(outdir=outdir), "Payload")
CfnWaitConditionHandle(stack, "Nothing")  # a template needs a resource
started = time.monotonic()
if way == "model_asset":
    ModelAsset(stack, "Model", path=payload, entry={{"sha256": sha}})
else:
    s3_assets.Asset(stack, "Model", path=str(payload), asset_hash=sha, asset_hash_type=AssetHashType.CUSTOM)
staging = time.monotonic() - started
stack.node.root.synth()
print(json.dumps({{"staging_s": staging}}))
"""


def write_payload(path: Path, size_gb: float) -> None:
    block = os.urandom(64 * 2**20)
    left = int(size_gb * 2**30)
    with path.open("wb") as f:
        while left > 0:
            f.write(block[: min(left, len(block))])
            left -= len(block)
        f.flush()
        os.fsync(f.fileno())


def own_bytes(folder: Path) -> int:
    """Disk that `folder` alone holds: blocks of its files with no other link."""
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file() and p.stat().st_nlink == 1)


def synthesize(way: str, payload: Path, outdir: Path) -> tuple[float, float]:
    shutil.rmtree(outdir, ignore_errors=True)
    outdir.mkdir(parents=True)
    if way == "hard_link":
        # The staged name CDK gives a custom-hash file asset: asset.<sha256 of the hash><ext>.
        staged = hashlib.sha256(SHA256.encode()).hexdigest()
        os.link(payload, outdir / f"asset.{staged}{payload.suffix}")
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _APP, way, str(payload), str(outdir)],
        check=True, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    seconds = time.monotonic() - started
    return json.loads(done.stdout.strip().splitlines()[-1])["staging_s"], seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=12.0)
    parser.add_argument("--keep", action="store_true", help="keep the payload for the next run")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    payload = WORK / "payload.safetensors"
    if not payload.exists() or payload.stat().st_size != int(args.size_gb * 2**30):
        started = time.monotonic()
        write_payload(payload, args.size_gb)
        print(f"wrote {payload} ({args.size_gb} GB) in {time.monotonic() - started:.1f} s", flush=True)
    results = {}
    try:
        for way in WAYS:
            outdir = WORK / f"cdk.out-{way}"
            staging, seconds = synthesize(way, payload, outdir)
            assets = json.loads((outdir / "Payload.assets.json").read_text())["files"]
            (source,) = [a["source"]["path"] for a in assets.values() if a["source"]["path"] != "Payload.template.json"]
            results[way] = {
                "staging_s": round(staging, 2),
                "synth_s": round(seconds, 2),
                "cdk_out_bytes": own_bytes(outdir),
                "published_from": source,
            }
            print(json.dumps({way: results[way]}), flush=True)
            shutil.rmtree(outdir)
    finally:
        if not args.keep:
            payload.unlink(missing_ok=True)
    summary = {"size_gb": args.size_gb, "cpu": platform.processor() or platform.machine(), "results": results}
    (WORK / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
