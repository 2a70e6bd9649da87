"""dwstok eval: totals against each tokenizer's own counts, the audit against brute force,
and the report's pieces on small built models."""

from __future__ import annotations

import unicodedata
from collections import Counter

import numpy as np
import pytest
import regex

from stages import Inputs, count, pretokenize, train
from stages.evaluate import audit as audit_mod
from stages.evaluate.run import SCHEMA, evaluate
from stages.executors import LocalExecutor
from tests.dwstok.reference_bpe import merge_order

from .conftest import DOCS, config, write_parquet

EXTRA = [
    ("Numbers: 1234567, $1,000,000, 2000年 and 2026; 2026 again, 10 20 30 999 1000.", "en"),
    ("研究就是在不知道自己在做什么的时候所做的事。研究，研究！", "zh"),
    ("──────────────────────────────── box ────────────────\n", "code"),
    ("Việt Nam, tiếng Việt có dấu.", "vi"),
]


def eval_docs():
    return [(f"{t} #{i}", lang) for i in range(4) for t, lang in DOCS + EXTRA]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Two small builds (plain; Han forced + α = 0.7, digits from the right) and their corpus."""
    root = tmp_path_factory.mktemp("eval")
    corpus = write_parquet(root / "corpus.parquet", eval_docs())
    ex = LocalExecutor(1)
    out = {}
    for name, over in {
        "e.1": {},
        "e.3": {"han": {"coverage": 0.9}, "balance": {"alpha": 0.7}, "pattern": "o200k-rdigits"},
    }.items():
        cfg = config(version=name, vocab_size=288 + 150, **over)
        work = root / name
        inp = Inputs(corpus=[corpus], workdir=work)
        for st in (pretokenize, count, train):
            st.run(cfg, inp, work / st.STAGE, ex)
        out[name] = work
    return corpus, out


def test_totals_equal_each_tokenizers_own_counts(built, reftok, tiktoken_cache):
    tiktoken = pytest.importorskip("tiktoken")
    spm = pytest.importorskip("sentencepiece")
    from dwstok import Tokenizer

    corpus, works = built
    r = evaluate([works["e.1"], works["e.3"]], corpus=[corpus], compare="gpt2,cl100k,o200k,mistral",
                 reference_dir_opt=reftok, threads=2)
    assert r["schema"] == SCHEMA
    assert r["tokenizers"] == ["e.1", "e.3", "gpt2", "cl100k", "o200k", "mistral"]
    direct = {
        n: Tokenizer.load(works[n] / "train" / "model.json").encode for n in ("e.1", "e.3")
    }
    for n, enc in (("gpt2", "r50k_base"), ("cl100k", "cl100k_base"), ("o200k", "o200k_base")):
        direct[n] = tiktoken.get_encoding(enc).encode_ordinary  # tiktoken's own loading, from its cache
    sp = spm.SentencePieceProcessor(model_file=str(reftok / "mistral7b_v0.1.tokenizer.model"))
    direct["mistral"] = sp.encode
    by_group: dict[str, list[str]] = {}
    for text, lang in eval_docs():
        by_group.setdefault(lang or "und", []).append(f"{text}")
    assert sorted(r["groups"]) == sorted(by_group)
    for g, texts in by_group.items():
        row = r["groups"][g]
        assert row["docs"] == len(texts)
        assert row["bytes"] == sum(len(t.encode()) for t in texts)
        assert row["chars"] == sum(len(t) for t in texts)
        for n, enc in direct.items():
            assert row["tokens"][n] == sum(len(enc(t)) for t in texts), (g, n)
    total = {n: sum(len(enc(t)) for t, _ in eval_docs()) for n, enc in direct.items()}
    assert r["all"]["tokens"] == total
    b = r["all"]["bytes_per_token"]
    assert r["all"]["change"]["o200k"] == pytest.approx(b["o200k"] / b["e.1"] - 1)


def brute_audit(tok, texts):
    """The audit from its definitions, one token at a time, with the pure-Python BPE."""
    specials = set(tok.special_tokens.values())
    vocab = {i: b for i, b in tok.vocab.items() if i not in specials}
    ranks = {pair: k for k, pair in enumerate(tok.merges)}
    pat = regex.compile(tok.pattern)

    def encode(b: bytes) -> list[bytes]:
        try:
            text = b.decode("utf-8")
        except UnicodeDecodeError:
            # Part of a character: no str spells it, and the regex module cannot say
            # where the scanner cuts invalid UTF-8; encode it alone, one call per token.
            return [tok.vocab[i] for i in tok._encode_bytes(b).tolist()]
        out = []
        for piece in pat.findall(text):
            out += merge_order(piece.encode("utf-8"), ranks)
        return out

    unreachable = [i for i, b in sorted(vocab.items()) if encode(b) != [b]]
    emitted = Counter()
    by_bytes = {b: i for i, b in vocab.items()}
    for t in texts:
        emitted.update(by_bytes[p] for p in encode(t.encode()))
    learned = [i for i, b in sorted(vocab.items()) if len(b) >= 2]
    dead = [i for i in learned if emitted[i] == 0]
    rare = [i for i in learned if 0 < emitted[i] < 10]
    kids = Counter()
    for a, b in tok.merges:
        kids[by_bytes[a]] += emitted[by_bytes[a + b]]
        if b != a:
            kids[by_bytes[b]] += emitted[by_bytes[a + b]]
    scaffold = [i for i in learned if kids[i] > 0 and emitted[i] < 0.1 * kids[i]]
    longest = sorted(vocab, key=lambda i: (-len(vocab[i]), i))[:20]

    def text(b):
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            return None

    repeated = [i for i, b in sorted(vocab.items()) if text(b) and len(text(b)) >= 3 and len(set(text(b))) == 1]
    punct = [
        i for i, b in sorted(vocab.items())
        if text(b) and len(text(b).strip()) >= 2 and all(unicodedata.category(c)[0] in "PS" for c in text(b).strip())
    ]
    return {
        "unreachable": unreachable, "dead": dead, "rare": rare, "scaffold": scaffold,
        "longest": [[i, len(vocab[i])] for i in longest], "repeated": repeated, "punctuation": punct,
    }


@pytest.mark.parametrize("name", ["e.1", "e.3"])
def test_audit_equals_brute_force(built, name):
    from dwstok import Tokenizer

    corpus, works = built
    r = evaluate([works[name]], corpus=[corpus], threads=1)
    got = r["audit"][name]
    tok = Tokenizer.load(works[name] / "train" / "model.json")
    want = brute_audit(tok, [t for t, _ in eval_docs()])
    for k, v in want.items():
        assert got[k] == v, k
    assert got["counts"]["dead"] == len(want["dead"])
    assert want["rare"] and want["longest"][0][1] > 3  # the lists are not trivially empty


def test_unreachable_token_is_found():
    """A vocabulary whose merge order makes 'abc' unreachable: 'ab' merges first, then
    (a, bc) never applies, so encoding 'abc' gives ['ab', 'c'], not the token."""
    from dwstok import Tokenizer
    from stages.evaluate.models import ModelSubject

    vocab = {i: bytes([i]) for i in range(256)}
    tok = Tokenizer.from_vocab_merges(vocab, [(b"a", b"b"), (b"b", b"c"), (b"a", b"bc")], pattern="gpt2")
    m = ModelSubject(name="x", path=None, tok=tok)
    assert [tok.vocab[i] for i in audit_mod.unreachable(m)] == [b"abc"]


def test_sections_on_small_builds(built, tmp_path):
    from dwstok import Tokenizer

    corpus, works = built
    par = tmp_path / "par"
    par.mkdir()
    (par / "en.txt").write_text("All human beings are born free and equal.", encoding="utf-8")
    (par / "vi.txt").write_text(unicodedata.normalize("NFD", "Tất cả mọi người sinh ra đều được tự do."), encoding="utf-8")
    (par / "zh.txt").write_text("人人生而自由，在尊严和权利上一律平等。", encoding="utf-8")
    r = evaluate([works["e.1"], works["e.3"]], corpus=[corpus], parallel=par, threads=1)
    p = r["fairness"]
    assert list(p["not_nfc"]) == ["vi"]
    assert p["tokenizers"]["e.1"]["relative"]["en"] == 1.0
    assert r["parallel"]["vi"]["e.1"] > p["not_nfc"]["vi"]["tokens_nfc"]["e.1"]
    assert r["parallel"]["zh"]["e.1"] == len(Tokenizer.load(works["e.1"] / "train" / "model.json").encode(
        (par / "zh.txt").read_text(encoding="utf-8")))
    # balance: α = 1 gives every group the weight 1
    assert {row["weight"] for row in r["balance"]["e.1"]["groups"]} == {1.0}
    assert r["balance"]["e.3"]["alpha"] == 0.7
    # ids: the layout adds up and the forced merges are counted
    ids = r["id_space"]["e.3"]
    assert ids["forced_merges"] > 0 and sum(ids.values()) == 288 + 150
    # digits: the aligned share equals a count made token by token
    d = r["digits"]["tokenizers"]
    for name in ("e.1", "e.3"):
        tok = Tokenizer.load(works[name] / "train" / "model.json")
        n_digit = n_ok = 0
        for text, _ in eval_docs():
            raw = text.encode()
            runs = [(m.start(), m.end()) for m in regex.finditer(rb"[0-9]+", raw)]
            pos = 0
            for t in tok.encode(text):
                b = tok.vocab[t]
                if b.isdigit() and b.isascii():
                    s0, e0 = pos, pos + len(b)
                    rs, re_ = next(run for run in runs if run[0] <= s0 < run[1])
                    n_digit += 1
                    n_ok += (s0 == rs or (re_ - s0) % 3 == 0) and (e0 == re_ or (re_ - e0) % 3 == 0)
                pos += len(b)
        assert (d[name]["digit_tokens"], d[name]["aligned"]) == (n_digit, n_ok)
    assert d["e.1"]["examples"]["1234567"][0].startswith("1")
    # Han: the forced build covers more occurrences
    h = r["han"]["tokenizers"]
    assert h["e.3"]["share"] > h["e.1"]["share"]
    assert set(r["stage_times"]["e.1"]) == {"pretokenize", "count", "train"}
    st = r["stochastok"]["e.1"]
    assert st["tokens_after"] > st["tokens"]
