"""The session's leak check finds a process a test left running, and only its own."""

from __future__ import annotations

import os
import subprocess

from tests import leaks


def test_a_process_with_the_sessions_marker_is_found_and_another_is_not() -> None:
    session = os.environ[leaks.MARKER]
    mine = subprocess.Popen(["sleep", "30"], start_new_session=True)
    other = subprocess.Popen(["sleep", "30"], env={"PATH": os.environ["PATH"]}, start_new_session=True)
    try:
        pids = {p.pid for p in leaks.left_running(session)}
        assert mine.pid in pids and other.pid not in pids
    finally:
        for process in (mine, other):
            process.kill()
            process.wait()
    assert mine.pid not in {p.pid for p in leaks.left_running(session)}
