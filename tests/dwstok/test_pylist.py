"""dwstok.pylist: lists of ids from cached ints, against ``tolist()`` and reference counts."""

import gc
import sys
import threading
import weakref

import numpy as np
import pytest

from dwstok import pylist
from dwstok.pylist import FILL_FROM, IdLists


def test_layout_check_passes_on_this_interpreter():
    # CI runs a GIL build of CPython: the fast path must be the one under test
    assert pylist._check_layout()


@pytest.mark.parametrize("dtype", [np.uint32, np.int64, np.uint16])
def test_lists_equal_tolist(dtype):
    rng = np.random.default_rng(0)
    lists = IdLists(50_000)
    for n in (0, 1, FILL_FROM - 1, FILL_FROM, 10_000):
        ids = rng.integers(0, min(50_000, np.iinfo(dtype).max), n).astype(dtype)
        out = lists.to_list(ids)
        assert out == ids.tolist()
        assert all(type(x) is int for x in out)


def test_lists_point_at_shared_immortal_ints():
    # One int object per id for the process, shared by every IdLists; made immortal, so
    # lists of them never change a count, and freeing them can never free an int.
    small, big = IdLists(2000), IdLists(5000)
    a = small.to_list(np.full(100, 1500, np.uint32))
    b = big.to_list(np.arange(4900, 5000, dtype=np.uint32))
    assert a[0] is pylist._INTS[1500] and b[-1] is pylist._INTS[4999]
    kept = [small.to_list(np.full(100, 1500, np.uint32)) for _ in range(1000)]
    assert all(x is a[0] for x in kept[-1])
    del kept, a, b
    gc.collect()
    assert pylist._is_immortal(pylist._INTS[1500]) and pylist._is_immortal(pylist._INTS[4999])
    assert pylist._INTS[:5000] == list(range(5000))


def test_small_ints_stay_right():
    # 0..256 are the interpreter's own shared ints: made immortal too (from 3.12 they are)
    lists = IdLists(300)
    ids = np.arange(300, dtype=np.uint32).repeat(3)
    kept = [lists.to_list(ids) for _ in range(100)]
    first = kept[0]
    del kept
    gc.collect()
    assert first == ids.tolist() and pylist._is_immortal(255) and pylist._is_immortal(0)
    assert sum([1] * 1000) == 1000 and 255 + 1 == 256  # ordinary arithmetic on them


def test_id_out_of_range_falls_back_without_a_broken_list():
    lists = IdLists(100)
    ids = np.arange(FILL_FROM * 2, dtype=np.int64)
    ids[-1] = 1_000  # beyond the vocabulary: tolist's answer, not garbage
    assert lists.to_list(ids) == ids.tolist()
    ids[-1] = -1
    assert lists.to_list(ids) == ids.tolist()
    gc.collect()


def test_lists_from_many_threads():
    lists = IdLists(5000)
    ids = np.full(1000, 4321, np.uint32)
    kept: list = []

    def work():
        for _ in range(200):
            kept.append(lists.to_list(ids))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(kept) == 800 and all(lst == ids.tolist() for lst in kept)
    kept.clear()
    assert pylist._is_immortal(pylist._INTS[4321])


def test_tokenizer_lists_share_ints(tmp_path):
    from dwstok import Tokenizer

    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"a", b"b")])
    text = "ab " * 200
    ids = tok.encode(text)
    assert ids == tok.encode_to_numpy(text).tolist()
    assert ids[0] is tok.encode(text)[0]  # the same int object: made once


@pytest.mark.parametrize("sizes", [[], [0], [5], [0, 70, 0, 3, 200], [1] * 300])
def test_lists_of_documents_equal_slices_of_tolist(sizes):
    rng = np.random.default_rng(len(sizes))
    lists = IdLists(40_000)
    doc = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    ids = rng.integers(0, 40_000, int(doc[-1])).astype(np.uint32)
    got = lists.to_lists(ids, doc)
    assert got == [ids[a:b].tolist() for a, b in zip(doc[:-1], doc[1:])]
    assert all(type(x) is list for x in got) and all(type(i) is int for d in got for i in d)
    if ids.size:
        assert got[next(i for i, d in enumerate(got) if d)][0] is pylist._INTS[int(ids[0])]
    del got
    assert pylist._is_immortal(pylist._INTS[12_345])


def test_lists_of_ids_are_not_tracked_and_cycles_through_the_batch_still_collect():
    # A collection visits every item of the young tracked lists: 5,000 lists of ids
    # would start 7 collections, each visiting thousands of ids. The lists of ids hold
    # only ints and are left out; the batch's outer list stays tracked.
    lists = IdLists(1000)
    doc = np.arange(0, 5001 * 3, 3, dtype=np.int64)
    ids = (np.arange(doc[-1]) % 1000).astype(np.uint32)
    got = lists.to_lists(ids, doc)
    assert len(got) == 5000 and got[4999] == ids[-3:].tolist()
    assert gc.is_tracked(got) and not any(map(gc.is_tracked, got))
    assert not gc.is_tracked(lists.to_list(ids[:FILL_FROM]))
    # a cycle through the outer list is collected, the lists of ids with it
    marker = _Marker()
    gone = weakref.ref(marker)
    got.append([got, marker])
    del got, marker
    gc.collect()
    assert gone() is None


class _Marker:
    pass


def test_lists_of_documents_with_an_id_out_of_range_raise():
    lists = IdLists(100)
    with pytest.raises(ValueError, match="out of range"):
        lists.to_lists(np.array([1, 2, 100], np.int64), np.array([0, 1, 3], np.int64))


def test_a_forked_child_makes_lists_from_the_inherited_ints_and_more():
    # A data loader's workers are forked: they inherit the immortal ints, and may need
    # more of them (a bigger vocabulary) than the parent made.
    import os

    lists = IdLists(3000)
    ids = np.arange(2900, 3000, dtype=np.uint32)
    assert lists.to_list(ids) == ids.tolist()
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if every list is right
        ok = lists.to_list(ids) == ids.tolist()
        big = np.arange(60_000, 60_100, dtype=np.uint32)
        ok = ok and IdLists(70_000).to_list(big) == big.tolist()
        os._exit(0 if ok and pylist._is_immortal(pylist._INTS[60_050]) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert lists.to_list(ids) == ids.tolist()


def _list_into(ids, vocab):
    box = [None]
    pylist.list_into(id(box), ids, ids.size, IdLists(vocab).kernel_table())
    return box[0]


@pytest.mark.parametrize("n", [0, 1, FILL_FROM - 1, 5_000])
def test_list_into_puts_the_list_in_the_box(n):
    # list_into runs inside encoding kernels, without the GIL: it takes it to make the
    # list, puts it in the caller's one-item box and drops what the box held
    ids = np.random.default_rng(n).integers(0, 30_000, n).astype(np.uint32)
    held = object()
    box = [held]
    before = sys.getrefcount(held)
    pylist.list_into(id(box), ids, ids.size, IdLists(30_000).kernel_table())
    got = box[0]
    assert type(got) is list and got == ids.tolist() and sys.getrefcount(held) == before - 1
    assert sys.getrefcount(got) == 3  # box, got, the call's argument: no reference leaked
    assert n == 0 or got[0] is pylist._INTS[int(ids[0])]


def test_list_into_leaves_the_box_alone_for_an_id_out_of_range():
    assert _list_into(np.array([1, 2, 99], np.uint32), 100) == [1, 2, 99]
    assert _list_into(np.array([1, 2, 100], np.uint32), 100) is None


def test_encode_lists_from_many_threads_keep_counts():
    # encode() makes its list inside the kernel, taking the GIL back for it: threads
    # encoding at once each get their own right list, and no count drifts
    from dwstok import Tokenizer

    tok = Tokenizer.from_vocab_merges({b: bytes([b]) for b in range(256)}, [(b"a", b"b"), (b"ab", b"c")])
    texts = [("abc " * (50 + i)) + "x" * i for i in range(40)]
    want = [tok.encode_to_numpy(t).tolist() for t in texts]
    none_before = sys.getrefcount(None)
    errors: list = []

    def work(k):
        for j in range(50):
            i = (k * 7 + j) % len(texts)
            if tok.encode(texts[i]) != want[i]:
                errors.append(i)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert abs(sys.getrefcount(None) - none_before) < 50  # a leak would be one a call: 200
    assert tok._lister is not None  # the kernel path was the one under test
