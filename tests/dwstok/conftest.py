"""Fixtures for the runtime's tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _small_batches_on_threads(monkeypatch):
    """These tests hand small batches ``num_threads=2`` to test the batch paths and their
    threads (ranges, cache slots, lists made on threads, the pool after a fork): keep
    them there. By default a batch that small runs on the calling thread
    (``tokenizer._SPLIT_MIN``), and one of a few texts one text at a time
    (``tokenizer._FEW_TEXTS``); test_tokenizer.py tests both."""
    from dwstok import tokenizer

    monkeypatch.setattr(tokenizer, "_SPLIT_MIN", 0)
    monkeypatch.setattr(tokenizer, "_FEW_TEXTS", 0)
