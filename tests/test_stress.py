"""--stress's burners (tests/stress.py): one busy process per core, all ended by one stop."""

from __future__ import annotations

import os
import time

import psutil

from tests import leaks
from tests.stress import Burners


def test_the_burners_spin_in_one_group_and_stop_leaves_none() -> None:
    session = os.environ[leaks.MARKER]
    with Burners(2) as burners:
        assert burners.leader is not None
        leader = psutil.Process(burners.leader.pid)
        for _ in range(200):  # the leader forks the other: it shows within a few looks
            running = burners.pids()
            if len(running) == 2:
                break
            time.sleep(0.05)
        assert len(running) == 2 and leader.pid in running
        # They spin: their CPU time grows while this test sleeps.
        before = sum(leader.cpu_times()[:2])
        while sum(leader.cpu_times()[:2]) == before:
            time.sleep(0.05)
        assert all(psutil.Process(pid).nice() == psutil.Process().nice() for pid in running)
        # They carry the session's marker: the leak check would see one left behind.
        assert set(running) <= {p.pid for p in leaks.left_running(session)}
    assert burners.leader is None
    assert not set(running) & {p.pid for p in leaks.left_running(session)}
    assert not [pid for pid in running if alive(pid)]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
