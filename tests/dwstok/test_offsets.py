"""Tokenizer.encode_with_offsets: character offsets that cut the text back into its tokens."""

from __future__ import annotations

from hypothesis import given, settings

from .test_tokenizer import TEXT, tok  # noqa: F401  (the module's fixture)


def check_offsets(tok, text, ids, offsets, allowed=()):
    """Each token covers the characters its bytes touch; a token whose bytes are whole
    characters is exactly ``text[start:end]``."""
    assert ids == tok.encode(text, allowed_special=allowed)
    assert len(offsets) == len(ids)
    cum = [0]  # byte offset of each character, and of the end
    for ch in text:
        cum.append(cum[-1] + len(ch.encode("utf-8")))
    pos = 0  # byte offset of the token
    for i, (s, e) in zip(ids, offsets):
        b = tok.decode_bytes([i])
        end = pos + len(b)
        assert cum[s] <= pos < cum[s + 1] and cum[e - 1] < end <= cum[e]
        if cum[s] == pos and cum[e] == end:
            assert text[s:e].encode("utf-8") == b
        pos = end
    assert pos == cum[-1]


def test_golden_split_character(tok):
    text = "the 語é"
    ids, offsets = tok.encode_with_offsets(text)
    # "h"+"e" merge; 語 and é have no merges: one token a byte, each covering its character
    assert [text[s:e] for s, e in offsets] == ["t", "he", " ", "語", "語", "語", "é", "é"]
    assert offsets[3:] == [(4, 5)] * 3 + [(5, 6)] * 2
    check_offsets(tok, text, ids, offsets)


def test_specials_take_their_name(tok):
    text = "a<bos>é"
    ids, offsets = tok.encode_with_offsets(text, allowed_special={"<bos>"})
    assert ids[1] == tok.special_tokens["<bos>"] and offsets[1] == (1, 6)
    check_offsets(tok, text, ids, offsets, {"<bos>"})
    ids, offsets = tok.encode_with_offsets(text)
    assert tok.special_tokens["<bos>"] not in ids
    check_offsets(tok, text, ids, offsets)


def test_empty(tok):
    assert tok.encode_with_offsets("") == ([], [])


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_offsets_cut_the_text_into_tokens(tok, text):
    ids, offsets = tok.encode_with_offsets(text)
    check_offsets(tok, text, ids, offsets)
