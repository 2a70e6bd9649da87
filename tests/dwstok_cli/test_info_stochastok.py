"""`dwstok info MODEL` reports the StochasTok split table's size."""

from __future__ import annotations

import json

from click.testing import CliRunner

from dwstok import Tokenizer
from dwstok_cli.main import cli


def test_info_counts_splits(tmp_path):
    vocab = {b: bytes([b]) for b in range(256)}
    merges = [(b"a", b"b"), (b"ab", b"c"), (b"b", b"c"), (b"abc", b"d"), (b"c", b"d")]
    tok = Tokenizer.from_vocab_merges(vocab, merges, special_tokens=["<bos>"], version="t")
    tok.save(tmp_path / "model.json")
    r = CliRunner().invoke(cli, ["info", str(tmp_path / "model.json"), "--json"])
    assert r.exit_code == 0, r.output
    # ab = a+b; abc = ab+c, a+bc; bc = b+c; abcd = abc+d, ab+cd; cd = c+d: 7 ways, <bos> none
    assert json.loads(r.stdout)["stochastok_splits"] == 7
