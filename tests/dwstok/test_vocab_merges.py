"""Tokenizer.from_vocab_merges on GPT-2's real vocab.json + merges.txt against tiktoken's gpt2.

No package ships GPT-2's files, so they are derived from r50k_base.tiktoken (the same
ranks): each merge is what BPE with the ranks below a token's own makes of its bytes.
The derived files hash to the sha256s tiktoken pins for OpenAI's encoder.json and
vocab.bpe, so they are those files, byte for byte.
"""

from __future__ import annotations

import base64
import json

import pytest

from dwstok import Tokenizer

# tiktoken_ext/openai_public.py, gpt2(): the hashes of OpenAI's files
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
EOT = "<|endoftext|>"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte (openai/gpt-2, encoder.py)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def last_merge(ranks: dict[bytes, int], token: bytes) -> list[bytes]:
    """BPE of ``token``'s bytes with only the ranks below its own: its two parts."""
    parts = [bytes([b]) for b in token]
    limit = ranks[token]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < limit and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            return parts
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]


@pytest.fixture(scope="module")
def gpt2_files(reftok, tmp_path_factory):
    ranks = {}
    for line in (reftok / "r50k_base.tiktoken").read_bytes().splitlines():
        tok, rank = line.split()
        ranks[base64.b64decode(tok)] = int(rank)
    to_str = bytes_to_unicode()

    def s(b: bytes) -> str:
        return "".join(to_str[x] for x in b)

    lines = ["#version: 0.2\n"]
    for tok, _ in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) > 1:
            a, b = last_merge(ranks, tok)
            lines.append(f"{s(a)} {s(b)}\n")
    encoder = {s(t): r for t, r in sorted(ranks.items(), key=lambda kv: kv[1])}
    encoder[EOT] = 50256
    d = tmp_path_factory.mktemp("gpt2")
    (d / "merges.txt").write_text("".join(lines), encoding="utf-8")
    (d / "vocab.json").write_text(json.dumps(encoder), encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def tiktoken_gpt2(gpt2_files, tiktoken_cache):
    """tiktoken's own gpt2 encoding (openai_public.gpt2), from the derived files; tiktoken
    checks their hashes."""
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from tiktoken_ext.openai_public import r50k_base

    ranks = data_gym_to_mergeable_bpe_ranks(
        str(gpt2_files / "merges.txt"), str(gpt2_files / "vocab.json"),
        vocab_bpe_hash=VOCAB_BPE_SHA256, encoder_json_hash=ENCODER_JSON_SHA256,
    )
    return tiktoken.Encoding("gpt2", pat_str=r50k_base()["pat_str"], mergeable_ranks=ranks,
                             special_tokens={EOT: 50256}, explicit_n_vocab=50257)


def load_vocab_merges(d):
    """What a user does with vocab.json + merges.txt: GPT-2's characters back to bytes."""
    to_byte = {c: b for b, c in bytes_to_unicode().items()}

    def b(s: str) -> bytes:
        return bytes(to_byte[c] for c in s)

    encoder = json.loads((d / "vocab.json").read_text(encoding="utf-8"))
    vocab = {i: (s.encode() if s == EOT else b(s)) for s, i in encoder.items()}
    lines = (d / "merges.txt").read_text(encoding="utf-8").split("\n")[1:-1]
    merges = [tuple(b(x) for x in line.split(" ")) for line in lines]
    return vocab, merges


def test_gpt2_special_keeps_its_vocab_id(gpt2_files, tiktoken_gpt2, corpus_dir):
    import pyarrow.parquet as pq

    vocab, merges = load_vocab_merges(gpt2_files)
    assert len(merges) == 50000 and vocab[50256] == EOT.encode()
    tok = Tokenizer.from_vocab_merges(vocab, merges, special_tokens=[EOT], pattern="gpt2")
    assert tok.special_tokens == {EOT: 50256}
    assert tok.n_vocab == tiktoken_gpt2.n_vocab == 50257
    texts = pq.read_table(corpus_dir / "dev.parquet", columns=["text"]).column("text").to_pylist()
    docs = [t[:3000] for t in texts[::97][:40]]
    joined = f"{EOT}".join(docs) + EOT + "tail <|endoftext|>x <|endoftext"
    for text in [*docs, joined, EOT, f"a{EOT}{EOT}b"]:
        want = tiktoken_gpt2.encode(text, allowed_special={EOT})
        assert tok.encode(text, allowed_special={EOT}) == want
        assert tok.decode(want) == text
        # not allowed: the special's text is plain text, as tiktoken with disallowed_special=()
        assert tok.encode(text) == tiktoken_gpt2.encode(text, disallowed_special=())
    assert 50256 in tok.encode(joined, allowed_special={EOT})


def test_specials_not_in_vocab_come_after(gpt2_files):
    vocab, merges = load_vocab_merges(gpt2_files)
    tok = Tokenizer.from_vocab_merges(vocab, merges[:300], special_tokens=["<pad>", EOT, "<fim>"],
                                      pattern="gpt2")
    assert tok.special_tokens == {"<pad>": 50257, EOT: 50256, "<fim>": 50258}
    assert list(tok.special_tokens) == ["<pad>", EOT, "<fim>"]
    assert tok.encode(f"x{EOT}<pad>", allowed_special="all")[-2:] == [50256, 50257]


def test_one_byte_special_stays_a_byte():
    vocab = {b: bytes([b]) for b in range(256)}
    tok = Tokenizer.from_vocab_merges(vocab, [(b"a", b"b")], special_tokens=["a", "<s>"])
    assert tok.special_tokens == {"a": 257, "<s>": 258}
    assert tok.encode("ab") == [256]
