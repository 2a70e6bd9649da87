"""export: tokenizer.json / tokenizer_config.json / .tiktoken, and the parity chain

dwstok == HF tokenizers (Tokenizer.from_file) == transformers (AutoTokenizer) == tiktoken
on the exported files, on corpus documents and on hypothesis strings.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dwstok.errors import PatternMismatchError
from stages import export
from stages.executors import LocalExecutor
from stages.inputs import Inputs

from .bpe_models import SPECIALS, corpus_merges, dwslm_model, stage_config, write_train_stage

N_MERGES = 1500


@pytest.fixture(scope="module")
def model_32_3(corpus_dir):
    m = corpus_merges(str(corpus_dir / "dev.parquet"), "o200k-rdigits", N_MERGES)
    return dwslm_model(m, pattern="o200k-rdigits", version="32.3")


@pytest.fixture(scope="module")
def model_32_1(corpus_dir):
    m = corpus_merges(str(corpus_dir / "dev.parquet"), "o200k", N_MERGES)
    return dwslm_model(m, pattern="o200k", version="32.1")


class Loaded:
    """The three foreign loaders on one export folder."""

    def __init__(self, tok, d):
        from transformers import AutoTokenizer

        self.tok, self.dir = tok, d
        self.hf = export.load_hf(d)
        self.auto = AutoTokenizer.from_pretrained(str(d))
        self.tt = export.load_tiktoken(d)

    def check(self, text: str) -> None:
        want = self.tok.encode(text)
        assert self.hf.encode(text, add_special_tokens=False).ids == want, "tokenizers"
        assert self.auto.encode(text, add_special_tokens=False) == want, "transformers"
        assert self.tt.encode_ordinary(text) == want, "tiktoken"
        assert self.tt.encode(text, disallowed_special=()) == want, "tiktoken"
        assert self.hf.decode(want, skip_special_tokens=False) == text
        assert self.tt.decode(want) == text


@pytest.fixture(scope="module", params=["32.1", "32.3"])
def loaded(request, tmp_path_factory, tiktoken_cache, model_32_1, model_32_3):
    tok = model_32_1 if request.param == "32.1" else model_32_3
    d = tmp_path_factory.mktemp(f"export-{request.param}")
    export.export_tokenizer(tok, d)
    return Loaded(tok, d)


def test_byte_level_map_is_gpt2s():
    m = export.bytes_to_unicode()
    assert len(set(m.values())) == 256
    assert export.byte_level(b" hello\n") == "ĠhelloĊ"
    assert m[ord("!")] == "!" and m[0] == "Ā"


def test_files_and_structure(tmp_path, model_32_3):
    files = export.export_tokenizer(model_32_3, tmp_path)
    assert sorted(files) == sorted(p.name for p in tmp_path.iterdir())
    tj = json.loads((tmp_path / "tokenizer.json").read_text())
    model = tj["model"]
    assert model["type"] == "BPE" and model["ignore_merges"] is False
    assert model["byte_fallback"] is False and tj["normalizer"] is None
    assert len(model["merges"]) == N_MERGES
    assert model["merges"][0] == " ".join(export.byte_level(x) for x in model_32_3.merges[0])
    assert model["vocab"]["Ġ"] == 32 + 32 and model["vocab"]["Ā"] == 32  # byte b at 32 + b
    assert min(model["vocab"].values()) == 0 and max(model["vocab"].values()) == 287 + N_MERGES
    pre = tj["pre_tokenizer"]["pretokenizers"]
    assert pre[0]["type"] == "Split" and pre[0]["behavior"] == "Isolated"
    assert pre[0]["pattern"]["Regex"] == model_32_3.pattern
    assert pre[1] == {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                      "use_regex": False}
    assert [(a["id"], a["content"], a["special"]) for a in tj["added_tokens"]] == [
        (i, s, True) for i, s in enumerate(SPECIALS)]
    cfg = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert cfg["split_special_tokens"] is True
    assert (cfg["bos_token"], cfg["eos_token"], cfg["pad_token"], cfg["unk_token"]) == (
        "<bos>", "<eos>", "<pad>", "<unk>")
    assert cfg["tokenizer_class"] == "PreTrainedTokenizerFast"
    meta = json.loads((tmp_path / "tiktoken.json").read_text())
    assert meta["pat_str"] == model_32_3.pattern and meta["special_tokens"]["<bos>"] == 1
    assert meta["version"] == "32.3" and meta["model_sha256"] == model_32_3.sha256
    lines = (tmp_path / "tokenizer.tiktoken").read_bytes().splitlines()
    assert len(lines) == 256 + N_MERGES
    assert lines[0].split()[1] == b"32" and lines[-1].split()[1] == str(287 + N_MERGES).encode()


def test_loaders_see_specials_but_never_match_them(loaded):
    from tokenizers import Tokenizer as HFTokenizer

    # documented limitation: a bare from_file matches specials until told not to
    raw = HFTokenizer.from_file(str(loaded.dir / "tokenizer.json"))
    assert raw.encode("<bos>").ids == [1]
    assert loaded.hf.token_to_id("<bos>") == 1
    assert loaded.hf.get_vocab_size() == loaded.tok.n_vocab
    assert loaded.auto.bos_token_id == 1 and loaded.auto.eos_token_id == 2
    assert loaded.auto.pad_token_id == 0
    assert loaded.auto.convert_tokens_to_ids("</think>") == 12
    text = "<bos>hi<eos> <|endoftext|> <reserved_31>"
    loaded.check(text)
    ids = loaded.tok.encode(text)
    assert not set(ids) & set(range(32))
    # opting in parses them, in tiktoken as in dwstok
    assert loaded.tt.encode("<bos>x", allowed_special="all")[0] == 1
    assert loaded.tok.encode("<bos>x", allowed_special="all") == loaded.tt.encode(
        "<bos>x", allowed_special="all")


GOLDEN = [
    "",
    "Hello world! The year 2026 has 1234567 seconds.\n\n  Indented   text\r\n",
    "1 12 123 1234 12345 123456 1234567 ١٢٣٤٥ ১২৩৪৫৬ １２３４",
    "   \t\t\n\n\n    x  \u3000\u3000y\xa0\xa0z  \n",
    "统计语言模型的中文文本，中文分词很重要。日本語のテキストです。한국어 텍스트",
    "🎉🎉 👍🏽 👨‍👩‍👧‍👦 🇩🇪🇫🇷 e\u0301 \u0915\u094d\u0937 a\u0308\u0301\u0323",
    "don't WON'T I'M we'Ll they'RE 's 'S",
    "def f(x):\n    return x ** 2  # square\n\n\nprint(f(3))\n",
]


@pytest.mark.parametrize("text", GOLDEN)
def test_golden_strings(loaded, text):
    loaded.check(text)


def test_dev_sample(loaded, corpus_dir):
    t = pq.read_table(corpus_dir / "dev.parquet", columns=["text"]).column("text")
    for text in t.to_pylist()[::40]:
        loaded.check(text[:50_000])


FRAGMENTS = SPECIALS[:14] + [
    "<|endoftext|>", "<", ">", "|", "bos", "0", "7", "12", "2026", "1234567", "٣", "१२", "３",
    " ", "  ", "\t", "\n", "\r\n", "\r", "\u3000", "\xa0", "\u2028",
    "统计", "语言", "模型", "中文", "日本語", "한국어",
    "😀", "👍🏽", "👨‍👩‍👧", "🇩🇪",
    "e\u0301", "\u0301", "\u0308", "\u0915\u094d", "é",
    "'s", "'LL", "don't", "A", "Hello", "WORLD", "straße", "Привет", "x", "...", "/", "//",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=24).map("".join))
def test_hypothesis_fragments(loaded, text):
    loaded.check(text)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=40))
def test_hypothesis_any_text(loaded, text):
    loaded.check(text)


def test_hf_pattern_drops_cl100k_possessive():
    from dwstok.patterns import CL100K, O200K, O200K_RDIGITS

    assert r"\p{N}{1,3}+" not in export.hf_pattern(CL100K)
    assert export.hf_pattern(O200K) == O200K
    assert export.hf_pattern(O200K_RDIGITS) == O200K_RDIGITS


def test_reexport_is_not_served_stale_by_tiktoken_cache(tmp_path, tiktoken_cache, model_32_1, model_32_3):
    export.export_tokenizer(model_32_1, tmp_path)
    a = export.load_tiktoken(tmp_path)
    export.export_tokenizer(model_32_3, tmp_path)
    b = export.load_tiktoken(tmp_path)
    text = "year 2026 1234567 xyz"
    assert a.encode_ordinary(text) == model_32_1.encode(text)
    assert b.encode_ordinary(text) == model_32_3.encode(text)


# -- the stage -------------------------------------------------------------------------
def test_run_stage(tmp_path, tiktoken_cache, model_32_3):
    write_train_stage(tmp_path / "train", model_32_3)
    cfg = stage_config(version="32.3", pattern="o200k-rdigits")
    inputs = Inputs(workdir=tmp_path)
    with LocalExecutor(1) as ex:
        m = export.run(cfg, inputs, tmp_path / "export", ex)
        assert not m.up_to_date
        assert set(m.outputs) == {"tokenizer.json", "tokenizer_config.json",
                                  "tokenizer.tiktoken", "tiktoken.json"}
        assert m.info["model_sha256"] == model_32_3.sha256
        assert m.counts["merges"] == N_MERGES
        again = export.run(cfg, inputs, tmp_path / "export", ex)
        assert again.up_to_date
        assert export.self_check(model_32_3, tmp_path / "export") == []


@pytest.mark.parametrize("over", [dict(version="32.2"), dict(pattern="o200k")])
def test_run_refuses_other_version_or_pattern(tmp_path, model_32_3, over):
    write_train_stage(tmp_path / "train", model_32_3)
    cfg = stage_config(**{"version": "32.3", "pattern": "o200k-rdigits", **over})
    with pytest.raises(PatternMismatchError):
        export.run(cfg, Inputs(workdir=tmp_path), tmp_path / "export", LocalExecutor(1))
    assert not (tmp_path / "export" / "tokenizer.json").exists()


# -- whole corpus (slow) ------------------------------------------------------------------
def big_model_for(corpus_dir, pattern):
    """16k merges learned on ~200 documents per language of train (the real trainer)."""
    m = corpus_merges(str(corpus_dir / "train.parquet"), pattern, 16000, n_docs=6000)
    return dwslm_model(m, pattern=pattern, version="big")


@pytest.mark.slow
@pytest.mark.parametrize(
    "split,pattern", [("dev", "o200k"), ("dev", "o200k-rdigits"), ("train", "o200k-rdigits")]
)
def test_every_corpus_document(tmp_path, tiktoken_cache, corpus_dir, split, pattern):
    big_model = big_model_for(corpus_dir, pattern)
    export.export_tokenizer(big_model, tmp_path)
    ld = Loaded(big_model, tmp_path)
    pf = pq.ParquetFile(corpus_dir / f"{split}.parquet")
    n = 0
    for batch in pf.iter_batches(columns=["text"], batch_size=256):
        texts = batch.column(0).to_pylist()
        want = big_model.encode_batch(texts)
        assert [e.ids for e in ld.hf.encode_batch(texts, add_special_tokens=False)] == want
        assert ld.tt.encode_ordinary_batch(texts) == want
        assert ld.auto(texts, add_special_tokens=False)["input_ids"] == want
        n += len(texts)
    assert n == pf.metadata.num_rows


@pytest.mark.slow
@pytest.mark.parametrize("version,pattern", [("32.2", "o200k"), ("32.3", "o200k-rdigits")])
def test_full_size_recipe_every_dev_document(tmp_path, tiktoken_cache, corpus_dir, version, pattern):
    """The real recipe (32,768 ids, α = 0.7, forced Han merges) trained by dwstok.train_bpe
    on dev: every dev document gives the same ids in all four encoders."""
    from dwstok import train_bpe

    tok = train_bpe(str(corpus_dir / "dev.parquet"), 32768, special_tokens=SPECIALS,
                    pattern=pattern, alpha=0.7, han_coverage=0.9, version=version)
    assert tok.n_vocab == 32768 and tok.special_tokens["<bos>"] == 1
    export.export_tokenizer(tok, tmp_path)
    ld = Loaded(tok, tmp_path)
    texts = pq.read_table(corpus_dir / "dev.parquet", columns=["text"]).column("text").to_pylist()
    want = tok.encode_batch(texts)
    assert [e.ids for e in ld.hf.encode_batch(texts, add_special_tokens=False)] == want
    assert ld.tt.encode_ordinary_batch(texts) == want
    assert ld.auto(texts, add_special_tokens=False)["input_ids"] == want
