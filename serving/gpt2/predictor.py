"""The WSGI application: ``GET /ping``, ``POST /invocations`` and ``GET /openapi.json``.

The model loads in a background thread so that nginx and gunicorn answer at once; ``/ping``
is 200 only after the model is loaded, checked against its manifest and warmed up (503
before). Under ``serve`` nginx answers ``/ping`` from the state each worker writes when it
changes (health.py), so that no request can delay it; the route here serves the app run alone.
Every answer is JSON. Input problems are 4xx; a request thread never lets an exception
escape, so a bad request cannot take the worker down. An internal failure is a 500 JSON error
with no traceback, and only for the request that caused it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from serving.gpt2.api import (
    MAX_PAYLOAD_BYTES,
    ApiError,
    GenerationRequest,
    check_content_type,
    completion_budget,
    decode_body,
    describe,
    max_prompt_chars,
    parse_request,
)
from serving.gpt2.batching import BatchResult, DeadlineExceeded, DynamicBatcher, GenerationFailed, Job, QueueFull
from serving.gpt2.generation import TOKENIZER_DIR, Backend, ModelInfo
from serving.gpt2.health import WorkerHealth
from serving.gpt2.settings import ServerSettings, from_environment
from serving.gpt2.streaming import STREAM_HEADERS, TokenStream

log = logging.getLogger("gpt2.predictor")

OPENAPI = Path(__file__).with_name("openapi.json")
StartResponse = Callable[[str, list[tuple[str, str]]], Any]
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large",
           415: "Unsupported Media Type", 500: "Internal Server Error", 503: "Service Unavailable"}  # fmt: skip


class ModelDirError(RuntimeError):
    pass


def verify_model_dir(model_dir: Path) -> dict[str, Any]:
    """Check every file against the sha256 in the payload's manifest before anything is
    loaded: a truncated download or an altered file stops the start with its name."""
    path = model_dir / "manifest.json"
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise ModelDirError(
            f"{path} is missing: {model_dir} was not built by `python -m artifacts_builder gpt2`"
        ) from None
    for name, entry in manifest["files"].items():
        try:
            with open(model_dir / name, "rb") as f:
                digest = hashlib.file_digest(f, "sha256").hexdigest()
        except FileNotFoundError:
            raise ModelDirError(f"{model_dir / name} is listed in {path} but missing") from None
        if digest != entry["sha256"]:
            raise ModelDirError(f"{model_dir / name} has sha256 {digest}, {path} says {entry['sha256']}: refusing it")
    return manifest


class Tokenizer:
    """The payload's `tokenizer.json` through `tokenizers` alone (transformers is not needed to serve)."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer as Fast

        self._tok = Fast.from_file(str(folder / "tokenizer.json"))
        #: The most characters of text one token stands for: a byte-level token's string has one
        #: character per byte, and a byte is at least a character; an added token is its text.
        #: None when a normalizer could shrink the text first (GPT-2's tokenizer has none).
        self.max_token_chars: int | None = None
        if self._tok.normalizer is None:
            self.max_token_chars = max(len(token) for token in self._tok.get_vocab(with_added_tokens=True))

    def encode(self, text: str) -> list[int]:
        return self.encode_all([text])[0]

    def encode_all(self, texts: list[str]) -> list[list[int]]:
        # The batch call releases the GIL while it works; `encode` holds it (a 6 MB input held
        # every thread of the worker, /ping included, for 10 s).
        return [list(encoding.ids) for encoding in self._tok.encode_batch_fast(texts)]

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids))


class Predictor:
    def __init__(self, settings: ServerSettings, health: WorkerHealth | None = None) -> None:
        """`health`: where this worker's state goes for nginx's /ping (under `serve`)."""
        self.settings = settings
        self.state = "loading"
        self.error = ""
        self.info: ModelInfo | None = None
        self.backend: Backend | None = None
        self.tokenizer: Tokenizer | None = None
        self.batcher: DynamicBatcher | None = None
        self.max_rows = 0
        self.health = health
        #: Generations failed since the last that succeeded; past the setting, /ping says unhealthy.
        self.failures = 0
        self._failures_lock = threading.Lock()
        self._publish()

    def _publish(self) -> None:
        """Tell nginx's /ping this worker's state (health.py): a state change calls this."""
        if self.health is not None:
            status, body, _ = self.ping()
            self.health.write(status, body)

    # -- loading ------------------------------------------------------------------------
    def start(self) -> None:
        threading.Thread(target=self._load_guarded, name="model-loader", daemon=True).start()

    def _load_guarded(self) -> None:
        try:
            self.load()
        except Exception as exc:
            log.exception("model failed to load")
            self.error, self.state = f"{type(exc).__name__}: {exc}", "failed"
            self._publish()

    def load(self) -> None:
        from serving.gpt2.backends import create_backend

        started = time.monotonic()
        model_dir = self.settings.model_dir
        verify_model_dir(model_dir)
        info = ModelInfo.load(model_dir)
        max_rows = self.settings.max_batch_size or info.max_batch_size
        if max_rows > info.max_batch_size:
            raise ModelDirError(
                f"GPT2_MAX_BATCH_SIZE={max_rows} exceeds the {info.max_batch_size} the model was built for; "
                f"rebuild with --max-batch-size {max_rows} or lower the setting"
            )
        self.tokenizer = Tokenizer(model_dir / TOKENIZER_DIR)
        backend = create_backend(
            self.settings.backend,
            model_dir,
            info,
            threads=self.settings.threads,
            engine_cache=self.settings.engine_cache,
            require_gpu=self.settings.require_gpu,
        )
        # Warm-up at both ends of the batch range: first-call allocations, kernel choice and
        # CUDA-graph capture happen here, not in a client's request.
        from serving.gpt2.generation import SamplingParams

        for rows in sorted({1, max_rows}):
            backend.generate([[info.eos_token_id]] * rows, [SamplingParams(max_new_tokens=2)] * rows)
        self.batcher = DynamicBatcher(
            backend,
            max_batch_size=max_rows,
            max_queue_delay_s=self.settings.max_queue_delay_us / 1e6,
            max_queue_rows=max(self.settings.max_queue_size, max_rows),
            max_total_length=info.max_total_length,
        )
        self.info, self.backend, self.max_rows = info, backend, max_rows
        self.state = "ready"
        self._publish()
        log.info(
            "model %s ready on backend %s in %.1f s (max batch %d, queue delay %d us)",
            info.model,
            backend.name,
            time.monotonic() - started,
            max_rows,
            self.settings.max_queue_delay_us,
        )

    # -- requests -----------------------------------------------------------------------
    def ping(self) -> tuple[int, dict[str, Any], dict[str, str]]:
        if self.state == "ready":
            assert self.backend is not None and self.info is not None
            return 200, {"status": "ready", "backend": self.backend.name, "model": self.info.model}, {}
        if self.state == "failed":
            return 503, {"status": "failed", "error": {"code": "model_failed", "message": self.error}}, {}
        if self.state == "unhealthy":
            return 503, {"status": "unhealthy", "error": {"code": "generation_failing", "message": self.error}}, {}
        return 503, {"status": "loading"}, {"Retry-After": "5"}

    def _generation_done(self, failure: BaseException | None) -> None:
        """Count the generations that fail in a row: past unhealthy_after_failures the worker is
        unhealthy (/ping 503), and the next one that succeeds makes it ready again. Requests are
        still served meanwhile: only a success can show that the model works again."""
        limit = self.settings.unhealthy_after_failures
        with self._failures_lock:
            self.failures = 0 if failure is None else self.failures + 1
            if failure is not None and self.failures >= limit and self.state == "ready":
                self.error = (
                    f"the last {self.failures} generations failed one after another (the last with "
                    f"{type(failure.__cause__ or failure).__name__}; the server log has each one): "
                    f"GPT2_UNHEALTHY_AFTER_FAILURES={limit}"
                )
                self.state = "unhealthy"
                log.error("unhealthy: %s", self.error)
            elif failure is None and self.state == "unhealthy":
                self.error, self.state = "", "ready"
                log.warning("a generation succeeded after failures: ready again")
            else:
                return
            self._publish()

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI description with this server's limits (before the model is loaded: the
        file as it is, without the limits that depend on the model)."""
        template: dict[str, Any] = json.loads(OPENAPI.read_text())
        if self.state not in ("ready", "unhealthy"):
            return template
        assert self.info is not None and self.tokenizer is not None
        limits = {
            "max_rows": self.max_rows,
            "max_new_tokens": self.info.max_total_length - 1,
            "vocab_size": self.info.vocab_size,
            "max_prompt_chars": max_prompt_chars(self.info, self.tokenizer.max_token_chars),
        }
        return describe(template, limits)

    def _not_ready(self) -> ApiError:
        if self.state == "failed":
            return ApiError(503, "model_failed", f"the model failed to load: {self.error}")
        return ApiError(
            503, "loading", "the model is still loading: retry when GET /ping answers 200", {"Retry-After": "5"}
        )

    def _prepare(self, content_type: str | None, body: bytes) -> tuple[GenerationRequest, Job, list[int]]:
        """The request checked, tokenized and fitted to the model: its job and prompt lengths."""
        if self.state not in ("ready", "unhealthy"):
            raise self._not_ready()
        assert self.info is not None and self.tokenizer is not None and self.batcher is not None
        info, tokenizer = self.info, self.tokenizer
        check_content_type(content_type)
        max_chars = max_prompt_chars(info, tokenizer.max_token_chars)
        request = parse_request(decode_body(body, self.max_rows), info, self.max_rows, max_chars)
        prompts, params, prompt_lengths = [], [], []
        for i, ids in enumerate(tokenizer.encode_all(request.prompts)):
            where = "input" if len(request.prompts) == 1 else f"inputs[{i}]"
            budget = completion_budget(len(ids), request.max_new_tokens, info, where)
            prompt_lengths.append(len(ids))
            for _ in range(request.num_return_sequences):
                prompts.append(ids)
                params.append(request.params(budget))
        stop_strings = request.stop
        # A character is at most 4 UTF-8 bytes and a token at least one: this tail covers any match.
        tail = 4 * max((len(s) for s in stop_strings), default=0) + 2

        def stop(_row: int, tokens: list[int]) -> bool:
            text = tokenizer.decode(tokens[-tail:])
            return any(s in text for s in stop_strings)

        deadline = time.monotonic() + self.settings.request_timeout_s
        job = Job(prompts=prompts, params=params, deadline=deadline, stop=stop if stop_strings else None)
        return request, job, prompt_lengths

    def _submit(self, job: Job) -> Future[BatchResult]:
        assert self.batcher is not None
        try:
            return self.batcher.submit(job)
        except QueueFull as exc:
            raise ApiError(
                503, "overloaded", f"the server is at capacity ({exc}): retry shortly", {"Retry-After": "1"}
            ) from None

    def _timed_out(self, job: Job) -> ApiError:
        """Give up on `job` (it leaves the queue at once) and the 503 that says so."""
        assert self.batcher is not None
        job.future.cancel()
        self.batcher.withdraw(job)
        return ApiError(
            503,
            "timeout",
            f"no answer within {self.settings.request_timeout_s:.0f} s (the server is overloaded): retry shortly",
            {"Retry-After": "1"},
        )

    def _failed(self, exc: GenerationFailed) -> ApiError:
        self._generation_done(exc)
        # The log has the exception and its traceback; the client gets neither.
        return ApiError(
            500,
            "generation_failed",
            f"{exc} while generating this request (requests batched with it are not affected); "
            "the server log has the details",
        )

    def invoke(self, content_type: str | None, body: bytes) -> dict[str, Any] | TokenStream:
        """The answer: a document, or (``"stream": true``) the stream of one completion's tokens,
        whose first token (or end) has come: an error before it is still a status."""
        request, job, prompt_lengths = self._prepare(content_type, body)
        if request.stream:
            return self._stream(request, job, prompt_lengths[0])
        future = self._submit(job)
        try:
            result = future.result(timeout=max(0.0, job.deadline - time.monotonic()))
        except (FutureTimeout, DeadlineExceeded):
            raise self._timed_out(job) from None
        except GenerationFailed as exc:
            raise self._failed(exc) from None
        self._generation_done(None)
        return self._document(request, result, prompt_lengths)

    def _stream(self, request: GenerationRequest, job: Job, prompt_tokens: int) -> TokenStream:
        assert self.tokenizer is not None and self.info is not None and self.backend is not None
        stream = TokenStream(self.tokenizer, request.stop, job)
        stream.bind(
            job,
            self.batcher,
            on_result=self._generation_done,
            end={"prompt_tokens": prompt_tokens, "model": self.info.model, "backend": self.backend.name},
            idle_timeout_s=self.settings.request_timeout_s,
        )
        future = self._submit(job)
        future.add_done_callback(stream.on_done)
        try:
            stream.wait_first(max(0.0, job.deadline - time.monotonic()))
        except (FutureTimeout, DeadlineExceeded):
            stream.close()  # a job already running stops at its next step
            raise self._timed_out(job) from None
        except GenerationFailed as exc:
            raise self._failed(exc) from None
        return stream

    def _document(self, request: GenerationRequest, result: BatchResult, prompt_lengths: list[int]) -> dict[str, Any]:
        assert self.tokenizer is not None and self.info is not None and self.backend is not None
        tokenizer, stop_strings = self.tokenizer, request.stop
        outputs, total_new = [], 0
        for i, text in enumerate(request.prompts):
            completions = []
            n = request.num_return_sequences
            for completion in result.completions[i * n : (i + 1) * n]:
                generated = tokenizer.decode(completion.tokens)
                if completion.finish_reason == "stop" or stop_strings:
                    cut = min((generated.find(s) for s in stop_strings if s in generated), default=-1)
                    if cut >= 0:
                        generated, completion.finish_reason = generated[:cut], "stop"
                total_new += len(completion.tokens)
                completions.append(
                    {
                        "text": generated,
                        "generated_text": text + generated,
                        "completion_tokens": len(completion.tokens),
                        "finish_reason": completion.finish_reason,
                    }
                )
            outputs.append({"input": text, "prompt_tokens": prompt_lengths[i], "completions": completions})
        return {
            "outputs": outputs,
            "usage": {"prompt_tokens": sum(prompt_lengths), "completion_tokens": total_new},
            "model": self.info.model,
            "backend": self.backend.name,
            "batch_size": result.batch_rows,
        }


def _read_body(environ: dict[str, Any]) -> bytes:
    """At most one byte past the limit is read: a client cannot make us buffer more."""
    length_header = environ.get("CONTENT_LENGTH") or ""
    if length_header:
        try:
            length = int(length_header)
        except ValueError:
            raise ApiError(400, "invalid_request", f"Content-Length {length_header!r} is not a number") from None
        if length > MAX_PAYLOAD_BYTES:
            raise ApiError(
                413, "payload_too_large", f"the body is {length} bytes; at most {MAX_PAYLOAD_BYTES} (6 MB) are accepted"
            )
        return bytes(environ["wsgi.input"].read(length))
    return bytes(environ["wsgi.input"].read(MAX_PAYLOAD_BYTES + 1))


class App:
    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/")
        headers: dict[str, str] = {}
        try:
            if path == "/ping":
                self._allow(method, ("GET",))
                status, body, headers = self.predictor.ping()
            elif path == "/invocations":
                self._allow(method, ("POST",))
                raw = _read_body(environ)
                answer = self.predictor.invoke(environ.get("CONTENT_TYPE"), raw)
                if isinstance(answer, TokenStream):
                    # No Content-Length: chunked, each line sent as it is made (streaming.py).
                    start_response("200 OK", list(STREAM_HEADERS.items()))
                    return answer
                status, body = 200, answer
            elif path == "/openapi.json":
                self._allow(method, ("GET",))
                status, body = 200, self.predictor.openapi()
            else:
                raise ApiError(404, "not_found", f"{path} does not exist: use POST /invocations or GET /ping")
        except ApiError as exc:
            status, body, headers = exc.status, exc.body(), exc.headers
        except Exception as exc:
            log.exception("unhandled error on %s %s", method, path)
            # The traceback goes to the log, never to the client.
            error = ApiError(500, "internal", f"internal error ({type(exc).__name__}): the server log has the details")
            status, body = error.status, error.body()
        payload = json.dumps(body, ensure_ascii=False).encode()
        start_response(
            f"{status} {REASONS.get(status, 'Error')}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(payload))), *headers.items()],
        )
        return [payload]

    @staticmethod
    def _allow(method: str, allowed: tuple[str, ...]) -> None:
        if method not in allowed:
            raise ApiError(
                405,
                "method_not_allowed",
                f"{method} is not allowed here: use {' or '.join(allowed)}",
                {"Allow": ", ".join(allowed)},
            )


def create_app(settings: ServerSettings | None = None, *, load: bool = True) -> App:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    predictor = Predictor(settings or from_environment(), WorkerHealth.from_environment())
    if load:
        predictor.start()
    return App(predictor)
