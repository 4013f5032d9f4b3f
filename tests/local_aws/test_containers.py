"""Finding a container's processes: by the marker in their environment, or by the session the
container's main process leads when a process has overwritten its environment."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from local_aws.sagemaker.containers import CONTAINER_MARKER, running_containers


def test_a_renamed_process_of_a_container_is_found_through_its_session(tmp_path: Path) -> None:
    """vLLM's EngineCore renames itself (setproctitle), which overwrites what /proc/PID/environ
    reads; an empty environment (``env -i``) reads the same."""
    env = {"PATH": os.environ["PATH"], CONTAINER_MARKER: f"{os.getpid()}:{tmp_path}"}
    main = subprocess.Popen(["bash", "-c", "env -i sleep 30 & wait"], env=env, start_new_session=True)
    other = subprocess.Popen(["sleep", "30"], env=env)  # marked, in this session: found by its marker
    try:
        for _ in range(100):
            found = {p.pid: p for p in running_containers()}
            wiped = [p for p in found.values() if p.cmdline == "sleep 30" and p.pid != other.pid]
            if wiped:
                break
            time.sleep(0.05)
        assert main.pid in found and other.pid in found
        assert len(wiped) == 1 and wiped[0].run_dir == str(tmp_path)
        assert CONTAINER_MARKER.encode() not in Path(f"/proc/{wiped[0].pid}/environ").read_bytes()
        assert running_containers(owner=os.getpid() + 1_000_000) == []
    finally:
        os.killpg(main.pid, signal.SIGKILL)
        other.kill()
        main.wait()
        other.wait()
    assert running_containers() == []
