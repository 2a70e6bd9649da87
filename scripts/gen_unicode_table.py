"""Regenerate dwstok/data/unicode_classes.zlib from the installed ``regex`` module.

Run after upgrading ``regex`` (tests/dwstok/test_scanner.py fails when the shipped
table and regex disagree):

    .venv/bin/python scripts/gen_unicode_table.py
"""

from __future__ import annotations

import os

import regex

from dwstok.unicode_classes import DATA_PATH, build_table, pack


def main() -> None:
    table = build_table()
    DATA_PATH.parent.mkdir(parents=True, exist_ok=True)
    tmp = DATA_PATH.with_suffix(".tmp")
    tmp.write_bytes(pack(table))
    os.replace(tmp, DATA_PATH)
    print(f"wrote {DATA_PATH} ({DATA_PATH.stat().st_size} bytes, regex {regex.__version__})")


if __name__ == "__main__":
    main()
