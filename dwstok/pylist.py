"""Python lists of token ids made from one shared, immortal ``int`` object per id.

``ndarray.tolist()`` allocates a new int object for every id, a large share of what an
``encode()`` call costs. This module keeps one int object per id for the whole process
and fills a new list with pointers to them, in a kernel. No library does this (NumPy's
``take`` on an object array and then ``tolist`` counts every reference three times).

The ints are immortal: their reference count is set to a value that no count of
decrements brings to zero (on 3.12+, the interpreter's own immortal mark, which
``Py_INCREF`` and ``Py_DECREF`` then leave alone). So filling a list stores pointers and
touches no int, and on 3.12+ neither does freeing it (before 3.12 a freed list still
counts each int down). Counting is a write to each int, and at a large vocabulary the
ints (6.4 MB for 200k) do not stay in the CPU's caches: each count written is a cache
line fetched and dirtied. Immortal ints are never freed: there is one set per process,
as many as the largest vocabulary used, shared by every tokenizer.

The lists of ids it makes are not tracked by the cyclic garbage collector (they hold
only ints, which cannot form a cycle; CPython untracks tuples and dicts of atomic
values for the same reason): a collection would visit every id of every young list.
A cycle made later through one of them is freed only once broken.

``to_lists`` makes a batch's list of lists the same way in one call (each list from
``PyList_New``, called by address), rather than slicing one flat list.

The kernels write CPython's objects directly, so they rely on two facts about the
interpreter: a list's items are an array of object pointers at ``ob_item``, and an
object's reference count is the first word of its header. The first use in a process
checks both on objects of its own, and falls back to ``tolist()`` on any interpreter
where the check fails (free-threaded builds, PyPy, a new layout), before any shared int
is made immortal.

>>> lists = IdLists(1000)
>>> lists.to_list(np.array([5, 999, 5] * 40, np.uint32))[:3]
[5, 999, 5]
>>> lists.to_lists(np.array([7, 8, 9] * 30, np.uint32), np.array([0, 2, 90]))[0]
[7, 8]
"""

from __future__ import annotations

import ctypes
import sys
import sysconfig
import threading
from functools import cached_property

import numba
import numpy as np

# Below this many ids ``tolist`` costs as little as calling the kernel (bench/list_ints.py).
FILL_FROM = 64
# ``PyListObject``: ob_refcnt, ob_type, ob_size, then ob_item (64-bit builds).
_OB_ITEM_OFFSET = 3 * ctypes.sizeof(ctypes.c_ssize_t)
_OB_ITEM = np.uint64(_OB_ITEM_OFFSET)  # for kernels: uint64 + int64 would be a float there


def _make_c_calls():
    """``call_n(f, n)``, ``call_p(f, p)`` and ``call_0(f)``: call the C function at
    address ``f`` (``PyObject *f(Py_ssize_t)``, ``void f(PyObject *)``, ``void f(void)``);
    ``word(a)``/``set_word(a, i, v)``: read the word at ``a``, write ``v`` to word i at ``a``;
    ``call_e(f)``/``call_r(f, s)``: ``int f(void)`` and ``void f(int)`` (PyGILState_Ensure
    and PyGILState_Release)."""
    if numba.config.DISABLE_JIT:
        return None, None, None, None, None, None, None
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    i64 = ir.IntType(64)
    i8p = ir.IntType(8).as_pointer()

    @intrinsic
    def call_n(typingctx, f, n):
        def codegen(context, builder, signature, args):
            fn = builder.inttoptr(args[0], ir.FunctionType(i8p, [i64]).as_pointer())
            return builder.ptrtoint(builder.call(fn, [args[1]]), i64)

        return types.uint64(f, n), codegen

    @intrinsic
    def call_p(typingctx, f, p):
        def codegen(context, builder, signature, args):
            fn = builder.inttoptr(args[0], ir.FunctionType(ir.VoidType(), [i8p]).as_pointer())
            builder.call(fn, [builder.inttoptr(args[1], i8p)])
            return context.get_dummy_value()

        return types.void(f, p), codegen

    @intrinsic
    def call_0(typingctx, f):
        def codegen(context, builder, signature, args):
            builder.call(builder.inttoptr(args[0], ir.FunctionType(ir.VoidType(), []).as_pointer()), [])
            return context.get_dummy_value()

        return types.void(f), codegen

    @intrinsic
    def word(typingctx, a):
        def codegen(context, builder, signature, args):
            return builder.load(builder.inttoptr(args[0], i64.as_pointer()))

        return types.uint64(a), codegen

    @intrinsic
    def set_word(typingctx, a, i, v):
        def codegen(context, builder, signature, args):
            builder.store(args[2], builder.gep(builder.inttoptr(args[0], i64.as_pointer()), [args[1]]))
            return context.get_dummy_value()

        return types.void(a, i, v), codegen

    i32 = ir.IntType(32)

    @intrinsic
    def call_e(typingctx, f):
        def codegen(context, builder, signature, args):
            fn = builder.inttoptr(args[0], ir.FunctionType(i32, []).as_pointer())
            return builder.sext(builder.call(fn, []), i64)

        return types.int64(f), codegen

    @intrinsic
    def call_r(typingctx, f, s):
        def codegen(context, builder, signature, args):
            fn = builder.inttoptr(args[0], ir.FunctionType(ir.VoidType(), [i32]).as_pointer())
            builder.call(fn, [builder.trunc(args[1], i32)])
            return context.get_dummy_value()

        return types.void(f, s), codegen

    return call_n, call_p, call_0, word, set_word, call_e, call_r


_call_n, _call_p, _call_0, _word, _set_word, _call_e, _call_r = _make_c_calls()


# Not _jit.njit: these kernels hold the GIL (they write objects other threads may read,
# and _fill_lists calls the C API).
@numba.njit(cache=True, nogil=False)
def _fill(items, ids, addresses):
    """Store ``addresses[ids[i]]`` (an immortal object: no count to change) at
    ``items[i]`` for every i; return how many were stored (fewer than ``ids.size`` at
    the first id out of range)."""
    n = addresses.size
    for i in range(ids.size):
        t = ids[i]
        if t < 0 or t >= n:
            return i
        _set_word(items, np.uint64(i), addresses[t])
    return ids.size


@numba.njit(cache=True, nogil=False)
def _set_counts(addresses, count):
    """Set the reference count of every object in ``addresses`` to ``count``."""
    for i in range(addresses.size):
        _set_word(addresses[i], np.uint64(0), count)


@numba.njit(cache=True, nogil=False)
def _fill_lists(c_api, ids, doc, addresses):
    """A new list of lists, list d holding ids[doc[d]:doc[d+1]], as the address of a new
    reference, or 0 (an id out of range, or no memory). ``c_api``: ``_C_API``.

    Each list is made by PyList_New and filled here: no flat list to slice, which had
    counted every reference twice more.

    Each list of ids is left out of the cyclic garbage collector (PyObject_GC_UnTrack):
    see :func:`_untracked_list`. The outer list stays tracked.
    """
    n = addresses.size
    for i in range(ids.size):
        if ids[i] < 0 or ids[i] >= n:
            return np.uint64(0)
    n_docs = doc.size - 1
    new, decref, clear, untrack = c_api[0], c_api[1], c_api[2], c_api[5]
    outer = _call_n(new, n_docs)
    if outer == 0:
        _call_0(clear)
        return np.uint64(0)
    slots = _word(outer + _OB_ITEM)
    for d in range(n_docs):
        b0 = doc[d]
        m = doc[d + 1] - b0
        inner = _untracked_list(new, untrack, m)
        if inner == 0:  # free what was made (NULL slots are skipped), report no memory
            _call_0(clear)
            _call_p(decref, outer)
            return np.uint64(0)
        _set_word(slots, np.uint64(d), inner)
        if m > 0:
            _fill(_word(inner + _OB_ITEM), ids[b0 : b0 + m], addresses)
    return outer


@numba.njit(cache=True, nogil=False)
def _untracked_list(new, untrack, n):
    """A new list of ``n`` empty slots (PyList_New) that the cyclic garbage collector
    does not track, or 0 (no memory; the error is set).

    Why: it holds only ints, which cannot form a cycle, as CPython reasons for the tuples
    and dicts of atomic values that it untracks. Tracked, every 700 new lists started a
    collection of the youngest objects, which visited every item of them (an int object
    each, an indirect call a visit): that tripled the time of a batch's lists
    (bench/results/session26-lists-gc-20261204.md). The cost: a cycle made later through
    such a list (a list of ids appended to itself) is not collected until it is broken.
    """
    lst = _call_n(new, n)
    if lst != 0:
        _call_p(untrack, lst)
    return lst


@numba.njit(cache=True, nogil=True)
def list_into(box, ids, n, table):
    """Put a new list of ``table[ids[i]]``, i < n, in ``box[0]`` (``box``: the address of
    a list of one item, which this replaces). ``table``: the addresses of the shared ints,
    then ``_C_API`` (:meth:`IdLists.kernel_table`). For kernels that run without the GIL:
    this takes it, only to make the list.

    Why: making the list here, in the call that encoded the ids, saves the three calls of
    ``to_list`` (PyList_New and the items' address through ctypes, then the fill's
    kernel), which had cost an ``encode()`` more than a short text took to encode. The
    box stands in for returning the list: a kernel cannot return an object, and turning
    an address into one through ctypes costs about as much as those calls.

    An id out of range, or no memory for the list, leaves ``box`` as it was.
    """
    m = table.size - _N_API
    for i in range(n):
        if ids[i] >= m:
            return
    api = table[m:]
    state = _call_e(api[3])
    lst = _untracked_list(api[0], api[5], n)
    if lst == 0:
        _call_0(api[2])
    else:
        items = _word(lst + _OB_ITEM)
        for i in range(n):
            _set_word(items, np.uint64(i), table[ids[i]])
        slot = _word(np.uint64(box) + _OB_ITEM)
        old = _word(slot)
        _set_word(slot, np.uint64(0), lst)
        _call_p(api[1], old)
    _call_r(api[4], state)


# Functions of our own from the C API (not ctypes.pythonapi's shared ones, whose types
# other code in the process may set).
_list_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_ssize_t)(("PyList_New", ctypes.pythonapi))
_decref = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(("Py_DecRef", ctypes.pythonapi))
_untrack = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("PyObject_GC_UnTrack", ctypes.pythonapi))
_C_API = np.array(  # PyList_New, Py_DecRef, PyErr_Clear, PyGILState_Ensure, PyGILState_Release, PyObject_GC_UnTrack
    [
        ctypes.cast(f, ctypes.c_void_p).value
        for f in (
            _list_new, _decref, ctypes.pythonapi.PyErr_Clear, ctypes.pythonapi.PyGILState_Ensure,
            ctypes.pythonapi.PyGILState_Release, ctypes.pythonapi.PyObject_GC_UnTrack,
        )
    ],
    np.uint64,
)
_N_API = 6


def _take_object(address: int):
    """The object a kernel made (a new reference at ``address``), as a Python object that
    owns that reference."""
    obj = ctypes.cast(address, ctypes.py_object).value  # one more reference: drop the kernel's
    _decref(address)
    return obj


def _items_address(lst: list) -> int:
    return ctypes.c_size_t.from_address(id(lst) + _OB_ITEM_OFFSET).value


def split_tolist(ids: np.ndarray, doc: np.ndarray) -> list[list[int]]:
    """``[ids[doc[d]:doc[d + 1]].tolist() for d ...]`` the plain way: a flat list, sliced."""
    flat, bounds = ids.tolist(), doc.tolist()
    return list(map(flat.__getitem__, map(slice, bounds[:-1], bounds[1:])))


def _immortal_count() -> int:
    """A reference count that makes an object immortal: the interpreter's own mark on
    3.12+ (``None`` has it), else 2**62, which no program's decrements bring to 0."""
    if sys.version_info >= (3, 12):
        return ctypes.c_ssize_t.from_address(id(None)).value
    return 1 << 62


def _is_immortal(obj) -> bool:
    count = ctypes.c_ssize_t.from_address(id(obj)).value
    if sys.version_info >= (3, 12):
        return ctypes.c_int32(count).value < 0  # as _Py_IsImmortal on 64-bit builds
    return count >= 1 << 61


_INTS: list[int] = []  # the shared ints 0, 1, ...: kept alive (and immortal) for the process
_INT_ADDRESSES = np.zeros(0, np.uint64)
_INTS_LOCK = threading.Lock()


def _shared_int_addresses(n: int) -> np.ndarray:
    """Addresses of the immortal ints 0 .. n-1 (made on first need, never freed)."""
    global _INT_ADDRESSES
    with _INTS_LOCK:
        have = len(_INTS)
        if n > have:
            new = list(range(have, n))
            addresses = np.fromiter(map(id, new), np.uint64, len(new))
            _set_counts(addresses, np.uint64(_immortal_count()))
            _INTS.extend(new)
            _INT_ADDRESSES = np.concatenate([_INT_ADDRESSES, addresses])
        return _INT_ADDRESSES[:n]


class IdLists:
    """Lists of ids below ``n_vocab``, from the shared immortal ints."""

    _works: bool | None = None  # the layout check, once per process

    def __init__(self, n_vocab: int):
        self.n_vocab = n_vocab

    @cached_property  # made on first use, after the layout check passed
    def _addresses(self) -> np.ndarray:
        return _shared_int_addresses(self.n_vocab)

    @cached_property
    def _kernel_table(self) -> np.ndarray:
        return np.concatenate([self._addresses, _C_API])

    def kernel_table(self) -> np.ndarray | None:
        """The ``table`` of :func:`list_into`, or None where the layout check failed."""
        return self._kernel_table if self._usable() else None

    def to_list(self, ids: np.ndarray) -> list[int]:
        """``ids.tolist()``, sharing int objects (ids of any unsigned or signed int dtype)."""
        if ids.size < FILL_FROM or not self._usable():
            return ids.tolist()
        out = _list_new(ids.size)  # items NULL until filled; not seen by anyone before that
        if _fill(_items_address(out), ids, self._addresses) != ids.size:
            return ids.tolist()  # an id out of range: freeing `out` skips its NULL items
        _untrack(out)  # as the kernels' lists (_untracked_list)
        return out

    def to_lists(self, ids: np.ndarray, doc: np.ndarray) -> list[list[int]]:
        """``[ids[doc[d]:doc[d + 1]].tolist() for d ...]``, sharing int objects."""
        if not self._usable():
            return split_tolist(ids, doc)
        address = _fill_lists(_C_API, ids, doc, self._addresses)
        if address == 0:
            if ids.size and (ids.min() < 0 or ids.max() >= self.n_vocab):
                raise ValueError(f"ids out of range for a vocabulary of {self.n_vocab}")
            raise MemoryError("no memory for the lists of ids")
        return _take_object(int(address))

    @classmethod
    def _usable(cls) -> bool:
        if cls._works is None:
            cls._works = _check_layout()
        return cls._works


def _check_layout() -> bool:
    """Whether this interpreter lays out lists and reference counts as the kernels write
    them: on a GIL build of CPython, make ints of its own immortal, fill lists from
    them and compare the lists and the counts."""
    if numba.config.DISABLE_JIT or sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return False
    try:
        probe = [object()]
        if ctypes.c_size_t.from_address(_items_address(probe)).value != id(probe[0]):
            return False
        ints = list(range(10**9, 10**9 + FILL_FROM))  # ints of its own, left immortal (a few bytes)
        addresses = np.fromiter(map(id, ints), np.uint64, len(ints))
        _set_counts(addresses, np.uint64(_immortal_count()))
        if not all(map(_is_immortal, ints)):
            return False
        ids = np.arange(FILL_FROM, dtype=np.uint32)[::-1].copy()  # the encoder's dtype: one compile
        out = _list_new(ids.size)
        if _fill(_items_address(out), ids, addresses) != ids.size:
            return False
        ok = out == ints[::-1]
        del out
        doc = np.array([0, 0, 3, ids.size], np.int64)
        lists = _take_object(int(_fill_lists(_C_API, ids, doc, addresses)))
        ok = ok and lists == [[], ints[::-1][:3], ints[::-1][3:]]
        del lists
        return ok and all(map(_is_immortal, ints))
    except Exception:  # any surprise: the plain way
        return False
