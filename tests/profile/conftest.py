"""Markers of the profile tests."""

from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes seconds (real nvcc builds); runs in CI all the same")
