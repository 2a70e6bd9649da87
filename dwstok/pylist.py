"""Python lists of token ids made from one cached ``int`` object per id.

``ndarray.tolist()`` allocates a new int object for every id, a large share of what an
``encode()`` call costs. ``IdLists`` keeps the ints ``0 .. n_vocab-1`` alive
and fills a new list with references to them: one reference-count increment and one
pointer store per id, in a kernel. No library does this (NumPy's ``take`` on an object
array and then ``tolist`` counts every reference three times); fastokens does the same
from Rust.

The kernel writes CPython's objects directly, so it relies on two facts about the
interpreter: a list's items are an array of object pointers at ``ob_item``, and an
object's reference count is the first word of its header (immortal objects, 3.12+, have
a negative low half and are left alone, as ``Py_INCREF`` does). ``IdLists`` checks both
on real objects the first time it is used in a process, and falls back to ``tolist()``
on any interpreter where the check fails (free-threaded builds, PyPy, a new layout).

>>> lists = IdLists(1000)
>>> lists.to_list(np.array([5, 999, 5] * 40, np.uint32))[:3]
[5, 999, 5]
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


_list_new = ctypes.pythonapi.PyList_New
_list_new.restype = ctypes.py_object
_list_new.argtypes = [ctypes.c_ssize_t]


def _items_address(lst: list) -> int:
    return ctypes.c_size_t.from_address(id(lst) + _OB_ITEM_OFFSET).value


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
        ids = np.arange(FILL_FROM, dtype=np.int64)[::-1].copy()
        before = sys.getrefcount(ints[0])
        out = _list_new(ids.size)
        if _fill(_items_address(out), ids, addresses) != ids.size:
            return False
        ok = out == ints[::-1] and sys.getrefcount(ints[0]) == before + 1
        del out
        return ok and sys.getrefcount(ints[0]) == before
    except Exception:  # any surprise: the plain way
        return False
