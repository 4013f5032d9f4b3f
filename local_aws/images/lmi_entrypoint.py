"""DJL Serving 0.29.0 of the LMI neuronx image, as the local AWS runs it under ``.venv-lmi``.

The image (djl-serving ``serving/docker/pytorch-inf2.Dockerfile`` at tag v0.29.0) starts DJL
Serving, a Java front end with one Python worker per copy of the model, on
``/opt/ml/model``. Its jars come from djl.ai, not from a registry this project may use, so this
file stands in for the front end, following what djl-serving's Java code does (each rule names
its file at that tag):

* **Configuration** (wlm ``ModelInfo``, ``Utils.getEnvOrSystemProperty``): ``serving.properties``
  of the model folder, over which every ``OPTION_<NAME>`` variable of the environment sets
  ``option.<name>`` (lower case), as SageMaker users configure the image.
* **Loading** (``ModelServer.loadModels``, ``PyProcess.startPythonProcess``): the Python worker
  imports ``model.py`` of the model folder as the module ``model`` and calls its ``handle`` with
  the warm-up input (the ``option.*`` keys without their prefix); an answer of 300 or more fails
  the model, and the server stops. DJL opens its port only once every copy is loaded
  (``wait_model_loading``), so ``/ping`` gets no answer at all while the model loads. Here one
  copy is loaded: there are no NeuronCores to divide.
* **Requests** (``InferenceRequestHandler``): ``GET /ping`` answers 200 once loaded;
  ``POST /invocations`` and ``POST /predictions/<model>`` go to the model. With
  ``option.rolling_batch=disable``, requests are batched as ``batch_size`` and
  ``max_batch_delay`` (milliseconds) say (``wlm/WorkerPool``, ``BatchAggregator``): a batch
  leaves when it is full or when its first request has waited the delay, and goes to the
  handler as one input (``PyPredictor.batchPredict``; local_aws/images/djl.py mirrors what the front
  end then does with the answer).
* **Overload** (``WorkLoadManager.runJob``, ``InferenceRequestHandler.onException``,
  ``NettyUtils.sendError``): requests wait in the model's job queue, of ``job_queue_size``
  (serving.properties, else the server's, which ``SERVING_JOB_QUEUE_SIZE`` sets; 1000 by
  default: serving/docs/configurations_model.md); one that finds it full, or finds one place left while
  the worker is busy, is refused at once with 503 and
  ``{"code": 503, "type": "WlmCapacityException", "message": "Worker queue capacity exceeded for
  model: <name>"}``.

Neuron itself is replaced by local_aws/images/neuronx_cpu.py (transformers-neuronx's calls, on the
CPU). What differs from the image, and why it cannot matter to a bundle that works here:

* the model folder is ``$SAGEMAKER_BASE_DIR/model``, and a ``serving.properties`` path under
  ``/opt/ml`` (the builder's ``option.model_id=/opt/ml/model/model``) is read under
  ``$SAGEMAKER_BASE_DIR``: the image sees the same files at ``/opt/ml``;
* the port is ``SAGEMAKER_BIND_TO_PORT`` (SageMaker gives the image 8080 in its own network);
* a call past ``option.predict_timeout`` is not killed (DJL restarts the worker and loads the
  copy again): the handler keeps every call inside it (tests/inf2 prove that on its core);
* only the bundle's ``model.py`` is served: the image's own handlers
  (``djl_python.transformers_neuronx``) are part of the image, which is not here.

Standard library at import, the image's torch and transformers inside the neuronx stand-in: it
runs under ``.venv-lmi`` (local_aws/sagemaker/lmi_container.py starts it), never this project's venv.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Mapping
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: Where the image sees its model data and SageMaker's other folders.
CONTAINER_BASE = "/opt/ml"
#: DJL's limit on a request body (``max_request_size``, ConfigManager: 64 MiB); SageMaker's
#: front end already refuses more than 6 MB.
MAX_REQUEST_BYTES = 64 * 1024 * 1024
#: DJL's job queue per model (WlmConfigManager's default ``job_queue_size``).
JOB_QUEUE_SIZE = 1000


class QueueFull(Exception):
    """DJL's WlmCapacityException: the model's job queue holds no more."""


def log(message: str) -> None:
    print(f"lmi_entrypoint: {message}", file=sys.stderr, flush=True)


def load_file(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def read_properties(model_dir: Path, env: Mapping[str, str]) -> dict[str, str]:
    """``serving.properties`` with the ``OPTION_*`` variables over it (``key=value`` lines,
    ``#`` comments, as java.util.Properties reads this simple form)."""
    path = model_dir / "serving.properties"
    props: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "!")) and "=" in line:
                key, _, value = line.partition("=")
                props[key.strip()] = value.strip()
    for key, value in env.items():
        if key.startswith("OPTION_") and len(key) > len("OPTION_"):
            props["option." + key[len("OPTION_") :].lower()] = value
    return props


def localize(props: Mapping[str, str], base: Path) -> dict[str, str]:
    """Paths under the image's /opt/ml, read under this container's base folder instead."""
    prefix = CONTAINER_BASE + "/"
    return {k: str(base / v[len(prefix) :]) if v.startswith(prefix) else v for k, v in props.items()}


def _int(props: Mapping[str, str], key: str, default: int) -> int:
    try:
        return max(int(props.get(key, default)), 0)
    except ValueError:
        raise SystemExit(f"{key}={props[key]!r} (serving.properties or environment) is not a whole number") from None


class Batcher:
    """DJL's static batching for one worker: requests queue (at most `queue_size`), and a batch
    of at most `batch_size` leaves when full or `delay_s` after its first request arrived."""

    def __init__(self, predict: Any, *, batch_size: int, delay_s: float, queue_size: int = JOB_QUEUE_SIZE) -> None:
        self.predict = predict
        self.batch_size = max(batch_size, 1)
        self.delay_s = delay_s
        self.requests: queue.Queue[tuple[Any, Future[Any]] | None] = queue.Queue(maxsize=max(queue_size, 1))
        #: The worker is running a batch (DJL's isAllWorkerBusy, for its one worker).
        self.busy = False
        self._submitting = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="djl-worker", daemon=True)
        self.thread.start()

    def submit(self, request: Any) -> Future[Any]:
        """The request's answer to come; QueueFull as WorkLoadManager.runJob refuses it: no
        place left, or the last one while the worker is busy."""
        future: Future[Any] = Future()
        with self._submitting:
            left = self.requests.maxsize - self.requests.qsize()
            if left <= 0 or (left == 1 and self.busy):
                raise QueueFull
            self.requests.put_nowait((request, future))
        return future

    def close(self) -> None:
        self.requests.put(None)

    def _run(self) -> None:
        while True:
            first = self.requests.get()
            if first is None:
                return
            batch = [first]
            deadline = time.monotonic() + self.delay_s
            while len(batch) < self.batch_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    item = self.requests.get(timeout=remaining)
                except queue.Empty:
                    break
                if item is None:
                    self.requests.put(None)
                    break
                batch.append(item)
            self.busy = True
            try:
                answers = self.predict([request for request, _ in batch])
            except Exception as exc:  # the front end answers every request of a failed batch
                traceback.print_exc()
                for _, future in batch:
                    future.set_exception(exc)
                continue
            finally:
                self.busy = False
            for (_, future), answer in zip(batch, answers, strict=True):
                future.set_result(answer)


#: DJL's answer to a path it does not serve (InferenceRequestHandler, ResourceNotFoundException).
NOT_FOUND = {"code": 404, "type": "ResourceNotFoundException",
             "message": "Requested resource is not found, please refer to API document."}  # fmt: skip


class FrontEnd(BaseHTTPRequestHandler):
    """DJL's HTTP front end for one model; `batcher`, `djl` and `model_name` are set on the
    subclass :func:`front_end` makes."""

    protocol_version = "HTTP/1.1"
    server_version = "DJL-stand-in"
    batcher: Batcher
    djl: types.ModuleType
    model_name: str

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(key, value)
        if "content-type" not in {k.lower() for k in headers}:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode(), {"Content-Type": "application/json"})

    def do_GET(self) -> None:
        if self.path.split("?")[0] == "/ping":
            # ModelServer's ping: every model's status, 200 when all are ready (the port opens
            # only then).
            self._json(200, {self.model_name: "Healthy"})
        else:
            self._json(404, NOT_FOUND)

    def do_POST(self) -> None:
        if self.path.split("?")[0] not in ("/invocations", f"/predictions/{self.model_name}"):
            self._json(404, NOT_FOUND)
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BYTES:
            self.close_connection = True
            self._json(413, {"code": 413, "type": "TooLongFrameException", "message": "request body too large"})
            return
        request = self.djl.Input.request(self.rfile.read(length), **dict(self.headers.items()))
        try:
            answered = self.batcher.submit(request)
        except QueueFull:
            message = f"Worker queue capacity exceeded for model: {self.model_name}"
            self._json(503, {"code": 503, "type": "WlmCapacityException", "message": message})
            return
        try:
            answer = answered.result()
        except Exception as exc:
            self._json(500, {"code": 500, "type": "InternalServerException", "message": str(exc)})
            return
        self._send(answer.status, answer.body, answer.headers)


def front_end(batcher: Batcher, djl: types.ModuleType, model_name: str) -> type[FrontEnd]:
    return type("ModelFrontEnd", (FrontEnd,), {"batcher": batcher, "djl": djl, "model_name": model_name})


def main() -> int:
    env = os.environ
    base = Path(env.get("SAGEMAKER_BASE_DIR", CONTAINER_BASE))
    model_dir = base / "model"
    port = int(env.get("SAGEMAKER_BIND_TO_PORT", "8080"))
    props = localize(read_properties(model_dir, env), base)
    if props.get("engine", "Python") != "Python":
        log(f"serving.properties engine={props['engine']!r}: only the Python engine is served here")
        return 1
    entry = props.get("option.entryPoint", "model.py")
    if entry != "model.py":
        log(f"option.entryPoint={entry!r} is one of the image's own handlers, which are not here: only the "
            "bundle's model.py is served by the local AWS")  # fmt: skip
        return 1
    if not (model_dir / "model.py").is_file():
        log(f"{model_dir / 'model.py'} is missing: the bundle has no handler")
        return 1
    djl = load_file("djl_python", HERE / "djl.py")
    load_file("neuronx_cpu", HERE / "neuronx_cpu.py").install([])
    # The image sets PREDICT_TIMEOUT (pytorch-inf2.Dockerfile); model.py reads it.
    os.environ.setdefault("PREDICT_TIMEOUT", "240")
    sys.path.insert(0, str(model_dir))
    started = time.monotonic()
    try:
        handler = load_file("model", model_dir / "model.py")
        djl.load(handler.handle, props, str(model_dir))
    except Exception as exc:
        output = getattr(exc, "output", None)
        detail = output.content[0][1].decode(errors="replace") if output is not None and output.content else ""
        log(f"the model failed to load, the server stops: {exc} {detail}".strip())
        return 1
    log(f"model loaded in {time.monotonic() - started:.1f} s")
    batching = props.get("option.rolling_batch", "disable") == "disable"
    batcher = Batcher(
        lambda requests: djl.predict(handler.handle, requests, str(model_dir)),
        batch_size=_int(props, "batch_size", 1) if batching else 1,
        delay_s=_int(props, "max_batch_delay", 100) / 1000,
        # The model's own size, else the server's (ConfigManager reads SERVING_* variables as its
        # properties).
        queue_size=_int(props, "job_queue_size", _int(env, "SERVING_JOB_QUEUE_SIZE", JOB_QUEUE_SIZE)),
    )
    server = ThreadingHTTPServer(("127.0.0.1", port), front_end(batcher, djl, model_dir.name))
    server.daemon_threads = True

    def stop(signum: int, frame: Any) -> None:
        log(f"signal {signum}: stopping")
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log(f"listening on 127.0.0.1:{port}")
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        batcher.close()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
