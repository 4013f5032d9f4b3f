"""Fixtures shared by every test folder."""

from __future__ import annotations

import os

# jsii prints a banner on every process start under Node 20; it says nothing about our code.
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
