"""Three LLVM instructions Numba does not expose: prefetch, an unaligned 8-byte load, ctz.

Each is an ``@intrinsic`` (inlined straight into the kernel's IR, no call and no reference
counting), with a plain Python twin under ``NUMBA_DISABLE_JIT=1``.
"""

from __future__ import annotations

import numba
import numpy as np


def _item_pointer(context, builder, signature, args):
    """Codegen of ``(array, index)`` intrinsics: a pointer to ``array[index]`` (flat,
    no negative-index wraparound)."""
    from numba.core import cgutils

    aryty = signature.args[0]
    ary = context.make_array(aryty)(context, builder, args[0])
    return cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)


def _make_prefetch():
    """``prefetch(array, flat_index)``: hint the CPU to load that element's cache line.

    Only a hint: it changes no result. Kernels that probe big hash tables issue it a few
    lookups ahead so that the memory waits overlap.
    """
    if numba.config.DISABLE_JIT:
        return lambda arr, i: None
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def prefetch(typingctx, arr, idx):
        sig = types.void(arr, idx)

        def codegen(context, builder, signature, args):
            ptr = _item_pointer(context, builder, signature, args)
            i8p = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
            builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])  # read, keep, data
            return context.get_dummy_value()

        return sig, codegen

    return prefetch


prefetch = _make_prefetch()


def _make_load8():
    """``load8(uint8 array, i)``: the 8 bytes at i as one little-endian uint64, in one load.

    The caller makes sure ``i + 8 <= array.size``. Packing a piece's head byte by byte
    costs a loop whose length the CPU cannot predict, once for each of millions of pieces.
    """
    if numba.config.DISABLE_JIT:
        return lambda arr, i: np.uint64(int.from_bytes(bytes(arr[i : i + 8]), "little"))
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def load8(typingctx, arr, idx):
        sig = types.uint64(arr, idx)

        def codegen(context, builder, signature, args):
            ptr = _item_pointer(context, builder, signature, args)
            return builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)

        return sig, codegen

    return load8


load8 = _make_load8()


def _make_ctz():
    """``ctz(x)``: the number of trailing zero bits of a nonzero uint64."""
    if numba.config.DISABLE_JIT:
        return lambda x: (int(x) & -int(x)).bit_length() - 1
    from numba.cpython.unsafe.numbers import trailing_zeros

    return trailing_zeros


ctz = _make_ctz()
