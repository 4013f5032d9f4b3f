"""/ping turns 503 when the model keeps failing to generate (issue 16 item 5), through the real
`serve`, with a real failure: a payload whose tokenizer has a token the model does not (added
after the build, its manifest hashed again), so that ONNX Runtime refuses every input holding it
(its embedding has no row for that id) and serves every other input."""

from __future__ import annotations

import hashlib
import json
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from serving.gpt2.health import POLL_S
from serving.gpt2.local import LocalServer, ping

POISON = "<|not-in-the-model|>"


def payload_with_a_foreign_token(model_tar: Path, folder: Path) -> Path:
    with tarfile.open(model_tar) as tar:
        tar.extractall(folder, filter="data")
    tokenizer = folder / "tokenizer" / "tokenizer.json"
    vocab_size = json.loads((folder / "generation.json").read_text())["vocab_size"]
    data = json.loads(tokenizer.read_text())
    data["added_tokens"].append({"id": vocab_size, "content": POISON, "single_word": False, "lstrip": False,
                                 "rstrip": False, "normalized": False, "special": True})  # fmt: skip
    tokenizer.write_text(json.dumps(data))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["tokenizer/tokenizer.json"]["sha256"] = hashlib.sha256(tokenizer.read_bytes()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def ping_becomes(port: int, status: int, timeout: float = 60) -> dict[str, Any]:
    """/ping's body once it answers `status` (serve folds the workers' states every 100 ms)."""
    # clock: a generous wait for a change that shows within 100 ms here; it only fails a /ping
    # that never changes.
    deadline = time.monotonic() + timeout
    while (answer := ping(port))[0] != status:
        assert time.monotonic() < deadline, f"/ping still answers {answer}"  # clock: the same wait
        time.sleep(0.05)
    return answer[1]


def test_ping_is_503_after_generations_keep_failing(
    model_tar: Path, tmp_path: Path, free_port: Callable[[], int]
) -> None:
    model_dir = payload_with_a_foreign_token(model_tar, tmp_path / "model")
    env = {"GPT2_BACKEND": "onnxruntime", "GPT2_UNHEALTHY_AFTER_FAILURES": "3", "GPT2_MAX_QUEUE_DELAY_US": "0"}
    bad, good = {"input": f"amazon {POISON}"}, {"input": "amazon", "parameters": {"max_new_tokens": 2}}
    with LocalServer(model_dir=model_dir, port=free_port(), env=env) as srv:
        srv.wait_ready(timeout=90)
        # Failures that a success interrupts never add up.
        for _ in range(2):
            status, body = srv.invoke(bad)
            assert (status, body["error"]["code"]) == (500, "generation_failed"), body
        assert srv.invoke(good)[0] == 200
        for _ in range(2):
            assert srv.invoke(bad)[0] == 500
        time.sleep(3 * POLL_S)  # a change of state would show in /ping by now
        assert ping(srv.port)[0] == 200
        # The third in a row: the container is unhealthy, and says why.
        assert srv.invoke(bad)[0] == 500
        body = ping_becomes(srv.port, 503)
        assert (body["status"], body["error"]["code"]) == ("unhealthy", "generation_failing")
        assert "the last 3 generations failed" in body["error"]["message"]
        assert "GPT2_UNHEALTHY_AFTER_FAILURES=3" in body["error"]["message"]
        # Requests are still tried; one that succeeds makes it ready again.
        assert srv.invoke(good)[0] == 200
        assert ping_becomes(srv.port, 200)["status"] == "ready"
        # Client errors are not the model's: any number of them leaves it healthy.
        for _ in range(5):
            assert srv.invoke({"input": ""})[0] == 400
        time.sleep(3 * POLL_S)
        assert ping(srv.port)[0] == 200
