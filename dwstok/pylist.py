"""Python lists of token ids made from one cached ``int`` object per id.

``ndarray.tolist()`` allocates a new int object for every id, a large share of what an
``encode()`` call costs. ``IdLists`` keeps the ints ``0 .. n_vocab-1`` alive
and fills a new list with references to them: one reference-count increment and one
pointer store per id, in a kernel. No library does this (NumPy's ``take`` on an object
array and then ``tolist`` counts every reference three times); fastokens does the same
from Rust.

``to_lists`` makes a batch's list of lists the same way in one call (each list from
``PyList_New``, called by address), rather than slicing one flat list.

The kernels write CPython's objects directly, so they rely on two facts about the
interpreter: a list's items are an array of object pointers at ``ob_item``, and an
object's reference count is the first word of its header (immortal objects, 3.12+, have
a negative low half and are left alone, as ``Py_INCREF`` does). ``IdLists`` checks both
on real objects the first time it is used in a process, and falls back to ``tolist()``
on any interpreter where the check fails (free-threaded builds, PyPy, a new layout).

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

import numba
import numpy as np

# Below this many ids ``tolist`` costs as little as calling the kernel (bench/list_ints.py).
FILL_FROM = 64
# ``PyListObject``: ob_refcnt, ob_type, ob_size, then ob_item (64-bit builds).
_OB_ITEM_OFFSET = 3 * ctypes.sizeof(ctypes.c_ssize_t)
_OB_ITEM = np.uint64(_OB_ITEM_OFFSET)  # for kernels: uint64 + int64 would be a float there


def _make_store_ref():
    """``store_ref(items_address, i, obj_address)``: one more reference to the object,
    stored at ``items[i]``."""
    if numba.config.DISABLE_JIT:
        return None
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def store_ref(typingctx, items, i, obj):
        sig = types.void(items, i, obj)

        def codegen(context, builder, signature, args):
            items_addr, idx, obj_addr = args
            i64, i32 = ir.IntType(64), ir.IntType(32)
            refcnt = builder.inttoptr(obj_addr, i64.as_pointer())
            old = builder.load(refcnt)
            # Py_INCREF on a GIL build: immortal objects (3.12+) keep their count
            mortal = builder.icmp_signed(">=", builder.trunc(old, i32), i32(0))
            builder.store(builder.select(mortal, builder.add(old, i64(1)), old), refcnt)
            builder.store(obj_addr, builder.gep(builder.inttoptr(items_addr, i64.as_pointer()), [idx]))
            return context.get_dummy_value()

        return sig, codegen

    return store_ref


_store_ref = _make_store_ref()


def _make_c_calls():
    """``call_n(f, n)``, ``call_p(f, p)`` and ``call_0(f)``: call the C function at
    address ``f`` (``PyObject *f(Py_ssize_t)``, ``void f(PyObject *)``, ``void f(void)``);
    ``word(a)``/``set_word(a, i, v)``: read the word at ``a``, write ``v`` to word i at ``a``."""
    if numba.config.DISABLE_JIT:
        return None, None, None, None, None
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

    return call_n, call_p, call_0, word, set_word


_call_n, _call_p, _call_0, _word, _set_word = _make_c_calls()


# Not _jit.njit: this kernel must hold the GIL, since it changes reference counts that
# other Python threads change too.
@numba.njit(cache=True, nogil=False)
def _fill(items, ids, addresses):
    """Store a reference to ``addresses[ids[i]]`` at ``items[i]`` for every i; return how
    many were stored (fewer than ``ids.size`` at the first id out of range)."""
    n = addresses.size
    for i in range(ids.size):
        t = ids[i]
        if t < 0 or t >= n:
            return i
        _store_ref(items, np.uint64(i), addresses[t])
    return ids.size


@numba.njit(cache=True, nogil=False)
def _fill_lists(c_api, ids, doc, addresses):
    """A new list of lists, list d holding ids[doc[d]:doc[d+1]], as the address of a new
    reference, or 0 (an id out of range, or no memory). ``c_api``: the addresses of
    PyList_New, Py_DecRef and PyErr_Clear.

    Each list is made by PyList_New and filled here: no flat list to slice, which had
    counted every reference twice more."""
    n = addresses.size
    for i in range(ids.size):
        if ids[i] < 0 or ids[i] >= n:
            return np.uint64(0)
    new, decref, clear = c_api[0], c_api[1], c_api[2]
    n_docs = doc.size - 1
    outer = _call_n(new, n_docs)
    if outer == 0:
        _call_0(clear)
        return np.uint64(0)
    slots = _word(outer + _OB_ITEM)
    for d in range(n_docs):
        b0 = doc[d]
        m = doc[d + 1] - b0
        inner = _call_n(new, m)
        if inner == 0:  # free what was made (NULL slots are skipped), report no memory
            _call_0(clear)
            _call_p(decref, outer)
            return np.uint64(0)
        _set_word(slots, np.uint64(d), inner)
        if m > 0:
            _fill(_word(inner + _OB_ITEM), ids[b0 : b0 + m], addresses)
    return outer


# Functions of our own from the C API (not ctypes.pythonapi's shared ones, whose types
# other code in the process may set).
_list_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_ssize_t)(("PyList_New", ctypes.pythonapi))
_decref = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(("Py_DecRef", ctypes.pythonapi))
_C_API = np.array(
    [ctypes.cast(f, ctypes.c_void_p).value for f in (_list_new, _decref, ctypes.pythonapi.PyErr_Clear)], np.uint64
)


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


class IdLists:
    """Lists of ids below ``n_vocab``, from ints made once."""

    _works: bool | None = None  # the layout check, once per process

    def __init__(self, n_vocab: int):
        self._ints = list(range(n_vocab))  # kept alive: the lists point at these
        self._addresses = np.fromiter(map(id, self._ints), np.uint64, n_vocab)

    def to_list(self, ids: np.ndarray) -> list[int]:
        """``ids.tolist()``, sharing int objects (ids of any unsigned or signed int dtype)."""
        if ids.size < FILL_FROM or not self._usable():
            return ids.tolist()
        out = _list_new(ids.size)  # items NULL until filled; not seen by anyone before that
        if _fill(_items_address(out), ids, self._addresses) != ids.size:
            return ids.tolist()  # an id out of range: freeing `out` skips its NULL items
        return out

    def to_lists(self, ids: np.ndarray, doc: np.ndarray) -> list[list[int]]:
        """``[ids[doc[d]:doc[d + 1]].tolist() for d ...]``, sharing int objects."""
        if not self._usable():
            return split_tolist(ids, doc)
        address = _fill_lists(_C_API, ids, doc, self._addresses)
        if address == 0:
            if ids.size and (ids.min() < 0 or ids.max() >= self._addresses.size):
                raise ValueError(f"ids out of range for a vocabulary of {self._addresses.size}")
            raise MemoryError("no memory for the lists of ids")
        return _take_object(int(address))

    @classmethod
    def _usable(cls) -> bool:
        if cls._works is None:
            cls._works = _check_layout()
        return cls._works


def _check_layout() -> bool:
    """Whether this interpreter lays out lists and reference counts as ``_fill`` writes
    them: fill a list from ints on a GIL build of CPython and compare it and the counts."""
    if numba.config.DISABLE_JIT or sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return False
    try:
        probe = [object()]
        if ctypes.c_size_t.from_address(_items_address(probe)).value != id(probe[0]):
            return False
        ints = list(range(1000, 1000 + FILL_FROM))  # mortal ints (not the small-int cache)
        addresses = np.fromiter(map(id, ints), np.uint64, len(ints))
        ids = np.arange(FILL_FROM, dtype=np.uint32)[::-1].copy()  # the encoder's dtype: one compile
        before = sys.getrefcount(ints[0])
        out = _list_new(ids.size)
        if _fill(_items_address(out), ids, addresses) != ids.size:
            return False
        ok = out == ints[::-1] and sys.getrefcount(ints[0]) == before + 1
        del out
        doc = np.array([0, 0, 3, ids.size], np.int64)
        lists = _take_object(int(_fill_lists(_C_API, ids, doc, addresses)))
        ok = ok and lists == [[], ints[::-1][:3], ints[::-1][3:]] and sys.getrefcount(ints[0]) == before + 1
        del lists
        return ok and sys.getrefcount(ints[0]) == before
    except Exception:  # any surprise: the plain way
        return False
