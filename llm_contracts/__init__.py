"""Contracts shared by the artifacts builder, the stacks and the serving code.

A leaf package: it imports nothing of this project (and nothing outside the standard
library), so that each side can read the same definition without importing the others.
Code that runs inside an image, where this package is not installed, keeps its own copy of a
constant, and a test checks that the copy matches (tests/gptj/test_model_server.py).
"""
