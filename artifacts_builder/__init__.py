"""Builds, checks and packages the model payloads the stacks deploy.

Run before synthesis: ``python -m artifacts_builder all --tiny`` (offline, random
weights) or per component, e.g. ``python -m artifacts_builder gptj``.
"""
