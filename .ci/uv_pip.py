"""`uv pip ...` resolving as pip would on this machine (the Makefile's installer).

uv installs the environments several times faster than pip (parallel downloads and unpacking, one
resolver run), but it reads neither pip.conf nor the PIP_* variables. pip's configuration as pip
itself resolves it (`pip config list`: its files and PIP_* variables) is handed to uv as uv's own
variables; uv picks the best match across all indexes and compiles the modules, as pip does. What
depends on it here: find-links names the folder that holds torch's CPU wheel (torch==2.13.0 must
resolve to 2.13.0+cpu there, never to PyPI's CUDA build), the local indexes, the constraints, the
timeout and the CA bundle. A UV_* variable already set wins.

    .venv/bin/python .ci/uv_pip.py .venv/bin/uv install --python .venv-hf/bin/python --no-deps -r FILE
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

#: pip's setting: uv's variable and the separator of its values.
SETTINGS = {
    "index-url": ("UV_INDEX_URL", " "),
    "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
    "find-links": ("UV_FIND_LINKS", ","),
    "constraint": ("UV_CONSTRAINT", " "),
    "no-index": ("UV_NO_INDEX", " "),
    "default-timeout": ("UV_HTTP_TIMEOUT", " "),
    "cert": ("SSL_CERT_FILE", " "),
}
#: The later wins: pip reads [global], then [install], and the PIP_* variables over every file.
PRECEDENCE = ("global", "install", ":env:")
ITEM = re.compile(r"(?P<section>[^.]*)\.(?P<key>[a-z-]+)=(?P<value>.*)")


def pip_config(python: str) -> dict[str, str]:
    """pip's settings as `pip config list` prints them (key=repr(value), one a line)."""
    listing = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True).stdout
    chosen: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        match = ITEM.fullmatch(line)
        if not match or match["section"] not in PRECEDENCE:
            continue
        rank = PRECEDENCE.index(match["section"])
        if match["key"] not in chosen or rank >= chosen[match["key"]][0]:
            chosen[match["key"]] = (rank, str(ast.literal_eval(match["value"])))
    return {key: value for key, (_, value) in chosen.items()}


def uv_environment(config: dict[str, str]) -> dict[str, str]:
    # Compiled as pip compiles what it installs (unless the caller sets UV_COMPILE_BYTECODE=0,
    # as the Makefile does where the processes write their own): a container that may not write
    # bytecode, as its image's, would otherwise compile torch at each start.
    env = {"UV_INDEX_STRATEGY": "unsafe-best-match", "UV_COMPILE_BYTECODE": "1"}
    for key, value in config.items():
        if key in SETTINGS:
            variable, separator = SETTINGS[key]
            env[variable] = separator.join(value.split())
    return env


def main() -> int:
    uv, *args = sys.argv[1:]
    env = dict(os.environ)
    for variable, value in uv_environment(pip_config(sys.executable)).items():
        env.setdefault(variable, value)
    return subprocess.run([uv, "pip", *args], env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
