"""The list-returning paths (cached ints, batches in ranges) give exactly the numpy path's ids."""

from __future__ import annotations

import itertools
import multiprocessing
import pickle
import time

import numpy as np
import pytest

from dwstok import Tokenizer, tokenizer as tokenizer_module
from dwstok.pylist import FILL_FROM, IdLists

from .test_bpe import random_merges

# one text under the cached-int threshold, some well over it, the empty text, specials' names
TEXTS = ["", "a", "ab ba", "aab " * 40, " abba\n\n" * 300, "ab é 語 😀 " * 30, "<x>ab<y>" * 20, "b" * 5000]


@pytest.fixture(scope="module")
def tok():
    merges = random_merges(3, 150, b"ab \n")
    vocab = {b: bytes([b]) for b in range(256)}
    return Tokenizer.from_vocab_merges(vocab, merges, special_tokens=["<x>", "<y>"], pattern="o200k")


def _same(got: list, want: list) -> None:
    assert got == want
    assert all(type(i) is int for i in got)


def _numpy(tok, text, **kw) -> list[int]:
    return tok.encode_to_numpy(text, **kw).tolist()  # the path before the cached ints


def test_encode_and_encode_ordinary_equal_the_numpy_ids(tok):
    long = 0
    for text in TEXTS:
        want = _numpy(tok, text)
        long += len(want) >= FILL_FROM
        _same(tok.encode(text), want)
        _same(tok.encode_ordinary(text), want)
        _same(tok.encode(text, allowed_special="all"), _numpy(tok, text, allowed_special="all"))
    assert long >= 3  # both branches of _as_list ran
    a = tok.encode(TEXTS[4])
    a[0] = -1  # a fresh list: changing it changes nothing shared
    assert tok.encode(TEXTS[4])[0] != -1


def test_ids_at_the_vocab_edge(tok):
    last = tok.n_vocab - 1  # "<y>", the last special
    ids = tok.encode("<y>" * 100, allowed_special="all")
    _same(ids, [last] * 100)
    # the last merge of a model without specials is the last id
    plain = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"a", b"b"), (b"ab", b"ab")])
    assert plain.n_vocab == 258
    _same(plain.encode("abab" * 80), [257] * 80)
    for got, want in zip(plain.encode_batch(["abab" * 80, "ab"], num_threads=2), [[257] * 80, [256]], strict=True):
        _same(got, want)


def _numpy_offsets(tok, text) -> list[tuple[int, int]]:
    """The offsets as computed before the cached ints (``tolist`` of numpy arrays)."""
    ids = tok.encode_to_numpy(text)
    buf = np.frombuffer(text.encode(), np.uint8)
    char_at = np.cumsum(np.append((buf & 0xC0) != 0x80, True)) - 1
    lengths = np.array([len(tok.decode_bytes([i])) for i in ids.tolist()], np.int64)
    ends = np.cumsum(lengths)
    return list(zip(char_at[ends - lengths].tolist(), (char_at[np.maximum(ends - 1, 0)] + 1).tolist()))


def test_encode_with_offsets_equals_the_numpy_offsets(tok):
    # the last: a text longer than the vocab, so offsets past n_vocab are made afresh
    for text in [*TEXTS, "ab " * (tok.n_vocab // 2)]:
        ids, offsets = tok.encode_with_offsets(text)
        _same(ids, _numpy(tok, text))
        assert offsets == _numpy_offsets(tok, text)
        assert all(type(a) is int and type(b) is int for a, b in offsets)
    assert offsets[-1][1] == len(text) > tok.n_vocab


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_batches_equal_per_document_in_many_ranges(tok, monkeypatch, threads):
    want = [_numpy(tok, t) for t in TEXTS]
    flat_want = np.concatenate([np.asarray(w, np.uint32) for w in want])
    doc_want = np.cumsum([0] + [len(w) for w in want])
    data = np.frombuffer("".join(TEXTS).encode(), np.uint8)
    offsets = np.cumsum([0] + [len(t.encode()) for t in TEXTS])
    for range_bytes in (1 << 16, 1):  # one range a thread; as many ranges as documents
        monkeypatch.setattr(tokenizer_module, "_RANGE_BYTES", range_bytes)
        got = tok.encode_batch(TEXTS, num_threads=threads)
        assert len(got) == len(TEXTS)
        for g, w in zip(got, want):
            _same(g, w)
        ids, doc = tok.encode_utf8_batch(data, offsets, num_threads=threads)
        assert ids.dtype == np.uint32 and doc.dtype == np.int64
        assert np.array_equal(ids, flat_want) and np.array_equal(doc, doc_want)
    assert tok.encode_batch([], num_threads=threads) == []
    assert tok.encode_batch(["", ""], num_threads=threads) == [[], []]


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_texts_made_utf8_on_the_range_threads_fail_as_before(tok, monkeypatch, threads):
    # Each range's texts are made UTF-8 on the thread that encodes it: a bad text in a
    # later range is the same error as when all were converted first, and any sequence
    # of texts is taken.
    monkeypatch.setattr(tokenizer_module, "_RANGE_BYTES", 1)  # a range a document
    texts = list(TEXTS) * 3
    with pytest.raises(ValueError, match=r"lone surrogate '\\ud800' at position 2"):
        tok.encode_batch(texts + ["ab\ud800c"] + texts, num_threads=threads)
    for bad in (b"bytes", 5, None):
        with pytest.raises(TypeError, match=f"expected str, got {type(bad).__name__}"):
            tok.encode_batch(texts + [bad], num_threads=threads)
    want = tok.encode_batch(texts, num_threads=threads)
    assert tok.encode_batch(tuple(texts), num_threads=threads) == want
    assert tok.encode_batch(iter(texts), num_threads=threads) == want
    assert want == [tok.encode(t) for t in texts]


def test_streaming_equals_encode(tok):
    text = "".join(TEXTS)
    chunks = [text[i : i + 37] for i in range(0, len(text), 37)]
    got = list(tok.encode_iterable(chunks))
    _same(got, _numpy(tok, text))
    got = list(tok.encode_iterable(chunks, allowed_special="all"))
    _same(got, _numpy(tok, text, allowed_special="all"))


def test_pickle_leaves_the_int_cache_behind(tok):
    tok.encode(TEXTS[4])
    assert "_id_lists" in tok.__dict__
    clone = pickle.loads(pickle.dumps(tok))
    assert "_id_lists" not in clone.__dict__
    _same(clone.encode(TEXTS[4]), tok.encode(TEXTS[4]))


def _child(tok, q):
    q.put(tok.encode_batch(TEXTS, num_threads=2))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_makes_its_own_thread_pool(tok, monkeypatch):
    monkeypatch.setattr(tokenizer_module, "_RANGE_BYTES", 1)
    want = tok.encode_batch(TEXTS, num_threads=2)  # the parent's pool exists now
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(tok, q), daemon=True)
    p.start()
    try:
        got = q.get(timeout=60)  # the parent's pool threads are not in the child: it would hang
        p.join(timeout=60)
    finally:
        if p.is_alive():
            p.kill()
    assert p.exitcode == 0 and got == want


def test_an_interpreter_without_the_list_layout_gives_the_same_lists(monkeypatch):
    # dwstok.pylist's check fails on free-threaded builds and PyPy: tolist() then
    monkeypatch.setattr(IdLists, "_works", False)
    plain = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, random_merges(3, 150, b"ab \n"))
    for text in TEXTS:
        _same(plain.encode(text), _numpy(plain, text))
    for got, text in zip(plain.encode_batch(TEXTS, num_threads=2), TEXTS, strict=True):
        _same(got, _numpy(plain, text))


@pytest.mark.parametrize("threads", [2, 3])
def test_every_range_runs_once_and_comes_back_in_order(threads):
    # The calling thread and the pool's threads each take the next range no one has
    # taken: every range runs once, on more than one thread, and the results come back
    # in range order whoever ran them.
    import threading

    ran: list[tuple[int, int]] = []

    def work(k, d0, d1):
        time.sleep(0.004 if k % 3 else 0.001)  # ranges of uneven length
        ran.append((k, threading.get_ident()))
        return (k, d0, d1)

    edges = [0, 2, 3, 7, 8, 10, 11, 15, 20]
    got = list(tokenizer_module._run_ranges(work, edges, threads))
    assert got == [(k, edges[k], edges[k + 1]) for k in range(len(edges) - 1)]
    assert sorted(k for k, _ in ran) == list(range(len(edges) - 1))
    assert len({t for _, t in ran}) > 1


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_range_edges_cover_every_document_once(monkeypatch, threads):
    # One thread: one range, from the first document to the last. More: contiguous
    # ranges that start at 0, end at the last document and never repeat an edge.
    monkeypatch.setattr(tokenizer_module, "_RANGE_BYTES", 10)
    offsets = np.cumsum([0] + [7, 0, 30, 1, 1, 50, 3, 9, 12, 0]).astype(np.int64)
    edges = tokenizer_module._range_edges(offsets, threads)
    n_docs = offsets.size - 1
    assert edges[0] == 0 and edges[-1] == n_docs and all(a < b for a, b in zip(edges, edges[1:]))
    assert (len(edges) == 2) == (threads == 1)


def test_lists_of_ids_are_left_out_of_the_cyclic_collector(tok):
    # encode's list (made in the kernel), encode with specials (to_list) and encode_batch's
    # lists: all hold only ints, so the collector does not track them (dwstok.pylist)
    import gc

    text = " abba\n\n" * 300
    assert not gc.is_tracked(tok.encode(text))
    assert not gc.is_tracked(tok.encode(text + "<x>", allowed_special="all"))
    batch = tok.encode_batch([text, "ab", text], num_threads=2)
    assert gc.is_tracked(batch) and not any(map(gc.is_tracked, batch))
    assert batch == [tok.encode(t) for t in (text, "ab", text)]


def test_encode_in_one_frame_takes_what_the_general_way_would(monkeypatch):
    # Once it has made a list, encode() takes a free pool entry itself, and so does
    # encode_to_numpy() (_pooled); an empty text needs none; everything else they do not
    # handle goes the general way (_encode_list, _encode_bytes), with the same ids and
    # errors.
    merges = [(b"a", b"b"), (b"ab", b"c")]
    vocab = {b: bytes([b]) for b in range(256)}
    tok = Tokenizer.from_vocab_merges(vocab, merges, pattern="o200k")
    fresh = Tokenizer.from_vocab_merges(vocab, merges, pattern="o200k")
    if tok._native is None or tok._native[2] is None or tok._lister is None:
        pytest.skip("no kernels on a native scanner, or no pylist lists here")
    assert tok._list_call is None
    assert tok.encode("abc") == [257]
    assert tok._list_call is not None  # from here on, encode() calls the kernel itself

    general = []
    real = Tokenizer._encode_list
    monkeypatch.setattr(Tokenizer, "_encode_list", lambda self, buf: general.append(buf) or real(self, buf))

    class Sub(str):
        pass

    def want(text):
        return fresh.encode_to_numpy(text).tolist()

    free = tok._caches.free
    ((cache, out),) = free.values()
    _same(tok.encode("abcab xyz"), want("abcab xyz"))
    assert general == [] and free[0] == (cache, out)  # taken and given back in encode()
    _same(tok.encode(Sub("abc abc")), want("abc abc"))  # a str subclass: the general way
    _same(tok.encode(""), [])
    long = "abcd " * (out.size // 4)  # more bytes than the pooled out has room for
    _same(tok.encode(long), want(long))
    assert general == [b"abc abc", long.encode()]
    with pytest.raises(ValueError, match=r"lone surrogate '\\ud800' at position 3"):
        tok.encode("abc\ud800")
    with pytest.raises(TypeError, match="expected str, got bytes"):
        tok.encode(b"abc")
    assert tok.encode_ordinary("abcab") == tok.encode("abcab") == want("abcab")

    # encode_to_numpy the same way, its general way _encode_bytes
    longer = "abcd " * (free[0][1].size // 4)  # (the general way left a bigger out in the pool)
    texts = ["abcab xyz", Sub("abc abc"), "", longer]
    wants = [want(text) for text in texts]
    as_array = []
    real_bytes = Tokenizer._encode_bytes
    monkeypatch.setattr(Tokenizer, "_encode_bytes", lambda self, buf: as_array.append(buf) or real_bytes(self, buf))
    for text, ids in zip(texts, wants):
        got = tok.encode_to_numpy(text)
        assert got.dtype == np.uint32 and got.tolist() == ids
        assert not np.shares_memory(got, free[0][1])  # a copy, not a view of the pooled out
    assert as_array == [b"abc abc", longer.encode()] and len(free) == 1
    with pytest.raises(ValueError, match=r"lone surrogate '\\ud800' at position 3"):
        tok.encode_to_numpy("abc\ud800")
    with pytest.raises(TypeError, match="expected str, got bytes"):
        tok.encode_to_numpy(b"abc")

    general.clear()
    held = dict(free)
    free.clear()  # every entry taken (by other threads): the general way makes one
    _same(tok.encode("abc xab"), want("abc xab"))
    assert len(general) == 1
    free.update(held)

    # distinct pieces that are no token, through encode() alone: once its cache is due
    # to grow, encode() gives it back through give(), which grows it (when the memory it
    # grows into is ready: NextCache), as after any other call
    from dwstok import bpe

    tok2 = Tokenizer.from_vocab_merges(vocab, merges, pattern="o200k")
    tok2.encode("abc")  # (the general way: its first list)
    general.clear()
    pool = tok2._caches
    ((small, _),) = pool.free.values()
    given = []
    real_give = pool.give
    pool.give = lambda cache, out, slot, threads=1: given.append(int(cache[bpe.CACHE_GROW])) or real_give(cache, out, slot, threads)
    slots = bpe.cache_capacity(small) // 8
    words = ["".join(p) for p in itertools.product("xyzw", repeat=6)][: slots * 3 // 8]
    texts = [" ".join(words[i : i + 64]) for i in range(0, len(words), 64)]  # each under the pooled arrays' size
    for _ in range(200):
        for text in texts:
            _same(tok2.encode(text), want(text))
        ((cache, _),) = pool.free.values()
        if bpe.cache_capacity(cache) > bpe.cache_capacity(small):
            break
        time.sleep(0.01)
    assert bpe.cache_capacity(cache) == 8 * bpe.cache_capacity(small)
    assert given and all(given) and general == []  # only calls that found the flag set


def test_encode_on_threads_at_once_gives_each_its_own_ids(tok):
    # encode() hands the list kernel a pool entry of its own and the model's arrays by
    # the address of a descriptor (bpe.list_consts); the kernel runs without the GIL, so
    # calls on threads overlap in it.
    import threading

    texts = [t for t in TEXTS if t] + ["ab" * k + " ba" for k in range(1, 40)]
    want = [tok.encode_to_numpy(t).tolist() for t in texts]
    tok.encode("ab")  # the first list resolves the kernel: from here on encode() calls it
    _, address, _, (consts, *arrays) = tok._list_call  # what it passes, and holds with it
    assert address == consts.ctypes.data and consts[1::2].tolist() == [a.ctypes.data for a in arrays]
    got: dict[int, list] = {}

    def work(k):
        order = texts[k:] + texts[:k]
        got[k] = [tok.encode(t) for _ in range(30) for t in order]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        assert got[k] == (want[k:] + want[:k]) * 30


def test_list_consts_takes_only_arrays_its_kernels_can_view():
    from dwstok import bpe

    table, P, L = np.zeros(4, np.uint8), np.zeros(2, np.int64), np.zeros(1, np.uint64)
    d = bpe.list_consts(2, table, P, L)
    assert d.tolist() == [2, table.ctypes.data, 4, P.ctypes.data, 2, L.ctypes.data, 1]
    with pytest.raises(TypeError, match="contiguous int64 arrays, not int32"):
        bpe.list_consts(2, table, P.astype(np.int32), L)
    with pytest.raises(TypeError, match="contiguous uint8 arrays, not a strided uint8 array"):
        bpe.list_consts(2, np.zeros(8, np.uint8)[::2], P, L)
