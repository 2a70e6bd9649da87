"""stages.piece_counts against Arrow's group-by, the oracle it replaced."""

import numpy as np
import pyarrow as pa
import pytest

from stages.piece_counts import PieceCounts


def arrow_counts(data: bytes, offs, lang, names):
    pieces = [data[offs[k] : offs[k + 1]] for k in range(len(offs) - 1)]
    t = pa.table({"piece": pa.array(pieces, pa.binary()), "lang": pa.array(np.asarray(lang, np.int32))})
    g = t.group_by(["piece", "lang"], use_threads=False).aggregate([([], "count_all")])
    return list(zip(g.column("piece").to_pylist(), [names[i] for i in g.column("lang").to_pylist()],
                    g.column("count_all").to_pylist()))


def ours(c: PieceCounts, names):
    t = c.table(names)
    assert t.schema == pa.schema([("piece", pa.binary()), ("lang", pa.string()), ("count", pa.int64())])
    return list(zip(t.column("piece").to_pylist(), t.column("lang").to_pylist(), t.column("count").to_pylist()))


def random_pieces(rng, n_pieces, n_langs):
    """Pieces of 0-40 bytes from a small alphabet (many repeats, some 8 and 16 bytes
    long and some differing only past their eighth byte), in a few languages."""
    words = [bytes(rng.choice(list(b"ab \xe4\xb8"), size=rng.integers(0, 41))) for _ in range(300)]
    words += [b"abcdefgh", b"abcdefghX", b"abcdefghY", b"0123456789abcdef", b"0123456789abcdeg"]
    chosen = [words[i] for i in rng.integers(0, len(words), size=n_pieces)]
    data = b"".join(chosen)
    offs = np.zeros(n_pieces + 1, np.int64)
    offs[1:] = np.cumsum([len(w) for w in chosen])
    lang = rng.integers(0, n_langs, size=n_pieces).astype(np.int32)
    return data, offs, lang


@pytest.mark.parametrize("slots", [4, 1 << 16])
@pytest.mark.parametrize("seed", range(4))
def test_counts_equal_arrows_group_by(seed, slots):
    """Same rows and counts as Arrow's, in the order first met, through every growth
    of the table, the entries and the arena when it starts small."""
    rng = np.random.default_rng(seed)
    names = ["de", "en", "zh"]
    c = PieceCounts(slots=slots)
    data, offs, lang = random_pieces(rng, 5000, len(names))
    buf = np.frombuffer(data, np.uint8)
    # in batches, as pretokenize gives them, each a view of its own buffer
    expect = arrow_counts(data, offs, lang, names)
    for lo, hi in [(0, 1), (1, 1700), (1700, 5000)]:
        c.add(buf[offs[lo] : offs[hi]].copy(), offs[lo : hi + 1] - offs[lo], lang[lo:hi])
    got = ours(c, names)
    assert sorted(got) == sorted(expect) and len(c) == len(expect)
    first = {}
    for k in range(len(offs) - 1):
        first.setdefault((data[offs[k] : offs[k + 1]], names[lang[k]]), k)
    assert [(p, g) for p, g, _ in got] == sorted(first, key=first.get)


def test_a_piece_at_the_very_end_of_its_buffer():
    """The first 8 bytes of a short last piece are read without going past the buffer."""
    c = PieceCounts()
    data = np.frombuffer(b"xyz", np.uint8)
    c.add(data, np.array([0, 1, 3]), np.array([0, 0], np.int32))
    c.add(np.frombuffer(b"yz", np.uint8), np.array([0, 2]), np.array([0], np.int32))
    assert ours(c, ["en"]) == [(b"x", "en", 1), (b"yz", "en", 2)]


def test_nothing_counted_is_an_empty_table():
    assert PieceCounts().table(["en"]).num_rows == 0
