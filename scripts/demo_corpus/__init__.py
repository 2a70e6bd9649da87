"""Helpers for ``scripts/demo_corpus.py``: PO parsing, pinned sources, extraction, output.

Kept out of the ``dwstok`` package on purpose: assembling the demo corpus is a set-up
step, not part of the tokenizer or the pipeline.
"""
