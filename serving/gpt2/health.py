"""``GET /ping`` answered by nginx from files, never by a model worker.

A worker's Python holds one GIL for its request threads, its batcher and its loader: whatever
one request makes it do (a long C call, a busy loop) would hold back a ``/ping`` answered there,
and SageMaker takes a ``/ping`` slower than 2 s for a dead container. So each gunicorn worker
only *writes* its state (loading, ready, failed, unhealthy) to a file of its own when the state
changes (:class:`WorkerHealth`), ``serve`` folds the workers' files into the one file nginx
serves (:class:`Aggregator`, a thread of ``serve``, a process that serves no request), and nginx
answers ``/ping`` from it (nginx.conf): ``ready.json`` with 200, else ``down.json`` with 503, else
503 ``{"status": "loading"}`` with Retry-After. No request, whatever it does to a worker, can
delay that answer.

What the file cannot tell is whether a worker is stuck: gunicorn's arbiter kills a worker whose
heartbeat stops for ``--timeout`` seconds (``serve``), the worker's file goes with it (its process
is gone) and its successor reports ``loading`` until its model is ready again.

Standard library only: ``serve`` imports this before anything else is started.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The folder of the health files, which ``serve`` gives its gunicorn workers.
HEALTH_DIR_ENV = "GPT2_HEALTH_DIR"
#: What nginx serves with 200, and with 503; neither: 503 loading (nginx.conf).
READY_FILE = "ready.json"
DOWN_FILE = "down.json"
WORKERS_DIR = "workers"
#: How often ``serve`` folds the workers' states into the served file: /ping follows a change
#: within this long.
POLL_S = 0.1
#: A worker in one of these states makes the container unhealthy, whatever the others say.
DOWN_STATES = ("failed", "unhealthy")

log = logging.getLogger(__name__)


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (None: no such process): with the
    pid, it names one process even after the pid is reused."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def write_atomically(path: Path, data: bytes) -> None:
    """Readers (nginx, the aggregator) see the old content or the new one, never a part."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    temporary.chmod(0o644)  # nginx's workers may run as another user than this process
    os.replace(temporary, path)


class WorkerHealth:
    """A gunicorn worker's state, in ``<health dir>/workers/<pid>.json``."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / WORKERS_DIR / f"{os.getpid()}.json"
        self._started = _start_time(os.getpid())
        self._lock = threading.Lock()

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> WorkerHealth | None:
        """None outside ``serve`` (the app run in-process): there is nothing to write to."""
        folder = (os.environ if env is None else env).get(HEALTH_DIR_ENV)
        return cls(Path(folder)) if folder else None

    def write(self, status: int, body: dict[str, Any]) -> None:
        record = {"pid": os.getpid(), "started": self._started, "status": status, "body": body}
        # The loader thread and request threads may both change the state: one write at a time.
        with self._lock:
            write_atomically(self.path, json.dumps(record).encode())


def fold(records: list[dict[str, Any]], workers: int) -> tuple[int, dict[str, Any]] | None:
    """The container's /ping from its live workers' records: down if any worker is failed or
    unhealthy, ready once `workers` of them are ready, else None (loading)."""
    down = [r for r in records if r["body"].get("status") in DOWN_STATES]
    if down:
        return 503, down[0]["body"]
    ready = [r for r in records if r["status"] == 200]
    if len(ready) >= workers:
        return 200, ready[0]["body"]
    return None


class Aggregator:
    """Folds the workers' files into the file nginx serves, every POLL_S, in ``serve``."""

    def __init__(self, folder: Path, workers: int) -> None:
        self.folder = folder
        self.workers = workers
        (folder / WORKERS_DIR).mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)
        self._served: tuple[int, dict[str, Any]] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="health", daemon=True)

    def start(self) -> Aggregator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.update()
            except Exception:  # a bad file must not end the thread: /ping would freeze as it is
                log.exception("folding the workers' health files failed")

    def live_records(self) -> list[dict[str, Any]]:
        """The records of workers that still run; a dead worker's file is removed."""
        records = []
        for path in sorted((self.folder / WORKERS_DIR).glob("*.json")):
            try:
                record = json.loads(path.read_bytes())
            except (OSError, ValueError):
                continue  # removed meanwhile, or being replaced
            if _start_time(int(record["pid"])) != record["started"]:
                path.unlink(missing_ok=True)
                continue
            records.append(record)
        return records

    def update(self) -> None:
        served = fold(self.live_records(), self.workers)
        if served == self._served:
            return
        ready, down = self.folder / READY_FILE, self.folder / DOWN_FILE
        # The new file first, then the old one goes: nginx, which tries ready.json, then
        # down.json, then answers loading, sees the old state or the new one.
        if served is None:
            for path in (ready, down):
                path.unlink(missing_ok=True)
        else:
            status, body = served
            new, old = (ready, down) if status == 200 else (down, ready)
            write_atomically(new, json.dumps(body).encode())
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
        self._served = served
