"""Helpers of the GPT-2 tests."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Quantized:
    """The tiny model built with one `--cpu-precision` (its gate passed, or the build failed)."""

    out: Path
    tar: Path
    model_dir: Path


def children(pid: int) -> set[int]:
    """Every process below `pid` (none once it has ended)."""
    try:
        return {child.pid for child in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def cmdline(pid: int) -> bytes:
    """A process's command line, arguments separated by spaces (nginx rewrites its own so)."""
    return " ".join(psutil.Process(pid).cmdline()).encode()


def alive(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has, its parent not yet told)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def post(
    port: int, body: bytes, headers: dict[str, str] | None = None, path: str = "/invocations"
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """POST `body` to the server on `port`; (status, JSON answer, headers)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", path, body=body, headers=JSON if headers is None else headers)
        response = conn.getresponse()
        raw = response.read()
        assert response.getheader("Content-Type") == "application/json", raw[:200]
        return response.status, json.loads(raw), dict(response.getheaders())
    finally:
        conn.close()


def pretend_avx2_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process reads a recorded AVX2 /proc/cpuinfo (an AMD EPYC Zen 3's: no AVX-512, no
    VNNI) as its CPU's, on an x86-64 machine."""
    from serving.gpt2 import backends

    cpuinfo = tmp_path / "cpuinfo"
    flags = "fpu sse4_2 avx f16c avx2 bmi2 fma sha_ni vaes vpclmulqdq"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: AMD EPYC 7R13 Processor\nflags\t\t: {flags}\n")
    monkeypatch.setattr(backends, "CPUINFO", cpuinfo)
    monkeypatch.setattr(backends.platform, "machine", lambda: "x86_64")
