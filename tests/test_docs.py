"""The docs say what the code does: the config reference matches the schema, every row of
the `<bos>` table in docs/exports.md holds in its runtime, and the snippets of
docs/formats.md read files dwstok wrote."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from stages.config import schema

DOCS = Path(__file__).resolve().parents[1] / "docs"


def table_rows(md: str, first_header: str) -> list[list[str]]:
    """The body rows of every markdown table whose first column is ``first_header``."""
    rows, in_table = [], False
    for line in md.splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if cells[0] == first_header:
            in_table = True
        elif in_table and not set(cells[0]) <= set("-: "):
            rows.append(cells)
    return rows


# -- docs/config.md ----------------------------------------------------------------------


def documented_keys() -> dict[str, list[str]]:
    rows = table_rows((DOCS / "config.md").read_text(encoding="utf-8"), "key")
    out = {}
    for r in rows:
        m = re.fullmatch(r"`([\w.]+)`", r[0])
        assert m, f"docs/config.md: a key cell must be one `key`, got {r[0]!r}"
        out[m[1]] = r
    return out


def test_config_reference_lists_every_key_and_no_other():
    doc, keys = documented_keys(), schema()
    missing = [k for k in keys if k not in doc]
    assert not missing, f"docs/config.md has no row for the config key(s) {missing}: add them (type, default, effect)"
    unknown = [k for k in doc if k not in keys]
    assert not unknown, f"docs/config.md documents {unknown}, which stages/config.py does not have"


def test_config_reference_defaults_match_the_schema():
    for key, (key_cell, _type, default, effect) in documented_keys().items():
        typ, want = schema()[key]
        assert effect, f"docs/config.md: {key} has no effect text"
        m = re.fullmatch(r"`([^`]*)`", default)
        if m is None:
            continue  # prose ("required", "the 32 names of the presets"), or a section
        if hasattr(typ, "__dataclass_fields__"):
            continue
        got = yaml.safe_load(m[1])
        want = list(want) if isinstance(want, tuple) else want
        assert got == want, f"docs/config.md says {key} defaults to {got!r}; stages/config.py says {want!r}"


def test_config_reference_names_the_patterns():
    from dwstok.patterns import PATTERNS

    text = documented_keys()["pattern"][3]
    for name in PATTERNS:
        assert f"`{name}`" in text, f"docs/config.md: pattern name {name!r} is not described"


# -- docs/exports.md: the <bos> table -----------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from stages.export import export_tokenizer
    from tests.small_model import small_model

    d = tmp_path_factory.mktemp("export")
    tok = small_model()
    export_tokenizer(tok, d)
    return tok, d


def _runtimes(tok, d):
    """call cell of the table -> (function of text giving ids, or raising)."""
    import tiktoken  # noqa: F401
    from tokenizers import Tokenizer as HF
    from transformers import AutoTokenizer

    import dwstok

    auto = AutoTokenizer.from_pretrained(str(d))
    hf = HF.from_file(str(d / "tokenizer.json"))
    hf_split = HF.from_file(str(d / "tokenizer.json"))
    hf_split.encode_special_tokens = True
    enc = dwstok.load_tiktoken(d)
    return {
        "`tok.encode(text)`": tok.encode,
        '`tok.encode(text, allowed_special={"<bos>"})`': lambda t: tok.encode(t, allowed_special={"<bos>"}),
        "`AutoTokenizer.from_pretrained(d).encode(text)`": lambda t: auto.encode(t),
        "`AutoTokenizer.from_pretrained(d).encode(text, split_special_tokens=False)`": lambda t: auto.encode(
            t, split_special_tokens=False
        ),
        "`Tokenizer.from_file(f).encode(text)`": lambda t: hf.encode(t).ids,
        "`Tokenizer.from_file(f)` with `encode_special_tokens = True`": lambda t: hf_split.encode(t).ids,
        "`enc.encode(text)`": enc.encode,
        "`enc.encode_ordinary(text)`": enc.encode_ordinary,
        '`enc.encode(text, allowed_special={"<bos>"})`': lambda t: enc.encode(t, allowed_special={"<bos>"}),
    }


def test_bos_table_holds_in_every_runtime(exported):
    tok, d = exported
    rows = table_rows((DOCS / "exports.md").read_text(encoding="utf-8"), "runtime")
    calls = _runtimes(tok, d)
    assert {r[1] for r in rows} == set(calls), "docs/exports.md's <bos> table and this test list different calls"
    text = "say <bos> now"
    as_text = tok.encode(text)
    as_special = tok.encode("say ") + [tok.special_tokens["<bos>"]] + tok.encode(" now")
    assert as_text != as_special
    for runtime, call, outcome in rows:
        fn = calls[call]
        if outcome == "an error":
            with pytest.raises(ValueError, match="special token"):
                fn(text)
        else:
            want = {"text": as_text, "the special id": as_special}[outcome]
            assert fn(text) == want, f"docs/exports.md: {runtime} {call} does not give {outcome}"


# -- docs/formats.md: the readers run on dwstok's files ------------------------------------


def _snippets() -> dict[str, object]:
    md = (DOCS / "formats.md").read_text(encoding="utf-8")
    ns: dict[str, object] = {}
    for block in re.findall(r"```python\n(.*?)```", md, re.S):
        exec(compile(block, "docs/formats.md", "exec"), ns)
    return ns


def test_formats_model_reader(exported, tmp_path):
    tok, _ = exported
    tok.save(tmp_path / "model.json")
    vocab, merges, specials, pattern = _snippets()["read_model"](tmp_path / "model.json")
    assert vocab == tok.vocab and specials == tok.special_tokens and pattern == tok.pattern
    assert [(vocab[a], vocab[b]) for a, b, _ in merges] == tok.merges
    assert all(vocab[a] + vocab[b] == vocab[n] for a, b, n in merges)


def test_formats_shard_reader(exported, tmp_path):
    import pyarrow as pa

    from dwstok.shards import ShardReader, write_shard

    tok, _ = exported
    docs = ["The fox", "", "统计语言 1234567", "é"]
    ids = [tok.encode(t) for t in docs]
    flat_in = np.array([i for d in ids for i in d], np.uint32)
    offs_in = np.cumsum([0] + [len(d) for d in ids])
    write_shard(
        tmp_path / "part-00000.arrow", flat_in, offs_in,
        model_sha256=tok.sha256, version=tok.version, pattern=tok.pattern, n_vocab=tok.n_vocab,
        lang=pa.array(["en", "en", "zh", "fr"]),
    )
    flat, offsets, langs, meta = _snippets()["read_shard"](tmp_path / "part-00000.arrow")
    assert flat.dtype == np.uint16 and flat.tolist() == flat_in.tolist() and offsets.tolist() == offs_in.tolist()
    assert langs == ["en", "en", "zh", "fr"] and meta["dwstok.model_sha256"] == tok.sha256
    with ShardReader(tmp_path) as r:
        assert [r.doc(i).tolist() for i in range(len(r))] == ids
