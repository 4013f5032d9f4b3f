"""The Hugging Face PyTorch inference image's entrypoint, run on this host under ``.venv-hf``.

The image runs ``python /usr/local/bin/dockerd-entrypoint.py serve``, which calls the
toolkit's ``serving.main()``: it writes Multi Model Server's properties file, starts MMS (a
Java front end with Python workers) on ``$SAGEMAKER_BASE_DIR/model`` and waits for it. This
file does the same, with two differences that keep the host untouched and the run
contained:

* the properties file goes to the path given as the first argument instead of the fixed
  ``/etc/sagemaker-mms.properties`` (the toolkit reads that path from two module attributes,
  both set here before ``serving.main()`` runs);
* the toolkit finds the MMS process it waits for among all processes of the machine and
  refuses to go on beside a second one ("multiple mms model servers are not supported"); here
  it looks in this container's own process group, so that two containers can run side by
  side (as an endpoint's old and new model do during an update);
* when MMS stops, this process exits; the image's entrypoint would run ``tail -f /dev/null``
  and keep a container with nothing listening, which SageMaker's health check fails the
  same way.

Runs in ``.venv-hf`` only: it imports the toolkit, never this project.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def _own_model_server() -> Any:
    """sagemaker_inference.model_server._retrieve_mms_server_process, within this process group."""
    import psutil
    from sagemaker_inference import model_server

    group = os.getpgid(0)
    found = []
    for process in psutil.process_iter():
        try:
            if (
                process.status() != psutil.STATUS_ZOMBIE
                and os.getpgid(process.pid) == group
                and model_server.MMS_NAMESPACE in process.cmdline()
            ):
                found.append(process)
        except (psutil.Error, ProcessLookupError):
            continue
    if len(found) != 1:
        # The toolkit's own wording; it retries until its startup timeout.
        raise RuntimeError(f"mms model server was unsuccessfully started ({len(found)} found in this container)")
    return found[0]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: hf_entrypoint.py PROPERTIES_FILE", file=sys.stderr)
        return 2
    from sagemaker_huggingface_inference_toolkit import mms_model_server, serving
    from sagemaker_inference import model_server

    model_server.MMS_CONFIG_FILE = mms_model_server.MMS_CONFIG_FILE = argv[1]
    model_server._retrieve_mms_server_process = _own_model_server
    serving.main()
    print("hf_entrypoint: the model server stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
