"""Command line: ``python -m artifacts_builder {gpt2,gptj,llm,inf2,lora,all} [options]``.

Each component lives in its own module with ``add_arguments(parser)`` and
``run(args) -> int``; modules (and torch with them) are imported only when chosen.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

# The components read the app's configuration, which loads the AWS CDK's jsii runtime: under Node 20
# it prints an end-of-life banner on every start (app.py says why it is left out).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

COMPONENTS = {
    "gpt2": "GPT-2: ONNX export, TensorRT engine where a GPU is present, parity gate, model.tar.gz",
    "gptj": "GPT-J: fp16 safetensors shards, tokenizer, code/inference.py and payload-manifest.json in "
    "<out>/gptj/model/, which the stack ships uncompressed (--tarball also packs model.tar.gz)",
    "llm": "any causal language model the vLLM engine serves: safetensors shards, tokenizer, config and "
    "payload-manifest.json in <out>/llm/model/",
    "inf2": "OPT on inf2: serving.properties, model.py and requirements for DJL Serving",
    "lora": "a LoRA adapter for the llm payload: checked against it, packed as an adapter inference component's "
    ".tar.gz in <out>/llm/adapters/",
}
#: What `all` builds: the three recipes (an llm payload is built for the model you name).
ALL = ("gpt2", "gptj", "inf2")


def _module(name: str):  # type: ignore[no-untyped-def]
    return importlib.import_module(f"artifacts_builder.{name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m artifacts_builder",
        description="Build, check and package the model payloads, and write their manifests.",
    )
    sub = parser.add_subparsers(dest="component", required=True, metavar="{" + ",".join([*COMPONENTS, "all"]) + "}")
    for name, help_text in COMPONENTS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        _module(name).add_arguments(p)
    p = sub.add_parser("all", help=f"{', '.join(ALL)}, each with its defaults")
    p.add_argument("--tiny", action="store_true", help="tiny random-weight models built offline (tests, demo)")
    p.add_argument("--out", type=Path, default=Path("artifacts"), help="output folder (default: artifacts)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.component != "all":
        return int(_module(args.component).run(args))
    for name in ALL:
        sub_args = parser.parse_args([name, "--out", str(args.out), *(["--tiny"] if args.tiny else [])])
        code = int(_module(name).run(sub_args))
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
