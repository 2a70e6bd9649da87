"""`dwstok info` on a workdir root (one line per stage) and on a corpus file."""

from __future__ import annotations

import gzip
import json
import re

from dwstok_cli.main import cli


def invoke(runner, *args):
    return runner.invoke(cli, [str(a) for a in args])


def test_info_on_a_workdir(runner, tmp_path, small_config, small_parquet):
    w = tmp_path / "w"
    assert invoke(runner, "pretokenize", small_config, "--corpus", small_parquet, "--workdir", w).exit_code == 0
    assert invoke(runner, "count", small_config, "--workdir", w).exit_code == 0
    r = invoke(runner, "info", w)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == f"workdir        {w}"
    assert re.fullmatch(r"pretokenize    complete, built \d+ s ago \(\d{4}-\d\d-\d\dT[\d:]+[+-]\d{4}\)", lines[1]), lines[1]
    assert lines[2].startswith("count          complete, built ")
    assert lines[3:] == ["train          missing", "export         missing", "encode-shards  missing"]

    # pretokenize rebuilt from another corpus: count was made from its earlier output
    from tests.stages.conftest import docs, write_parquet

    other = write_parquet(tmp_path / "other.parquet", docs()[:-1])
    assert invoke(runner, "pretokenize", small_config, "--corpus", other, "--workdir", w).exit_code == 0
    d = json.loads(invoke(runner, "info", w, "--json").stdout)
    assert d["kind"] == "dwstok workdir"
    assert d["stages"]["pretokenize"]["status"] == "complete"
    assert d["stages"]["count"]["status"] == "stale: built from an earlier pretokenize output"
    (w / "count" / "stats.json").unlink()
    d = json.loads(invoke(runner, "info", w, "--json").stdout)
    assert d["stages"]["count"]["status"] == "damaged: stats.json is missing"


def test_info_on_corpus_files(runner, tmp_path):
    rows = [{"text": "héllo", "lang": "fr"}, {"text": "hi", "lang": "en"}, {"text": "yo", "lang": "en"}]
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
    plain = tmp_path / "c.jsonl"
    plain.write_bytes(body)
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(body))
    for p, kind in ((plain, "corpus file (jsonl)"), (gz, "corpus file (jsonl, gzip)")):
        d = json.loads(invoke(runner, "info", p, "--json").stdout)
        assert d == {"kind": kind, "path": str(p), "file_bytes": p.stat().st_size, "docs": 3,
                     "text_bytes": len("héllohiyo".encode()), "languages": 2, "docs_by_lang": {"en": 2, "fr": 1}}
    r = invoke(runner, "info", plain)
    assert "docs_by_lang  en=2, fr=1" in r.stdout.splitlines()
    # a truncated gzip file is the pipeline's error, not a shorter count
    gz.write_bytes(gzip.compress(body)[:-9])
    r = invoke(runner, "info", gz)
    assert r.exit_code == 3 and r.stderr.startswith("Error: ")
