"""No request, whatever its input within the 6 MB limit, holds back /ping or the other requests
(issue 16 item 1). The mechanisms, each tested here (the times are in bench/gpt2_stall.py):

- /ping is answered by nginx from the file `serve` keeps from the workers' states (health.py),
  so it does not wait for a worker at all: not even a stopped one;
- a body is read with bounded work (bounded_json.py): past the JSON values, the nesting or the
  number length a request can have, it is refused before the rest is read;
- an input longer than the model can take is refused by its length, before it is tokenized, and
  tokenizing leaves the GIL to the worker's other threads.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from serving.gpt2.api import max_json_values
from serving.gpt2.local import LocalServer, ping
from serving.gpt2.predictor import Tokenizer
from tests.gpt2.helpers import children, cmdline, post

LIMIT = 6 * 1024 * 1024 - 64  # bodies just under the 6 MB limit
#: What the tiny model's server (10 rows) reads of a body at most: the largest valid request's values.
MAX_VALUES = f"more than {max_json_values(10)} JSON values"


def gunicorn_workers(srv: LocalServer) -> list[int]:
    assert srv.process is not None
    tree = children(srv.process.pid)
    master = min(p for p in tree if b"gunicorn" in cmdline(p))
    return sorted(children(master))


def test_ping_never_waits_for_a_worker(server: LocalServer) -> None:
    """A worker that cannot run at all (stopped) still leaves /ping answered: what a worker
    is doing with a request can never delay it."""
    workers = gunicorn_workers(server)
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)
    try:
        status, body = ping(server.port, timeout=10)
    finally:
        for pid in workers:
            os.kill(pid, signal.SIGCONT)
    assert (status, body["status"]) == (200, "ready")


def fill(head: bytes, item: bytes, tail: bytes) -> bytes:
    """`head`, as many `item`s as bring the body to the limit, `tail`."""
    return head + item * ((LIMIT - len(head) - len(tail)) // len(item)) + tail


def keys(count: int) -> bytes:
    return b", ".join(b'"p%07d": 1' % i for i in range(count))


# (case, body near 6 MB, status, what the message names): each refused at the limit it passes,
# before the work that grows with the body (reading every value, tokenizing the text).
SHAPES: list[tuple[str, bytes, int, str]] = [
    ("long string", fill(b'{"input": "', b"a", b'"}'), 400, "characters, more than this model's"),
    ("long text of words", fill(b'{"input": "', b"amazon ", b'"}'), 400, "characters, more than this model's"),
    ("long string of escapes", fill(b'{"input": "', b"\\u00e9", b'"}'), 400, "characters, more than this model's"),
    ("many inputs", fill(b'{"inputs": [', b'"a", ', b'"a"]}'), 400, MAX_VALUES),
    ("many parameters", b'{"input": "a", "parameters": {' + keys(LIMIT // 15 - 4) + b"}}", 400,
     MAX_VALUES),
    ("one key many times", fill(b'{"input": "a", "parameters": {', b'"top_k": 1, ', b'"top_k": 1}}'), 400,
     'gives the key "top_k" twice'),
    ("many empty arrays", fill(b'{"input": "a", "parameters": {"stop": [', b"[], ", b"[]]}}"), 400,
     MAX_VALUES),
    ("deep nesting", b'{"input": "a", "parameters": ' + b"[" * (LIMIT // 2 - 20) + b"]" * (LIMIT // 2 - 20) + b"}",
     400, "too deeply (more than 8 levels)"),
    ("long number", fill(b'{"input": "a", "parameters": {"top_k": ', b"1", b"}}"), 400,
     "a number of more than 4300 characters"),
    ("whitespace", fill(b'{"input": "amazon", "parameters": {"max_new_tokens": 2}', b" ", b"}"), 200, ""),
]  # fmt: skip


@pytest.mark.parametrize(("case", "body", "status", "message"), SHAPES, ids=[s[0] for s in SHAPES])
def test_a_body_near_the_limit_is_read_with_bounded_work(
    server: LocalServer, case: str, body: bytes, status: int, message: str
) -> None:
    assert len(body) <= 6 * 1024 * 1024
    got, answer, _ = post(server.port, body)
    assert got == status, answer
    if status != 200:
        assert message in answer["error"]["message"], answer


def test_tokenizing_leaves_the_gil_to_other_threads(model_dir: Path) -> None:
    """While one thread tokenizes a long text, another runs Python. The interpreter is told not to
    take the GIL from a thread that holds it (a switch interval of 1000 s): the other thread can
    then run only if tokenizing lets the GIL go, as `Tokenizer.encode` of tokenizers does not (it
    got no step done, where the batch call lets it run throughout)."""
    tokenizer = Tokenizer(model_dir / "tokenizer")
    text = "amazon web services " * 100_000
    entered, finished = threading.Event(), threading.Event()

    def tokenize() -> None:
        entered.set()
        try:
            tokenizer.encode_all([text])
        finally:
            finished.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000)
    try:
        worker = threading.Thread(target=tokenize)
        worker.start()
        entered.wait()
        steps = 0
        while not finished.is_set():
            steps += 1
            time.sleep(0.0001)  # gives the GIL back, so that the tokenizing thread can finish
        worker.join()
    finally:
        sys.setswitchinterval(interval)
    assert steps > 0, "no other thread ran while the text was tokenized"


def test_an_input_that_cannot_fit_is_refused_by_its_length(model_dir: Path) -> None:
    """The most characters a token stands for bounds what can fit: the tiny tokenizer's longest
    token is its 13-character end-of-text marker."""
    tokenizer = Tokenizer(model_dir / "tokenizer")
    assert tokenizer.max_token_chars == len("<|endoftext|>")
    longest = max(tokenizer._tok.get_vocab(with_added_tokens=True), key=len)
    # A text of repeats of the longest token is one token per repeat: the bound is tight.
    assert len(tokenizer.encode(longest * 41)) == 41
