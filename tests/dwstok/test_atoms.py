"""Atoms (characters that start merging as one token) never change an id.

Three references: the same tables with atoms switched off (on raw bytes, valid UTF-8
or not), tiktoken on text made of atoms next to exactly the neighbours their patterns
forbid, and a small trained model checked the same way.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dwstok import Tokenizer, train_bpe
from dwstok import bpe
from dwstok.atoms import JOIN_BITS_A_PAIR, atom_id
from dwstok.bpe.parts import SPACE_BEFORE


def _encode_pieces(tables, data: bytes, cuts) -> list[int]:
    bounds = np.unique(np.clip(np.asarray([0, len(data), *cuts], np.int64), 0, len(data)))
    return bpe.encode_bounds(np.frombuffer(data, np.uint8).copy(), bounds, tables).tolist()


def _no_atoms(tables):
    return tables._replace(atoms=np.zeros(0, np.int64))


@pytest.fixture(scope="module")
def o200k(reftok, tiktoken_cache):
    import tiktoken
    import tiktoken.load

    spec = json.loads((reftok / "encodings.json").read_text())["encodings"]["o200k_base"]
    ours = Tokenizer.from_tiktoken(reftok / spec["file"], pattern="o200k", special_tokens=spec["special_tokens"])
    ranks = tiktoken.load.load_tiktoken_bpe(str(reftok / spec["file"]), expected_hash=spec["sha256"])
    theirs = tiktoken.Encoding("o200k_base", pat_str=spec["pat_str"], mergeable_ranks=ranks, special_tokens={})
    return ours, theirs


def _pattern_bytes(tables, cp: int) -> list[tuple[int, bytes]]:
    """(side, bytes) of the neighbour patterns recorded for an atom."""
    a = int(tables.atoms[cp])
    out = [(0, b" ")] if a & SPACE_BEFORE else []  # the commonest pattern, a flag
    for q in range(a >> 32, (a >> 32) + ((a >> 24) & 0x7F)):
        code = int(tables.atom_pats[q])
        k, side = code & 7, (code >> 3) & 1
        out.append((side, (code >> 4).to_bytes(8, "little")[:k]))
    return out


def test_o200k_has_atoms_for_common_characters(o200k):
    ours, _ = o200k
    t = ours._tables
    for ch in "用の한оाα─":
        assert atom_id(t, ord(ch)) == ours.encode(ch)[0], ch
    # the space before a Han character may join its first byte (" \xe7" is a token): a pattern
    assert (0, b" ") in _pattern_bytes(t, ord("用"))


def test_forbidding_neighbours_match_tiktoken(o200k):
    """Every atom with patterns, placed next to each neighbour it records, and after a space."""
    ours, theirs = o200k
    t = ours._tables
    cps = np.flatnonzero(t.atoms >= 0)
    texts = []
    for cp in cps[((t.atoms[cps] >> 24) & 0x7F > 0) | (t.atoms[cps] & SPACE_BEFORE != 0)]:
        ch = chr(int(cp))
        for side, pat in _pattern_bytes(t, int(cp)):
            nb = pat.decode("utf-8", "ignore") or "x"
            texts.append(nb + ch + ch if side == 0 else ch + ch + nb)
        texts.append(" " + ch + ch + "一")
    assert len(texts) > 1000
    for text in texts:
        assert ours.encode(text) == theirs.encode_ordinary(text), text


ATOMIC = list("用的一是了我不人在他有这个上们来到时大地为子中你说生国年着就那和要她出也得里后自以会家可下而过天去能对小多然于心学么之都好看起发当没成只如事把还用第样道想作种开美总从无情己面最女但现前些所同日手又行意动方期它头经长儿回位分爱老因很给名法间知世什两次使身者被高已亲其进此话常与活正感")
OTHERS = list(" \n'-,.0aZ") + list("─│┌┐└┘├┤┬┴┼═║") + list("оеаинвлкмпдзбйा्कसनतंप") + list("しれルプァォ數標檔範塊顯複") + ["😀", "\u0301", "\ue000"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(ATOMIC + OTHERS), min_size=1, max_size=80).map("".join))
def test_mixed_scripts_match_tiktoken(o200k, text):
    ours, theirs = o200k
    assert ours.encode(text) == theirs.encode_ordinary(text)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from([c.encode() for c in ATOMIC + OTHERS] + [bytes([b]) for b in (0x80, 0xBF, 0xE7, 0xD0, 0xC2, 0xF0, 0x20)]),
        min_size=1,
        max_size=60,
    ).map(b"".join),
    st.lists(st.integers(0, 200), max_size=6),
)
def test_raw_bytes_same_as_without_atoms(o200k, data, cuts):
    """Invalid UTF-8 and pieces cut mid-character: atoms change nothing."""
    t = o200k[0]._tables
    assert _encode_pieces(t, data, cuts) == _encode_pieces(_no_atoms(t), data, cuts)


def test_long_piece_same_as_without_atoms(o200k):
    t = o200k[0]._tables
    data = ("用的一是了我不人在" * 50 + "─" * 3000 + "оеаин" * 200).encode()
    assert _encode_pieces(t, data, []) == _encode_pieces(_no_atoms(t), data, [])


def test_overlong_forms_start_as_bytes(o200k):
    """A two-byte character written in three bytes (E0 83 A9 for é) is no character:
    its bytes start as bytes, next to the atom it spells. (The random bytes above never
    make one: an overlong form needs E0 and the character's own continuation bytes.)"""
    t = o200k[0]._tables
    for c in "éоاßñ":
        assert atom_id(t, ord(c)) >= 0
        cp = ord(c)
        overlong = bytes([0xE0, 0x80 | (cp >> 6), 0x80 | (cp & 0x3F)])
        data = overlong + c.encode() + overlong * 2 + c.encode()
        assert _encode_pieces(t, data, []) == _encode_pieces(_no_atoms(t), data, [])
        assert _encode_pieces(t, data, [3, 5]) == _encode_pieces(_no_atoms(t), data, [3, 5])


def test_trained_model_same_as_without_atoms():
    """A small model trained on text of several scripts (merges rule, ids above 255)."""
    rng = np.random.default_rng(5)
    alphabet = ATOMIC[:30] + list("оеаинвлкм") + list(" abc,") + ["─", "é"]
    docs = ["".join(rng.choice(alphabet, size=int(rng.integers(5, 60)))) for _ in range(400)]
    tok = train_bpe(docs, vocab_size=256 + 300, pattern="o200k")
    t = tok._tables
    assert (t.atoms >= 0).sum() > 10
    for _ in range(200):
        text = "".join(rng.choice(alphabet, size=int(rng.integers(1, 40))))
        data = text.encode()
        cuts = rng.integers(0, len(data) + 1, size=3).tolist()
        assert _encode_pieces(t, data, cuts) == _encode_pieces(_no_atoms(t), data, cuts), text
        assert tok.decode(tok.encode(text)) == text


def _atom_pairs_in_tokens(tables) -> set[tuple[int, int]]:
    """(left, right) atom ids of every two characters side by side in a token, in Python."""
    out = set()
    for t in range(tables.tok_off.size - 1):
        data = bytes(tables.tok_bytes[tables.tok_off[t] : tables.tok_off[t + 1]])
        prev, i = -1, 0
        while i < len(data):
            n = {0xC: 2, 0xD: 2, 0xE: 3}.get(data[i] >> 4, 0)
            try:
                ch = data[i : i + n].decode() if n and i + n <= len(data) else ""
            except UnicodeDecodeError:
                ch = ""
            if not ch:
                prev, i = -1, i + 1
                continue
            a = atom_id(tables, ord(ch))
            if a >= 0 and prev >= 0:
                out.add((prev, a))
            prev, i = a, i + n
    return out


def test_atom_joins_holds_every_pair_a_token_holds(o200k):
    """No pair of atoms side by side in a token is cut (the filter has no false negative),
    and most pairs of common Han characters are (else there is nothing to cut)."""
    import numba

    from dwstok.bpe.tables import _may_merge
    from dwstok.hashing import _hash_pair

    @numba.njit
    def joins(f, lefts, rights, bits):  # as _first_parts asks
        return np.array([_may_merge(f, _hash_pair((lefts[i] << bits) | rights[i])) for i in range(lefts.size)])

    t = o200k[0]._tables
    joined = np.array(sorted(_atom_pairs_in_tokens(t)), np.int64)
    assert len(joined) > 5000
    assert joins(t.atom_joins, joined[:, 0], joined[:, 1], t.pair_bits).all()
    ids = np.array([atom_id(t, ord(c)) for c in ATOMIC], np.int64)
    lefts, rights = np.repeat(ids, ids.size), np.tile(ids, ids.size)
    assert (~joins(t.atom_joins, lefts, rights, t.pair_bits)).sum() > lefts.size // 2
    # sized by the distinct pairs (JOIN_BITS_A_PAIR bits each), small enough to stay in
    # cache; a pair no token holds passes about one time in twenty (then it is not cut)
    assert t.atom_joins.nbytes * 8 < 2 * JOIN_BITS_A_PAIR * len(joined)
    held = {(a, b) for a, b in joined.tolist()}
    rng = np.random.default_rng(0)
    all_ids = np.array(sorted({a for a, _ in held} | {b for _, b in held}), np.int64)
    pairs = [p for p in zip(rng.choice(all_ids, 40000).tolist(), rng.choice(all_ids, 40000).tolist()) if p not in held]
    lefts, rights = np.array(pairs, np.int64).T
    assert joins(t.atom_joins, lefts, rights, t.pair_bits).mean() < 0.1


def test_runs_in_segments_match_tiktoken(o200k):
    """Han, kana and Thai runs cut into segments: short pieces (merged side by side), long
    ones (merged alone), a segment longer than the quadratic scan's (ーー is a token),
    and a block of pieces with more segments than its room, where the rest merge whole."""
    ours, theirs = o200k
    rng = np.random.default_rng(11)
    han = ATOMIC + list("しれルプァォ數標檔範塊顯複の")
    thai = list("กขคงจฉชซญดตถทธนบปผพฟภมยรลวศสหอฮะาำิีึืุูเแโใไ่้๊๋็์")
    texts = ["ー" * 60 + "用的一" + "ー" * 30, "".join(rng.choice(thai, 400))]
    for n in (1, 2, 3, 5, 10, 31, 32, 33, 40, 100, 300):
        texts.append("".join(rng.choice(han, n)))
    texts.append(", ".join("".join(rng.choice(han, 31)) for _ in range(700)))
    for text in texts:
        assert ours.encode(text) == theirs.encode_ordinary(text), text[:40]
    assert ours.encode_batch(texts, num_threads=2) == [theirs.encode_ordinary(x) for x in texts]
