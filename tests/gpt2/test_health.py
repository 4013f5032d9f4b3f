"""How `serve` folds its workers' states into the file nginx answers /ping from (health.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from serving.gpt2.health import DOWN_FILE, READY_FILE, Aggregator, WorkerHealth, fold

READY = {"status": "ready", "backend": "onnxruntime", "model": "m"}
FAILED = {"status": "failed", "error": {"code": "model_failed", "message": "no"}}


def record(status: int, body: dict[str, object]) -> dict[str, object]:
    return {"pid": 1, "started": "0", "status": status, "body": body}


def test_ready_once_every_worker_is_and_down_once_one_is() -> None:
    assert fold([], 2) is None
    assert fold([record(200, READY)], 2) is None  # one of two workers still loading
    assert fold([record(200, READY), record(200, READY)], 2) == (200, READY)
    assert fold([record(200, READY), record(503, FAILED)], 2) == (503, FAILED)
    assert fold([record(503, {"status": "loading"})], 1) is None


def served(folder: Path) -> tuple[int, dict[str, object]] | None:
    for name, status in ((READY_FILE, 200), (DOWN_FILE, 503)):
        if (folder / name).exists():
            return status, json.loads((folder / name).read_text())
    return None


def test_a_dead_workers_state_is_dropped(tmp_path: Path) -> None:
    """A worker that exited (killed, restarted by gunicorn) no longer counts, whatever its file
    said: /ping is loading until its successor is ready."""
    aggregator = Aggregator(tmp_path, workers=1)
    WorkerHealth(tmp_path).write(200, READY)
    aggregator.update()
    assert served(tmp_path) == (200, READY)
    # A worker that has exited: its file, written as it would have been, names a process gone.
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    dead = tmp_path / "workers" / f"{child.stdout.strip()}.json"
    dead.write_text(json.dumps({"pid": int(child.stdout), "started": "1", "status": 503, "body": FAILED}))
    (tmp_path / "workers" / f"{os.getpid()}.json").unlink()
    aggregator.update()
    assert served(tmp_path) is None and not dead.exists()


def test_a_failed_worker_turns_ping_down(tmp_path: Path) -> None:
    aggregator = Aggregator(tmp_path, workers=1)
    health = WorkerHealth(tmp_path)
    health.write(200, READY)
    aggregator.update()
    health.write(503, FAILED)
    aggregator.update()
    assert served(tmp_path) == (503, FAILED) and not (tmp_path / READY_FILE).exists()
    health.write(200, READY)
    aggregator.update()
    assert served(tmp_path) == (200, READY) and not (tmp_path / DOWN_FILE).exists()
