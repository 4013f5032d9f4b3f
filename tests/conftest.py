"""Fixtures shared by every test folder."""

from __future__ import annotations

import os

# jsii prints an end-of-life banner on every process start under Node 20; it says nothing
# about our code.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
