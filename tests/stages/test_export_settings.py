"""The ``export:`` keys, checked in the runtimes that read them: HF tokenizers and
transformers (post-processor, split_special_tokens, chat template, model_max_length) and
tiktoken (the encoding's name)."""

from __future__ import annotations

import json

import pytest

from stages import export
from stages.config import ExportConfig
from tests.small_model import SAMPLE, small_model

TEMPLATE = "{% for m in messages %}<bos>{{ m['role'] }}\n{{ m['content'] }}<eos>{% endfor %}"
MESSAGES = [{"role": "user", "content": "The fox"}, {"role": "assistant", "content": "统计 1234567"}]


@pytest.fixture(scope="module")
def tok():
    return small_model()


def write(tok, tmp_path, **settings):
    export.export_tokenizer(tok, tmp_path, ExportConfig(**settings))
    return tmp_path


def auto(d):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(d))


def test_defaults_add_nothing(tok, tmp_path):
    from tokenizers import Tokenizer as HF

    d = write(tok, tmp_path)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    assert (cfg["model_max_length"], cfg["split_special_tokens"], cfg["add_bos_token"], cfg["add_eos_token"]) == (
        8192, True, False, False,
    )
    assert "chat_template" not in cfg and json.loads((d / "tokenizer.json").read_text())["post_processor"] is None
    want = tok.encode(SAMPLE)
    assert auto(d)(SAMPLE)["input_ids"] == want
    hf = HF.from_file(str(d / "tokenizer.json"))
    hf.encode_special_tokens = True
    assert hf.encode(SAMPLE).ids == want


@pytest.mark.parametrize("bos,eos", [(True, False), (False, True), (True, True)])
def test_add_bos_eos_post_processor(tok, tmp_path, bos, eos):
    from tokenizers import Tokenizer as HF

    d = write(tok, tmp_path, add_bos=bos, add_eos=eos)
    ids = tok.encode(SAMPLE)
    b, e = tok.special_tokens["<bos>"], tok.special_tokens["<eos>"]
    framed = [b] * bos + ids + [e] * eos
    hf = HF.from_file(str(d / "tokenizer.json"))
    hf.encode_special_tokens = True
    assert hf.encode(SAMPLE).ids == framed
    assert hf.encode(SAMPLE, add_special_tokens=False).ids == ids
    pair = hf.encode("The fox", "der Fuchs").ids
    assert pair == [b] * bos + tok.encode("The fox") + [e] * eos + [b] * bos + tok.encode("der Fuchs") + [e] * eos
    a = auto(d)
    assert a(SAMPLE)["input_ids"] == framed
    assert a(SAMPLE, add_special_tokens=False)["input_ids"] == ids
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    assert (cfg["add_bos_token"], cfg["add_eos_token"]) == (bos, eos)
    # the self-check and tiktoken are untouched: ids of the text only
    assert export.load_tiktoken(d).encode_ordinary(SAMPLE) == ids


def test_model_max_length_from_settings(tok, tmp_path):
    d = write(tok, tmp_path, model_max_length=1024)
    assert auto(d).model_max_length == 1024


def test_chat_template_trap_and_its_ways_out(tok, tmp_path):
    b, e = tok.special_tokens["<bos>"], tok.special_tokens["<eos>"]
    as_specials = []
    for m in MESSAGES:
        as_specials += [b] + tok.encode(f"{m['role']}\n{m['content']}") + [e]
    rendered = "".join(f"<bos>{m['role']}\n{m['content']}<eos>" for m in MESSAGES)

    safe = auto(write(tok, tmp_path / "safe", chat_template=TEMPLATE))
    assert safe.apply_chat_template(MESSAGES, tokenize=False) == rendered
    ids = safe.apply_chat_template(MESSAGES, tokenize=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    assert ids == tok.encode(rendered) != as_specials  # the trap: specials read as text
    ids = safe.apply_chat_template(MESSAGES, tokenize=True, tokenizer_kwargs={"split_special_tokens": False})
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    assert ids == as_specials
    assert safe("<bos>")["input_ids"] == tok.encode("<bos>")  # other calls keep the safe default

    parsing = auto(write(tok, tmp_path / "parse", chat_template=TEMPLATE, split_special_tokens=False, add_bos=True))
    ids = parsing.apply_chat_template(MESSAGES, tokenize=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    assert ids == as_specials  # one <bos> per turn: the post-processor is not applied on top
    assert parsing("<bos>", add_special_tokens=False)["input_ids"] == [b]


def test_tiktoken_name(tok, tmp_path):
    d = write(tok, tmp_path, tiktoken_name="my-enc")
    assert json.loads((d / "tiktoken.json").read_text())["name"] == "my-enc"
    assert export.load_tiktoken(d).name == "my-enc"
    d2 = write(tok, tmp_path / "default")
    assert export.load_tiktoken(d2).name == "dwslmtok-t1"


def test_export_stage_reads_the_config(tok, tmp_path):
    from stages.executors import LocalExecutor
    from stages.inputs import Inputs

    from .bpe_models import stage_config, write_train_stage

    write_train_stage(tmp_path / "train", tok)
    cfg = stage_config(version="t1", pattern="o200k-rdigits", export={"model_max_length": 2048, "add_eos": True})
    with LocalExecutor(1) as ex:
        m = export.run(cfg, Inputs(workdir=tmp_path), tmp_path / "export", ex)
    assert m.info["model_max_length"] == 2048
    out = json.loads((tmp_path / "export" / "tokenizer_config.json").read_text())
    assert (out["model_max_length"], out["add_eos_token"]) == (2048, True)
    # a changed export key re-runs export
    cfg2 = stage_config(version="t1", pattern="o200k-rdigits", export={"model_max_length": 4096})
    with LocalExecutor(1) as ex:
        m2 = export.run(cfg2, Inputs(workdir=tmp_path), tmp_path / "export", ex)
    assert not m2.up_to_date and m2.info["model_max_length"] == 4096


def test_chat_template_trap_is_noted(tok):
    specials = tok.special_tokens
    assert "<bos>, <eos>" in export.chat_template_trap(ExportConfig(chat_template=TEMPLATE), specials)
    assert export.chat_template_trap(ExportConfig(chat_template=TEMPLATE, split_special_tokens=False), specials) is None
    assert export.chat_template_trap(ExportConfig(chat_template="{{ messages }}"), specials) is None
    assert export.chat_template_trap(ExportConfig(), specials) is None
