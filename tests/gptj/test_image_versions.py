"""The GPT-J payload as the Hugging Face image's own interpreter and libraries read it.

The image runs Python 3.12 with transformers 4.51.3 and tokenizers 0.21 (cdk.json's
gptj.transformers_version). ``.venv-hf312`` has that interpreter and every package of
``.venv-hf`` but torch (no CPU wheel for 3.12 here); the tokenizer and the configuration need
no torch, so a tokenizer.json or config.json that the image cannot read fails here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from project_config import from_cdk_json
from tests.gptj.helpers import FEW_SHOT, ROOT, SEED_PROMPT

PYTHON312 = ROOT / ".venv-hf312" / "bin" / "python"
READ = """
import json, sys, transformers, tokenizers
from transformers import AutoConfig, AutoTokenizer
folder, prompts = sys.argv[1], json.loads(sys.argv[2])
tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
config = AutoConfig.from_pretrained(folder, local_files_only=True)
ids = [tokenizer(p)["input_ids"] for p in prompts]
print(json.dumps({
    "python": list(sys.version_info[:2]), "transformers": transformers.__version__,
    "tokenizers": tokenizers.__version__, "tokenizer_class": type(tokenizer).__name__,
    "model_type": config.model_type, "n_positions": config.n_positions, "ids": ids,
    "decoded": [tokenizer.decode(i) for i in ids],
}))
"""


def test_payload_reads_the_same_under_the_image_interpreter(model_dir: Path) -> None:
    if not PYTHON312.exists():
        pytest.fail(f"{PYTHON312} is missing: `make .venv-hf312/.installed` (make test builds it)")
    prompts = [SEED_PROMPT, FEW_SHOT, "naïve café, 東京 ###"]
    proc = subprocess.run(
        [str(PYTHON312), "-c", READ, str(model_dir), json.dumps(prompts)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    there = json.loads(proc.stdout.strip().splitlines()[-1])
    assert there["python"] == [3, 12]
    assert there["transformers"] == from_cdk_json({"gptj.engine": "hf-toolkit"}).gptj.engine.transformers_version
    assert there["tokenizers"].startswith("0.21.")

    from transformers import AutoConfig, AutoTokenizer

    here = AutoTokenizer.from_pretrained(model_dir)
    assert there["ids"] == [here(p)["input_ids"] for p in prompts]
    assert there["decoded"] == prompts
    config = AutoConfig.from_pretrained(model_dir)
    assert (there["model_type"], there["n_positions"]) == (config.model_type, config.n_positions)
