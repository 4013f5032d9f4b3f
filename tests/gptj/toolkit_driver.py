"""Serve requests through the Hugging Face inference toolkit, in process, as its model server
worker does. Runs under the environment pinned to the container (.venv-hf), started by the
tests as a subprocess because that environment's transformers (4.x) cannot share a process
with the project's (5.x).

stdin: ``{"scenarios": [{"model_dir": ..., "requests": [{"body": ..., "content_type": ...,
"accept": ...}]}]}``; stdout (last line): ``{"versions": {...}, "scenarios": [{"load_error":
str|None, "responses": [{"code": int, "message": str, "body": str|None}]}]}``.

The path is the one MMS takes: ``MmsModelLoader.load`` imports the toolkit's handler service
(which imports ``code/inference.py``) and calls ``initialize``; each request goes through
``Service.predict``, whose wire response carries the HTTP status the endpoint would answer.
"""

from __future__ import annotations

import io
import json
import logging
import os
import struct
import sys
from typing import Any

HANDLER = "sagemaker_huggingface_inference_toolkit.handler_service"


class _LoadErrors(logging.Handler):
    """MMS logs an exception from `initialize` and carries on; keep it for the report."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _decode(response: bytes) -> dict[str, Any]:
    """The worker's binary response (mms.protocol.otf_message_handler.create_predict_response)."""
    stream = io.BytesIO(response)

    def integer() -> int:
        return int(struct.unpack("!i", stream.read(4))[0])

    def text() -> str:
        return stream.read(integer()).decode("utf-8")

    code, message = integer(), text()
    text()  # request id
    text()  # content type
    http_code = integer()
    text()  # reason phrase
    for _ in range(integer()):
        text(), text()  # response headers
    body = text()
    return {"code": http_code if code == 200 else code, "message": message, "body": body if code == 200 else None}


def main() -> int:
    import torch
    import transformers
    from mms.model_loader import MmsModelLoader

    spec = json.loads(sys.stdin.read())
    os.environ.setdefault("HF_TASK", "text-generation")
    os.environ.setdefault("SAGEMAKER_PROGRAM", "inference.py")
    errors = _LoadErrors()
    logging.getLogger().addHandler(errors)
    results = []
    for scenario in spec["scenarios"]:
        errors.messages.clear()
        # Each scenario is a fresh worker: the user module is imported anew from its code/ folder.
        sys.modules.pop("inference", None)
        sys.modules.pop(HANDLER, None)
        service = MmsModelLoader().load("model", scenario["model_dir"], HANDLER, None, 1)
        load_error = "\n".join(errors.messages) or None
        responses = []
        for i, request in enumerate(scenario["requests"]):
            headers = [{"name": b"Content-Type", "value": request.get("content_type", "application/json").encode()}]
            if request.get("accept"):
                headers.append({"name": b"Accept", "value": request["accept"].encode()})
            batch = [
                {
                    "requestId": str(i).encode(),
                    "parameters": [
                        {
                            "name": "body",
                            "contentType": request.get("content_type", "application/json"),
                            "value": request["body"].encode("utf-8"),
                        }
                    ],
                    "headers": headers,
                }
            ]
            responses.append(_decode(bytes(service.predict(batch))))
        results.append({"load_error": load_error, "responses": responses})
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    print(json.dumps({"versions": versions, "scenarios": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
