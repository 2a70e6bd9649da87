"""Fuzz: the native scanners against ``regex.findall`` on strings built to break them.

The default suite runs a seeded subset (a few thousand strings per pattern); the full
run (300,000 strings per pattern) is marked slow: ``pytest -m slow tests/dwstok``.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import regex

from dwstok.patterns import PATTERNS
from dwstok.scanner import get_scanner, scan_range

UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZÀÄÉÖÜÞĀŁŒŠŸƁǄǅǈǋΣΩЖЯԱႠᏣḀẞἈὈῼⅭⓐＡ𝐀𞤀K"
LOWER = "abcdefghijklmnopqrstuvwxyzßàäéöüþāłœšÿƀǆǉǌσωжяաᏸḁẟἀὀῳⅽａ𝐚𞤢ſıﬀ"
OTHER_LETTERS = "ʰʹˆᴬ々ゝ中文字한국어ภาษาไทยعربيעבריתअआകखᄀぁアｱ𐀀𠀀"
MARKS = "\u0301\u0308\u0327\u0e31\u0e47\u0903\u093f\u20dd\u0488\u05b4\u064b\u1ab0\ufe0f\U000e0100"
DIGITS = "0123456789٠١٢٣٤٥٦٧٨٩۰۱۲۳०१२३४০১২৩๑๒๓໑໒၁၂᠑᠒０１２𝟎𝟘𝟙²³¹½¼⅓ⅠⅫⅻ①⑳〇〡"
SPACES = [" ", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", "\u00a0", "\u3000", "\x0b", "\x0c", "\x85", "\u2028", "\u2029", "\u1680", "\u202f", "\u2009", "\x1c", "\x1f"]
PUNCT = ".,;:!?-–—/\\()[]{}\"'«»…‘’“”¿¡§¶†‡•€$¢£¥%‰#&*@+=<>|~^`_\x00\x07\x7f\u200b\u200c\u200d\u00ad\u2060\ufeff"
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "❤️", "🏳️‍🌈", "🤖", "✅", "🔢", "Ⓜ️"]
ODD = ["\u0378", "\u0590", "\U000e0080", "\U0003fffd", "\ue000", "\uf8ff", "\U000f0000", "\U0010fffd", "\uffff", "\U0001fffe", "\ufffd", "\U0010ffff"]
CONTRACTIONS = ["s", "S", "ſ", "t", "T", "re", "RE", "rE", "Re", "ve", "VE", "vE", "m", "M", "ll", "LL", "lL", "Ll", "d", "D", "x", "", "l", "r", "v", "e", "sS", "ſt", "dd", "le", "Le", "lE", "ld", "ls", "rd", "vs", "ſſ", "'", "re'", "s'"]


def _letters(rng: random.Random) -> str:
    pools = [UPPER, LOWER, OTHER_LETTERS, MARKS, LOWER, LOWER, UPPER]
    return "".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(1, 8)))


def _segment(rng: random.Random) -> str:
    kind = rng.randrange(12)
    if kind <= 2:
        return _letters(rng)
    if kind == 3:  # mostly right after letters, where o200k takes them as a suffix
        head = _letters(rng) if rng.random() < 0.7 else ""
        return head + "'" + rng.choice(CONTRACTIONS)
    if kind == 4:  # digits, often one script, sometimes mixed
        pool = rng.choice([DIGITS, "0123456789", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९"])
        return "".join(rng.choice(pool) for _ in range(rng.randint(1, 11)))
    if kind == 5:
        return "".join(rng.choice(SPACES) for _ in range(rng.randint(1, 5)))
    if kind == 6:  # punctuation, often followed by / and newlines
        s = "".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.5:
            s += "".join(rng.choice(["/", "\n", "\r", "\r\n", "//", " "]) for _ in range(rng.randint(1, 3)))
        return s
    if kind == 7:
        return rng.choice(EMOJI)
    if kind == 8:
        return rng.choice(ODD)
    if kind == 9:  # any code point but a surrogate
        c = rng.randrange(0x110000 - 0x800)
        return chr(c if c < 0xD800 else c + 0x800)
    if kind == 10:
        return rng.choice([" ", "\t", "\u00a0", "'"]) + _letters(rng)
    return rng.choice(["\r\n", "\n", " \n", "\r", "\n\r", " \r\n ", "\n\n\n"])


def fuzz_strings(n: int, seed: int) -> list[str]:
    """``n`` strings of 1-12 segments, some with white space at either end."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s = "".join(_segment(rng) for _ in range(rng.randint(1, 12)))
        if rng.random() < 0.2:
            s = rng.choice(SPACES) * rng.randint(1, 3) + s
        if rng.random() < 0.3:
            s += "".join(rng.choice(SPACES) for _ in range(rng.randint(1, 4)))
        out.append(s)
    return out


def check(name: str, texts: list[str]) -> None:
    scanner = get_scanner(name)
    pattern = regex.compile(PATTERNS[name])
    bad = [t for t in texts if scanner.pieces(t) != pattern.findall(t)]
    msg = [(t, pattern.findall(t), scanner.pieces(t)) for t in bad[:3]]
    assert not bad, f"{len(bad)} of {len(texts)} differ, e.g. {msg!r}"


@pytest.mark.parametrize("name", list(PATTERNS))
def test_fuzz_fast(name):
    check(name, fuzz_strings(30_000, seed=20_26))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PATTERNS))
def test_fuzz_full(name):
    for chunk in range(6):
        check(name, fuzz_strings(50_000, seed=1_000 + chunk))


# -- ASCII windows: the o200k kernels find the pieces of ASCII text 64 bytes at a time
# (scanner._window) when 64 bytes of the buffer follow. The strings above are
# mostly shorter, and their buffers end with them; these are long, mostly ASCII, and
# scanned inside a buffer that goes on, so that every window sees bytes past the text.

ASCII_PARTS = [
    *"abcdeflmrstvxyzABDELMRSTVZ", " ", " ", " ", "  ", "\t", "\x0b", "\x0c", "'", "'", "''", *"0123456789",
    *".,;:!?-()[]\"/\\#$%&*+<=>@^_`{|}~", "\x00", "\x1c", "\x1f", "\x7f",
    "the", " the", " of", "It", "HTTP", "Server", "camelCase", "XMLHttp", "iPhone", "don't", "it's", "we'RE",
    "They'Ve", "I'm", "she'll", "you'd", "'s", "'S", "'ll", "'lL", "'re", "'r", "'v", "'x", "it's's", "a's'", "rock'n'roll",
    "(a", " (a", "\t(a", " .", "  .", " ...", "...", "1234567", "2026", " 3.14", "a1b2", "x'y", " '", "''s",
    "\n", "\n", "\r\n", "\r", " \n", "\n ", "\n\n", ".\n", ".\n\n", "-\r\n", ":\n ", ")\n\t", "\n/", "./\n", ".\n/",
]
RARE = ["é", "中", "\u0301", "ß", "\u00a0", "😀", "\u2028", "\x85"]


def ascii_strings(n: int, seed: int) -> list[str]:
    """``n`` strings of 40-300 characters, mostly ASCII."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts, size, goal = [], 0, rng.randint(40, 300)
        rare = rng.random() * 0.05
        while size < goal:
            p = rng.choice(RARE) if rng.random() < rare else rng.choice(ASCII_PARTS)
            parts.append(p)
            size += len(p)
        out.append("".join(parts))
    return out


def check_in_buffer(name: str, texts: list[str], seed: int) -> None:
    """The pieces of each text scanned by ``scan_range`` in the middle of a buffer (bytes
    before and after it) against ``regex.findall`` on the text alone."""
    rng = random.Random(seed)
    scanner = get_scanner(name)
    pattern = regex.compile(PATTERNS[name])
    bad = []
    for t in texts:
        b = t.encode()
        before = bytes(rng.choice(b"ab '1.") for _ in range(rng.randint(0, 9)))
        after = bytes(rng.choice(b"ab '1.\n ") for _ in range(rng.randint(0, 80)))
        buf = np.frombuffer(before + b + after, np.uint8)
        out = np.empty(len(b) + 1, np.int64)
        k = scan_range(scanner.kind, buf, len(before), len(before) + len(b), scanner.table, out)
        ends = (out[: k + 1] - len(before)).tolist()
        got = [b[ends[j] : ends[j + 1]].decode("utf-8", "replace") for j in range(k)]
        if got != pattern.findall(t):
            bad.append((t, pattern.findall(t), got))
    assert not bad, f"{len(bad)} of {len(texts)} differ, e.g. {bad[:2]!r}"


@pytest.mark.parametrize("name", ["o200k", "o200k-rdigits", "cl100k", "gpt2"])
def test_ascii_windows_fast(name):
    check_in_buffer(name, ascii_strings(4_000, seed=64), seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["o200k", "o200k-rdigits"])
def test_ascii_windows_full(name):
    for chunk in range(5):
        check_in_buffer(name, ascii_strings(60_000, seed=6_400 + chunk), seed=chunk)


# -- UTF-8 windows: a window also takes characters of two and three bytes, looked up in
# the class table (scanner._utf8_masks). These strings mix ASCII words with the
# fuzz segments above (every script, marks, digits beyond ASCII, odd spaces, invalid
# neighbours for a window) at densities from a stray accent to text without ASCII.


def utf8_strings(n: int, seed: int) -> list[str]:
    """``n`` strings of 60-400 characters, from mostly ASCII to mostly not."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts, size, goal = [], 0, rng.randint(60, 400)
        other = rng.choice([0.02, 0.1, 0.3, 0.6, 0.9])
        while size < goal:
            p = _segment(rng) if rng.random() < other else rng.choice(ASCII_PARTS)
            parts.append(p)
            size += len(p)
        out.append("".join(parts))
    return out


@pytest.mark.parametrize("name", ["o200k", "o200k-rdigits"])
def test_utf8_windows_fast(name):
    check_in_buffer(name, utf8_strings(3_000, seed=128), seed=2)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["o200k", "o200k-rdigits"])
def test_utf8_windows_full(name):
    for chunk in range(5):
        check_in_buffer(name, utf8_strings(40_000, seed=12_800 + chunk), seed=chunk)


def test_any_bytes_tile_the_range():
    """Invalid UTF-8 (stray continuation bytes, truncated and overlong sequences, bytes
    no UTF-8 has) anywhere in a window: the scan stays inside its range and every piece
    is at least one byte, as for valid text."""
    rng = random.Random(7)
    scanner = get_scanner("o200k")
    for _ in range(3_000):
        parts = []
        while sum(map(len, parts)) < 200:
            k = rng.randrange(4)
            if k == 0:
                parts.append(bytes(rng.randrange(0x80, 0x100) for _ in range(rng.randint(1, 3))))
            elif k == 1:
                parts.append(rng.choice(ASCII_PARTS).encode())
            else:
                parts.append(_segment(rng).encode()[: rng.choice([None, None, 1, 2])])
        b = b"".join(parts)
        buf = np.frombuffer(b + b"ab .\n" * 20, np.uint8)
        out = np.empty(len(b) + 1, np.int64)
        k = scan_range(scanner.kind, buf, 0, len(b), scanner.table, out)
        ends = out[: k + 1]
        assert ends[0] == 0 and ends[-1] == len(b) and (np.diff(ends) > 0).all(), b
