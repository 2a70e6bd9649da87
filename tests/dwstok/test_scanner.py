"""The Numba scanners against the ``regex`` module: class table, every class pair and
triple, every code point in context, the dev corpus (slow), linear time, the API."""

from __future__ import annotations

import itertools

import numba
import numpy as np
import pytest
import regex

from dwstok.errors import ConfigError, InputError
from dwstok.patterns import PATTERNS
from dwstok.scanner import (
    KIND_REGEX,
    KINDS,
    Scanner,
    _char_offsets,
    get_scanner,
    scan_into,
    scan_range,
)
from dwstok.unicode_classes import (
    CAT_MASK,
    CRLF,
    FOLD,
    LETTER,
    LOWER,
    MARK,
    N_CODEPOINTS,
    NUMBER,
    OTHER,
    SPACE,
    UPPER,
    build_table,
    load_table,
)

NAMES = list(PATTERNS)
TABLE = load_table()
VALID = np.array([c for c in range(N_CODEPOINTS) if not 0xD800 <= c < 0xE000])


def regex_ends(pattern: str, text: str) -> list[int]:
    """Code-point end offsets of regex.findall's pieces (which must tile the text)."""
    ends = [m.end() for m in regex.finditer(pattern, text)]
    assert not ends or ends[-1] == len(text)
    return ends


def native_ends(name: str, text: str) -> list[int]:
    data = text.encode("utf-8")
    b = get_scanner(name).bounds(data)
    return _char_offsets(np.frombuffer(data, dtype=np.uint8), b)[1:].tolist()


def first_diff(name: str, text: str) -> str:
    """A readable report of where native and regex part ways."""
    want, got = regex.findall(PATTERNS[name], text), get_scanner(name).pieces(text)
    k = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    return f"{name}: regex {want[max(0, k - 2) : k + 3]!r} vs native {got[max(0, k - 2) : k + 3]!r}"


# ---------------------------------------------------------------- the class table


def test_shipped_table_equals_what_regex_says():
    # If this fails after upgrading `regex`, run scripts/gen_unicode_table.py.
    assert np.array_equal(TABLE, build_table())


# Every character class the four patterns use, and the table categories it must be.
_CLASSES = {
    r"\p{L}": {UPPER, LOWER, LETTER},
    r"\p{N}": {NUMBER},
    r"\s": {SPACE, CRLF},
    r"\S": {OTHER, UPPER, LOWER, LETTER, MARK, NUMBER},
    r"[\r\n]": {CRLF},
    r"[^\r\n\p{L}\p{N}]": {OTHER, MARK, SPACE},
    r"[^\s\p{L}\p{N}]": {OTHER, MARK},
    r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]": {UPPER, LETTER, MARK},
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]": {LOWER, LETTER, MARK},
}


@pytest.fixture(scope="module")
def all_codepoints() -> str:
    return "".join(map(chr, VALID.tolist()))


@pytest.mark.parametrize("cls", list(_CLASSES))
def test_every_codepoint_is_in_the_pattern_classes_the_table_says(cls, all_codepoints):
    hit = np.zeros(len(VALID), dtype=bool)
    for m in regex.finditer(f"{cls}+", all_codepoints):
        hit[m.start() : m.end()] = True
    cats = TABLE[VALID] & CAT_MASK
    want = np.isin(cats, list(_CLASSES[cls]))
    bad = VALID[hit != want]
    assert bad.size == 0, [hex(c) for c in bad[:10]]


@pytest.mark.parametrize("letter", list(FOLD))
def test_contraction_letters_fold_as_regex_ignorecase(letter, all_codepoints):
    hit = np.zeros(len(VALID), dtype=bool)
    for m in regex.finditer(f"(?i:{letter})+", all_codepoints):
        hit[m.start() : m.end()] = True
    want = (TABLE[VALID] >> 4) == FOLD[letter]
    assert np.array_equal(hit, want)
    if letter == "s":  # the long s, U+017F, folds to s
        assert TABLE[0x17F] >> 4 == FOLD["s"]


# ---------------------------------------------------------------- known answers


@pytest.mark.parametrize(
    "name, text, pieces",
    [
        ("o200k", "1234567", ["123", "456", "7"]),
        ("o200k-rdigits", "1234567", ["1", "234", "567"]),
        ("o200k-rdigits", "2026", ["2", "026"]),
        ("o200k-rdigits", "x 123456 ٣٤٥٦", ["x", " ", "123", "456", " ", "٣", "٤٥٦"]),
        ("o200k", "HelloWorld don'T", ["Hello", "World", " don'T"]),
        ("o200k", "\u0301ABC", ["\u0301", "ABC"]),
        ("o200k", "a.\n/b", ["a", ".\n/", "b"]),
        ("cl100k", "a.\n/b", ["a", ".\n", "/b"]),
        ("cl100k", "x  \n", ["x", "  \n"]),
        ("gpt2", "it's  IT'S", ["it", "'s", " ", " IT", "'", "S"]),
        ("gpt2", "12345 x", ["12345", " x"]),
        # the a-z run of a word, 8 bytes at a time, and what may end or continue it
        ("o200k", " internationalization's", [" internationalization's"]),
        ("o200k", " abcdefghijéklmnopqrstuvwxyzß abc", [" abcdefghijéklmnopqrstuvwxyzß", " abc"]),
        ("o200k", "abcdefghiJklmnop", ["abcdefghi", "Jklmnop"]),
        ("o200k", "abcdefgh́ijk", ["abcdefgh́ijk"]),
        ("o200k", "abcdefgh中文abc", ["abcdefgh中文abc"]),
        ("o200k", "abcdefgh1abcdefghi_", ["abcdefgh", "1", "abcdefghi", "_"]),
    ],
)
def test_known_pieces(name, text, pieces):
    assert regex.findall(PATTERNS[name], text) == pieces  # the oracle agrees
    assert get_scanner(name).pieces(text) == pieces


# ---------------------------------------------------------------- class exemplars


# One character per category and every character a pattern names literally.
CORE = " '/\r\n\t\u00a0sSſeElLrRvmMdtaAǅʰ中\u0301\u0903٣1.😀"


def exemplars(per_value: int = 2, seed: int = 0) -> list[str]:
    """Code points standing for every distinct table value, in 1- to 4-byte UTF-8,
    plus the characters the patterns name literally."""
    rng = np.random.default_rng(seed)
    out = set(CORE) | set("\x85\u3000") | {"\U0010FFFD", "\ue000", "\u0378", "𝟘", "\U0001F3FD"}
    for v in np.unique(TABLE):
        cps = np.nonzero(TABLE == v)[0]
        cps = cps[(cps < 0xD800) | (cps >= 0xE000)]
        by_len = [cps[cps < 0x80], cps[(cps >= 0x80) & (cps < 0x800)], cps[(cps >= 0x800) & (cps < 0x10000)], cps[cps >= 0x10000]]
        for group in by_len:
            if group.size:
                out.update(chr(c) for c in rng.choice(group, size=min(per_value, group.size), replace=False))
    return sorted(out)


def test_exemplars_cover_every_table_value():
    values = {int(TABLE[ord(c)]) for c in exemplars()}
    assert values == {int(v) for v in np.unique(TABLE)}


@pytest.mark.parametrize("name", NAMES)
def test_every_exemplar_pair_and_triple(name):
    ex = exemplars(per_value=1)
    pattern = PATTERNS[name]
    texts = [a + b for a, b in itertools.product(ex, repeat=2)]
    texts += ["".join(t) for t in itertools.product(CORE, repeat=3)]
    texts += list(ex)
    bad = [t for t in texts if get_scanner(name).pieces(t) != regex.findall(pattern, t)]
    assert not bad, [first_diff(name, t) for t in bad[:5]]


# ---------------------------------------------------------------- every code point


def _context_check(name: str, cps: np.ndarray, reps: list[str]) -> None:
    """Each code point alone-between-reps: the texts c r c' r ... and r c r c' ..."""
    pattern = PATTERNS[name]
    chars = list(map(chr, cps.tolist()))
    texts = ["".join(chars)] + ["".join(c + r for c in chars) for r in reps]
    for text in texts:
        want, got = regex_ends(pattern, text), native_ends(name, text)
        if want != got:
            k = next(i for i, (a, b) in enumerate(zip(want, got)) if a != b)
            at = want[k - 1] if k else 0
            raise AssertionError(f"{name}: differ at char {at}: {text[max(0, at - 5) : at + 8]!r} " + first_diff(name, text[max(0, at - 40) : at + 40]))


CONTEXT_REPS = ["a", "A", "\u0301", "中", "1", " ", "\n", "\r\n", "'", ".", "/", "  ", "'s", " \t"]


@pytest.mark.parametrize("name", NAMES)
def test_codepoints_in_context_sample(name):
    cps = np.concatenate([VALID[VALID < 0x800], VALID[VALID >= 0x800][::97]])
    _context_check(name, cps, CONTEXT_REPS[:6])


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_codepoint_in_context(name):
    _context_check(name, VALID, CONTEXT_REPS)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_codepoint_alone(name):
    buf = np.frombuffer("".join(map(chr, VALID.tolist())).encode(), dtype=np.uint8)
    starts = np.concatenate([[0], np.cumsum([len(chr(c).encode()) for c in VALID.tolist()])])
    counts = _scan_docs(KINDS[name], buf, starts, TABLE, np.empty(len(buf) + 1, np.int64))
    assert (counts == 1).all()
    pattern = regex.compile(PATTERNS[name])
    assert all(pattern.findall(c) == [c] for c in map(chr, VALID.tolist()))


# ---------------------------------------------------------------- scan_range inside njit


@numba.njit(nogil=True)
def _scan_docs(kind, buf, starts, table, out):
    """What the encoder does: scan many documents of one flat buffer."""
    counts = np.empty(starts.shape[0] - 1, np.int64)
    pos = 0
    for d in range(starts.shape[0] - 1):
        n = scan_range(kind, buf, starts[d], starts[d + 1], table, out[pos:])
        counts[d] = n
        pos += n + 1
    return counts


@pytest.mark.parametrize("name", NAMES)
def test_scan_range_over_a_flat_buffer_matches_bounds(name):
    docs = ["Hello world", "", "  x  ", "1234567\n\n", "don't STOP", "中文 テキスト"] * 5
    enc = [d.encode() for d in docs]
    starts = np.concatenate([[0], np.cumsum([len(e) for e in enc])]).astype(np.int64)
    buf = np.frombuffer(b"".join(enc), dtype=np.uint8)
    s = get_scanner(name)
    out = np.full(len(buf) + len(docs), -1, np.int64)
    counts = _scan_docs(s.kind, buf, starts, s.table, out)
    pos = 0
    for d, e in enumerate(enc):
        n = counts[d]
        assert (out[pos : pos + n + 1] - starts[d]).tolist() == s.bounds(e).tolist()
        pos += n + 1


def test_scan_into_writes_bounds_and_count():
    s = get_scanner("o200k")
    buf = np.frombuffer("Hi there, 2026!".encode(), dtype=np.uint8)
    out = np.zeros(len(buf) + 1, np.int64)
    n = scan_into(s.kind, buf, s.table, out)
    assert out[: n + 1].tolist() == [0, 2, 8, 9, 10, 13, 14, 15]
    assert n == 7


# ---------------------------------------------------------------- linear time, bad bytes


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("unit", ["a", " ", "1", "\u0301A", "A", "ab ", "\n ", "中"])
def test_ten_megabytes_without_boundaries(name, unit):
    # A quadratic scanner would not finish; no timing is asserted.
    size = 100_000 if numba.config.DISABLE_JIT else 10_000_000
    reps = size // len(unit.encode())
    text = unit * reps
    b = get_scanner(name).bounds(text.encode())
    assert b[0] == 0 and b[-1] == len(text.encode()) and (np.diff(b) > 0).all()
    small = unit * 1000 + "."
    assert get_scanner(name).pieces(small) == regex.findall(PATTERNS[name], small)


@pytest.mark.parametrize("name", NAMES)
def test_any_bytes_give_a_tiling_and_never_crash(name):
    rng = np.random.default_rng(7)
    s = get_scanner(name)
    for size in [1, 2, 3, 5, 17, 1000]:
        for _ in range(50):
            buf = rng.integers(0, 256, size=size, dtype=np.uint8)
            b = s.bounds(buf)
            assert b[0] == 0 and b[-1] == size and (np.diff(b) > 0).all()


# ---------------------------------------------------------------- API


def test_api():
    s = get_scanner("o200k")
    assert get_scanner("o200k") is s
    assert (s.name, s.pattern, s.is_native, s.kind) == ("o200k", PATTERNS["o200k"], True, KINDS["o200k"])
    assert get_scanner(PATTERNS["cl100k"]).name == "cl100k"
    assert s.table.dtype == np.uint8 and s.table.shape == (N_CODEPOINTS,)
    data = "héllo wörld".encode()
    for buf in (data, bytearray(data), memoryview(data), np.frombuffer(data, np.uint8)):
        assert s.bounds(buf).tolist() == [0, 6, 13]
    assert s.bounds(b"").tolist() == [0]
    assert s.pieces("") == []
    with pytest.raises(InputError):
        s.bounds("a str")
    with pytest.raises(InputError):
        s.bounds(np.zeros(3, dtype=np.int64))


def test_other_patterns_fall_back_to_regex():
    s = get_scanner(r"\w+|\W+")
    assert isinstance(s, Scanner)
    assert (s.name, s.is_native, s.kind) == (None, False, KIND_REGEX)
    assert s.pieces("ab, cd") == ["ab", ", ", "cd"]
    assert s.bounds("ab, cé".encode()).tolist() == [0, 2, 4, 7]
    assert s.bounds("中 😀x".encode()).tolist() == [0, 3, 8, 9]
    assert get_scanner(r"(\w+)|(\W+)").pieces("ab, cd") == ["ab", ", ", "cd"]  # groups: still pieces
    with pytest.raises(ConfigError, match="does not match the text at character 2"):
        get_scanner(r"\w+").bounds(b"ab, cd")
    with pytest.raises(InputError, match="not valid UTF-8 at byte 1"):
        s.bounds(b"a\xff")


# ---------------------------------------------------------------- the real corpus


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_dev_corpus_parity(name, corpus_dir):
    import pyarrow.parquet as pq

    texts = pq.read_table(corpus_dir / "dev.parquet", columns=["text"]).column("text").to_pylist()
    bad = [t for t in texts if get_scanner(name).pieces(t) != regex.findall(PATTERNS[name], t)]
    assert not bad, [first_diff(name, t) for t in bad[:3]]


ONE_SCANNER = """
import numpy as np
from dwstok.scanner import _segments_o200k, get_scanner, scan_segments
from dwstok.training import train_bpe
s = get_scanner("o200k")
text = "Hello world 2026, ça va?".encode()
writable, frozen = np.frombuffer(text, np.uint8).copy(), np.frombuffer(text, np.uint8)
outs = []
for buf in (writable, frozen):
    out, per = np.empty(buf.size + 2, np.int64), np.empty(1, np.int64)
    n = scan_segments(s.kind, buf, np.array([0, buf.size]), s.table, out, per)
    outs.append(out[: n + 1].tolist())
train_bpe(["Hello world, hello again."] * 4, 260)  # training scans its own (writable) buffer
print(outs[0] == outs[1] == s.bounds(writable).tolist(), len(_segments_o200k.signatures), writable.flags.writeable)
"""


def test_the_scanner_takes_writable_and_read_only_text_as_one_type():
    # Numba compiles a kernel once per argument type, the scanner in seconds: the
    # pretokenize stage's Arrow buffers, training's own arrays and the encoder's bytes
    # all reach it read-only, and the caller's array stays as it was.
    from tests.stages.conftest import fresh_process

    assert fresh_process(ONE_SCANNER) == ["True", "1", "True"]
