"""A streamed answer (``"stream": true``): one completion's tokens sent as they are generated.

The request is one job of the dynamic batcher like any other (it batches with the requests
around it); the batcher thread hands each new token to :meth:`TokenStream.on_tokens` (the
job's per-token check, batching.py), and the request thread sends it as one JSON line:

* ``{"token": {"id": 262, "text": " the"}}`` for every generated token, in order. ``text`` is
  what the token adds to the completion; it is empty while the text is held back (an
  incomplete UTF-8 character, or the start of a stop string);
* ``{"end": {"text", "tail", "finish_reason", "completion_tokens", "prompt_tokens",
  "batch_size", "model", "backend"}}`` last: ``text`` is the whole completion (as the
  non-streamed answer gives it), ``tail`` the part of it no token line carried (what was held
  back): the token texts followed by ``tail`` are ``text``;
* ``{"error": {"code", "message"}}`` last instead of ``end`` when the answer fails after its
  first line was sent (the status, 200, is gone by then): ``generation_failed`` or ``timeout``.

An error before the first token is still a status (``503`` overloaded/timeout, ``500``
generation_failed). Nothing is generated for a caller that goes away: when the server closes
the answer early (the connection is gone), the job leaves the queue, or its row stops at the
next step.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol

from serving.gpt2.batching import BatchResult, DynamicBatcher, GenerationFailed, Job

log = logging.getLogger("gpt2.streaming")

#: No Content-Length: gunicorn sends the answer chunked; X-Accel-Buffering tells nginx to pass
#: each piece on as it comes (nginx.conf).
STREAM_HEADERS = {"Content-Type": "application/jsonlines", "X-Accel-Buffering": "no", "Cache-Control": "no-store"}


class Decoder(Protocol):
    def decode(self, ids: list[int]) -> str: ...


def visible_text(text: str, stop_strings: list[str]) -> tuple[str, bool]:
    """The part of `text` that can be sent now, and whether a stop string ended it: cut before
    a stop string; else without a trailing incomplete character (decoded as U+FFFD) or a
    trailing start of a stop string, which the next tokens may complete."""
    cuts = [text.find(s) for s in stop_strings if s in text]
    if cuts:
        return text[: min(cuts)], True
    text = text.rstrip("\ufffd")
    held = max((n for s in stop_strings for n in range(1, len(s)) if text.endswith(s[:n])), default=0)
    return text[: len(text) - held], False


def _line(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode() + b"\n"


class TokenStream:
    """One streamed completion, from the batcher thread to the request thread."""

    def __init__(self, tokenizer: Decoder, stop_strings: list[str], job: Job) -> None:
        self._tokenizer = tokenizer
        self._stop_strings = stop_strings
        self._job = job
        self._stop_check = job.stop
        job.stop = self.on_tokens
        self._events: queue.SimpleQueue[tuple[str, int, int]] = queue.SimpleQueue()
        self._cancelled = threading.Event()
        self._pending: tuple[str, int, int] | None = None
        self._finished = False
        self._sent_tokens = 0
        self._batcher: DynamicBatcher | None = None
        self._on_result: Callable[[BaseException | None], None] = lambda _: None
        self._end: dict[str, Any] = {}
        self._idle_timeout_s = 60.0

    # -- the batcher thread ------------------------------------------------------------------
    def on_tokens(self, row: int, tokens: list[int]) -> bool:
        """A new token of the row: queued for the caller. True ends the row: a stop string, or
        a caller that went away."""
        if self._cancelled.is_set():
            return True
        self._events.put(("token", tokens[-1], len(tokens)))
        return self._stop_check is not None and self._stop_check(row, tokens)

    def on_done(self, _future: Future[BatchResult]) -> None:
        self._events.put(("done", 0, 0))

    # -- the request thread ------------------------------------------------------------------
    def wait_first(self, timeout_s: float) -> None:
        """Wait for the first token or the end; an error before it is raised (GenerationFailed,
        DeadlineExceeded, or FutureTimeout when nothing came within `timeout_s`)."""
        try:
            event = self._events.get(timeout=timeout_s)
        except queue.Empty:
            raise FutureTimeout from None
        if event[0] == "done":
            error = self._job.future.exception()
            if error is not None:
                self._finished = True
                raise error
        self._pending = event

    def bind(
        self,
        job: Job,
        batcher: DynamicBatcher | None,
        *,
        on_result: Callable[[BaseException | None], None],
        end: dict[str, Any],
        idle_timeout_s: float,
    ) -> None:
        """What the answer needs: the batcher to withdraw the job from, what to tell of the
        generation's outcome, the end line's fixed fields, the longest wait for a token."""
        self._job, self._batcher, self._on_result, self._end = job, batcher, on_result, end
        self._idle_timeout_s = idle_timeout_s

    def __iter__(self) -> Iterator[bytes]:
        return self._lines()

    def _lines(self) -> Iterator[bytes]:
        ids: list[int] = []
        sent = ""
        while True:
            event, self._pending = self._pending, None
            if event is None:
                try:
                    event = self._events.get(timeout=self._idle_timeout_s)
                except queue.Empty:
                    self.close()
                    message = f"no token within {self._idle_timeout_s:.0f} s (the server is overloaded): retry"
                    yield _line({"error": {"code": "timeout", "message": message}})
                    return
            kind, token, count = event
            if kind == "token":
                if count <= len(ids):
                    continue  # a failed batch runs again job by job (batching.py): sent already
                ids.append(token)
                text, _ = visible_text(self._tokenizer.decode(ids), self._stop_strings)
                delta = text[len(sent) :] if text.startswith(sent) else ""
                sent += delta
                self._sent_tokens = len(ids)
                yield _line({"token": {"id": token, "text": delta}})
                continue
            yield self._last(sent)
            return

    def _last(self, sent: str) -> bytes:
        self._finished = True
        error = self._job.future.exception()
        if error is not None:
            self._on_result(error)
            code = "generation_failed" if isinstance(error, GenerationFailed) else "timeout"
            message = f"{error}: the answer ends here; the server log has the details"
            return _line({"error": {"code": code, "message": message}})
        self._on_result(None)
        result = self._job.future.result()
        (completion,) = result.completions
        # As the non-streamed answer gives it: cut before the first stop string.
        text = self._tokenizer.decode(completion.tokens)
        cuts = [text.find(s) for s in self._stop_strings if s in text]
        if cuts:
            text = text[: min(cuts)]
        finish = "stop" if cuts else completion.finish_reason
        tail = text[len(sent) :] if text.startswith(sent) else text
        end = {
            "text": text,
            "tail": tail,
            "finish_reason": finish,
            "completion_tokens": len(completion.tokens),
            "batch_size": result.batch_rows,
            **self._end,
        }
        return _line({"end": end})

    def close(self) -> None:
        """Called by the server when the answer ends, also early (the caller went away): the
        job leaves the queue, or its row stops at the next step."""
        if self._finished:
            return
        self._finished = True
        self._cancelled.set()
        self._job.future.cancel()
        if self._batcher is not None:
            self._batcher.withdraw(self._job)
        log.info("a streamed answer ended early after %d token(s): its generation stops", self._sent_tokens)
