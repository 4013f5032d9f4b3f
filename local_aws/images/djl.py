"""A stand-in for DJL Serving 0.29.0 around model.py: its Python package (`djl_python`) and
what its Java front end does with the handler's answers. The local LMI container
(local_aws/images/lmi_entrypoint.py) serves a bundle through it, and the inf2 tests drive the handler
with it (tests/inf2/lmi_driver.py); standard library only, so that it runs under the image's
pinned environments.

No `djl_python` distribution installs from PyPI (the package ships inside the DJL container),
and the front end is Java (its jars come from djl.ai, not from a registry this project may use);
this mirrors the behaviour read in deepjavalibrary/djl-serving at tag v0.29.0 (the image's),
file by file:

* engines/python/setup/djl_python/inputs.py and outputs.py: `Input` (batch properties
  ``batch_size`` and ``batch_NNN.<key>``, `get_batches`, `get_as_json`) and `Output` (`error`,
  `add_as_json`, `add_property`, `binary_encode`).
* engines/python/setup/djl_python_engine.py and service_loader.py: each call's properties get
  ``device_id``, ``cluster_size`` and ``model_dir``; an answer of None becomes 204, an
  exception a 424 error (507 for out-of-memory).
* engines/python/src/main/java/ai/djl/python/engine/PyProcess.java: the warm-up call is an
  Input without content whose properties are the model's init parameters, i.e. the
  ``option.*`` keys of serving.properties without their prefix (wlm ModelInfo.initialize),
  plus ``handler=handle``; an answer of 300 or more fails the load.
* PyPredictor.java (static batching, ``option.rolling_batch=disable``): the requests of a batch
  go to the handler as one Input with keys ``batch_000.`` ..; an answer of 300 or more goes to
  every request whole; otherwise each request gets the batch's code, message and every one of
  its properties, and the contents whose keys are ``batch_<i>.<key>``. A ``batch_<i>_<name>``
  property is read per request only in rolling-batch mode (RollingBatch.java); here it is just
  one more header of every response.
* serving/.../http/InferenceRequestHandler.java (sendOutput): the HTTP status is the Output's
  code, every property is a header, the body is the content named ``data`` or else the first.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: What djl_python_engine.py adds to every call's properties (non-MPI worker, one device).
ENGINE_PROPERTIES = {"device_id": "0", "cluster_size": 1}


class Input:
    def __init__(self, properties: dict[str, Any] | None = None, content: list[tuple[str, bytes]] | None = None):
        self.properties = dict(properties or {})
        self.content = [(key, bytearray(value)) for key, value in content or []]

    @classmethod
    def request(cls, body: Any, **properties: str) -> Input:
        """One HTTP request as the front end hands it over: headers as properties, the body as "data"."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return cls({"Content-Type": "application/json", **properties}, [("data", raw)])

    @classmethod
    def warm_up(cls, serving_properties: Mapping[str, str]) -> Input:
        """PyProcess.startPythonProcess's first call: no content, the init parameters as properties."""
        options = {k[len("option.") :]: v for k, v in serving_properties.items() if k.startswith("option.")}
        return cls({**options, "handler": "handle"})

    @classmethod
    def batch(cls, requests: Sequence[Any]) -> Input:
        """PyPredictor.batchPredict's merge of requests (bodies or Inputs) into one Input."""
        items = [r if isinstance(r, Input) else cls.request(r) for r in requests]
        merged = cls({"batch_size": str(len(items))})
        for i, item in enumerate(items):
            prefix = f"batch_{i:03d}."
            merged.properties.update({prefix + k: v for k, v in item.properties.items()})
            merged.content.extend((prefix + ("data" if k is None else k), v) for k, v in item.content)
        return merged

    def is_batch(self) -> bool:
        return "batch_size" in self.properties

    def get_batch_size(self) -> int:
        return int(self.properties.get("batch_size", "1"))

    def get_batches(self) -> list[Input]:
        if not self.is_batch():
            return [self]
        batch = [Input() for _ in range(self.get_batch_size())]
        for key, value in self.properties.items():
            if key.startswith("batch_") and key != "batch_size":
                batch[int(key[6:9])].properties[key[10:]] = value
        for key, value in self.content:
            batch[int(key[6:9])].content.append((key[10:], value))
        return batch

    def get_properties(self) -> dict[str, Any]:
        return self.properties

    def get_property(self, key: str) -> Any:
        return next((v for k, v in self.properties.items() if k.lower() == key.lower()), None)

    def is_empty(self) -> bool:
        return not self.content

    def get_as_bytes(self, key: str | None = None) -> bytearray | None:
        if not self.content:
            return None
        values = dict(reversed(self.content))  # PairList.get: the first entry of a key
        if key:
            if key not in values:
                raise KeyError(f"requested data for key:{key} is not found!")
            return values[key]
        return values.get("data", self.content[0][1])

    def get_as_json(self, key: str | None = None) -> Any:
        return json.loads(self.get_as_bytes(key=key).decode("utf-8"))  # type: ignore[union-attr]


class Output:
    def __init__(self, code: int = 200, message: str = "OK") -> None:
        self.code = code
        self.message = message
        self.properties: dict[str, str] = {}
        self.content: list[tuple[str | None, bytearray]] = []

    def error(self, error: str, code: int = 424, message: str = "prediction failure") -> Output:
        self.code = code
        self.message = message
        self.add_property("content-type", "application/json")
        self.add_as_json({"code": self.code, "message": self.message, "error": error})
        return self

    def add_property(self, key: str, val: str) -> Output:
        self.properties[key] = val
        return self

    def add(self, value: Any, key: str | None = None, batch_index: int | None = None) -> Output:
        if batch_index is not None:
            key = f"batch_{batch_index}.{'' if key is None else key}"
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif not isinstance(value, bytes | bytearray):
            value = self._encode_json(value)
        self.content.append((key, bytearray(value)))
        return self

    def add_as_json(self, val: Any, key: str | None = None, batch_index: int | None = None) -> Output:
        return self.add(self._encode_json(val), key=key, batch_index=batch_index)

    @staticmethod
    def _encode_json(val: Any) -> bytearray:
        return bytearray(json.dumps(val, ensure_ascii=False, allow_nan=False, indent=2, separators=(",", ":")).encode())

    def json(self, index: int = 0) -> Any:
        return json.loads(self.content[index][1])


# --- the engine and the Java front end -------------------------------------------------------


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def call_handler(handle: Callable[[Input], Any], inputs: Input, model_dir: str) -> Output:
    """djl_python_engine.run_server and ModelService.invoke_handler around one call."""
    inputs.properties.update(ENGINE_PROPERTIES)
    inputs.properties["model_dir"] = model_dir
    try:
        outputs = handle(inputs)
    except Exception as exc:
        logging.exception("Failed invoke service.invoke_handler()")
        if type(exc).__name__ in ("OutOfMemoryError", "MemoryError"):
            return Output(code=507, message=str(exc))
        return Output().error(str(exc))
    if outputs is None:
        return Output(code=204, message="No content")
    if not isinstance(outputs, Output):
        return Output().error(f"Invalid output type: {type(outputs)}")
    return outputs


class ModelLoadError(RuntimeError):
    """The warm-up answered 300 or more: DJL fails the model (PyProcess.predict, initialLoad);
    the reason is in the Python worker's log, which `output` stands in for."""

    def __init__(self, message: str, output: Output) -> None:
        super().__init__(message)
        self.output = output


def load(handle: Callable[[Input], Any], serving_properties: Mapping[str, str], model_dir: str) -> Output:
    output = call_handler(handle, Input.warm_up(serving_properties), model_dir)
    if output.code >= 300:
        raise ModelLoadError(f"Failed to initialize model: {output.message}", output)
    return output


def _http(output: Output) -> HttpResponse:
    data = next((v for k, v in output.content if k == "data"), output.content[0][1] if output.content else b"")
    return HttpResponse(output.code, dict(output.properties), bytes(data))


def predict(handle: Callable[[Input], Any], requests: Sequence[Any], model_dir: str) -> list[HttpResponse]:
    """The HTTP responses of requests (bodies or Inputs) that DJL's static batching sent to
    the handler together (PyPredictor.batchPredict, then sendOutput per request)."""
    items = [r if isinstance(r, Input) else Input.request(r) for r in requests]
    if len(items) == 1:
        return [_http(call_handler(handle, items[0], model_dir))]
    output = call_handler(handle, Input.batch(items), model_dir)
    if output.code >= 300:
        return [_http(output) for _ in items]
    if len(output.content) != len(items):
        raise AssertionError(f"Batch output size mismatch, expected: {len(items)}, actual: {len(output.content)}")
    split: list[Output] = []
    for _ in items:
        out = Output(output.code, output.message)
        out.properties = output.properties  # the same map for every request, as in Java
        split.append(out)
    for key, value in output.content:
        index, _, name = (key or "").partition(".")
        if not index.startswith("batch_") or not index[6:].isdigit():
            raise AssertionError(f"Unexpected batch output key: {key}")
        split[int(index[6:])].content.append((name, value))
    return [_http(out) for out in split]
