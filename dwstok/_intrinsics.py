"""LLVM instructions Numba does not expose: prefetch, an unaligned 8-byte load, an
unsigned index, a read-only view, 2-D and 1-D views made without a call into Numba's
runtime, an address as a pointer, ctz and clz, byte classes of 64 bytes as bit masks
(vector compares), and the code points of 64 bytes of UTF-8 at once.

Each is an ``@intrinsic`` (inlined straight into the kernel's IR, no call and no reference
counting), with a plain Python twin under ``NUMBA_DISABLE_JIT=1``; the views (``rows``,
``flat``) are Python functions whose kernel code Numba is given (``_register_views``).
"""

from __future__ import annotations

import numba
import numpy as np


def _item_pointer(context, builder, signature, args, nbytes=None):
    """Codegen of ``(array, index)`` intrinsics: a pointer to ``array[index]`` (flat,
    no negative-index wraparound), the ``nbytes`` bytes from it checked to lie inside
    the array when kernels compile with bounds checks (``NUMBA_BOUNDSCHECK=1``, as
    ``make test-bounds`` runs the tests): these raw loads and stores are what Numba's
    own check cannot see."""
    from numba import types
    from numba.core import cgutils

    aryty = signature.args[0]
    ary = context.make_array(aryty)(context, builder, args[0])
    if nbytes is not None and numba.config.BOUNDSCHECK:
        _check_room(context, builder, aryty, ary, context.cast(builder, args[1], signature.args[1], types.uint64), nbytes)
    return cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)


def _check_room(context, builder, aryty, ary, start, nbytes):
    """Raise IndexError unless bytes ``[start * itemsize, + nbytes)`` lie inside ``ary``
    (``start`` an unsigned 64-bit item index: a negative one is huge, and fails)."""
    from llvmlite import ir
    from numba.core import cgutils

    i64 = ir.IntType(64)
    itemsize = i64(context.get_abi_sizeof(context.get_data_type(aryty.dtype)))
    nitems = ary.nitems
    end = builder.add(builder.mul(start, itemsize), nbytes if isinstance(nbytes, ir.Value) else i64(nbytes))
    bad = builder.or_(builder.icmp_unsigned(">", start, nitems), builder.icmp_unsigned(">", end, builder.mul(nitems, itemsize)))
    with cgutils.if_unlikely(builder, bad):
        context.call_conv.return_user_exc(builder, IndexError, ("a raw load or store (dwstok._intrinsics) is past the end of its array",))


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
            ptr = _item_pointer(context, builder, signature, args, 8)
            return builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)

        return sig, codegen

    return load8


load8 = _make_load8()


def _make_ix():
    """``ix(i)``: ``i`` as a uint64 index, ``a[ix(i)]`` (no negative-index wraparound).

    ``_jit.ix`` does the same as an ``inline='always'`` kernel; the hot loops call it
    hundreds of times, and Numba copies and re-types a kernel's IR at each inlined call,
    which made compiling slower. This is the same cast (``np.uint64(i)``), emitted in place.
    """
    if numba.config.DISABLE_JIT:
        return lambda i: np.uint64(i)
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def ix(typingctx, i):
        if not isinstance(i, (types.Integer, types.Boolean)):
            return None
        sig = types.uint64(i)

        def codegen(context, builder, signature, args):
            return context.cast(builder, args[0], signature.args[0], types.uint64)

        return sig, codegen

    return ix


ix = _make_ix()


def _make_readonly():
    """``readonly(a)``: the array ``a`` typed read-only (the same array, no copy).

    Numba compiles a kernel once per argument type, and a writable and a read-only array
    are two. The encoder merges pieces of read-only text (``bytes``, Arrow buffers); the
    table builders pass their token bytes through this, so that they share its compiled
    merge instead of compiling another.
    """
    if numba.config.DISABLE_JIT:
        return lambda a: a
    from numba import types
    from numba.core.imputils import impl_ret_borrowed
    from numba.extending import intrinsic

    @intrinsic
    def readonly(typingctx, a):
        if not isinstance(a, types.Array):
            return None
        sig = a.copy(readonly=True)(a)

        def codegen(context, builder, signature, args):
            return impl_ret_borrowed(context, builder, signature.return_type, args[0])

        return sig, codegen

    return readonly


readonly = _make_readonly()


def rows(a: np.ndarray, ncols: int) -> np.ndarray:
    """A C-contiguous array as rows of ``ncols``: ``a.reshape(-1, ncols)``, a view.

    In a kernel, a view built in place (see :func:`_register_views`) instead of Numba's
    reshape, which calls into its runtime (``numba_attempt_nocopy_reshape``): the kernels
    made several a call, for their tables, their cache and each block of pieces. The
    caller makes sure ``ncols`` divides ``a.size``; kernels compiled with bounds checks
    (``NUMBA_BOUNDSCHECK=1``) raise ValueError, as ``reshape`` does, when it does not.

    >>> rows(np.arange(6), 3).tolist()
    [[0, 1, 2], [3, 4, 5]]
    """
    return a.reshape(-1, ncols)


def flat(a: np.ndarray) -> np.ndarray:
    """A C-contiguous array as 1-D: ``a.reshape(-1)``, a view (in a kernel, as :func:`rows`).

    >>> flat(np.arange(4).reshape(2, 2)).tolist()
    [0, 1, 2, 3]
    """
    return a.reshape(-1)


def _register_views():
    """Numba's typing and code of :func:`rows` and :func:`flat`: the view's shape and
    strides from the array's, the same data and owner. Registered as a function's
    code (not an ``@intrinsic``), so that the functions run as Python too, as
    ``unpack_tables`` runs the kernels' unpacking."""
    if numba.config.DISABLE_JIT:
        return
    from numba import types
    from numba.core import cgutils
    from numba.core.imputils import impl_ret_borrowed, lower_builtin
    from numba.extending import type_callable

    def c_array(a):
        return isinstance(a, types.Array) and a.layout == "C"

    def size_of(context, builder, aryty, ary):
        shape = cgutils.unpack_tuple(builder, context.make_array(aryty)(context, builder, ary).shape)
        size = shape[0]
        for dim in shape[1:]:
            size = builder.mul(size, dim)
        return size

    def view(context, builder, aryty, ary, retty, shape):
        src = context.make_array(aryty)(context, builder, ary)
        dst = context.make_array(retty)(context, builder)
        strides = [src.itemsize]
        for dim in reversed(shape[1:]):
            strides.insert(0, builder.mul(strides[0], dim))
        context.populate_array(
            dst, data=src.data, shape=cgutils.pack_array(builder, shape), strides=cgutils.pack_array(builder, strides),
            itemsize=src.itemsize, meminfo=src.meminfo, parent=src.parent,
        )
        return impl_ret_borrowed(context, builder, retty, dst._getvalue())

    @type_callable(rows)
    def _rows_type(context):
        return lambda a, ncols: a.copy(ndim=2, layout="C") if c_array(a) and isinstance(ncols, types.Integer) else None

    @lower_builtin(rows, types.Array, types.Integer)
    def _rows_code(context, builder, sig, args):
        aryty, colty = sig.args
        cols = context.cast(builder, args[1], colty, types.intp)
        size = size_of(context, builder, aryty, args[0])
        if numba.config.BOUNDSCHECK:  # as reshape: ncols must divide the size (checked runs only)
            zero = cols.type(0)
            bad = builder.icmp_signed("<=", cols, zero)
            with cgutils.if_unlikely(builder, bad):
                context.call_conv.return_user_exc(builder, ValueError, ("rows: ncols must be positive",))
            with cgutils.if_unlikely(builder, builder.icmp_signed("!=", builder.srem(size, cols), zero)):
                context.call_conv.return_user_exc(builder, ValueError, ("rows: ncols does not divide the array's size",))
        n = builder.sdiv(size, cols)
        return view(context, builder, aryty, args[0], sig.return_type, [n, cols])

    @type_callable(flat)
    def _flat_type(context):
        return lambda a: a.copy(ndim=1, layout="C") if c_array(a) else None

    @lower_builtin(flat, types.Array)
    def _flat_code(context, builder, sig, args):
        return view(context, builder, sig.args[0], args[0], sig.return_type, [size_of(context, builder, sig.args[0], args[0])])


_register_views()


def _make_pointer():
    """``pointer(a)``: the address ``a`` (an integer) as a ``void *``, for
    ``numba.carray``. A view made so has no owner to count references on: the caller keeps
    the memory alive (see bpe.encode.list_consts)."""
    if numba.config.DISABLE_JIT:
        return lambda a: a
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def pointer(typingctx, a):
        if not isinstance(a, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], cgutils.voidptr_t)

        return types.voidptr(a), codegen

    return pointer


pointer = _make_pointer()


def _make_ctz():
    """``ctz(x)``: the number of trailing zero bits of a nonzero uint64."""
    if numba.config.DISABLE_JIT:
        return lambda x: (int(x) & -int(x)).bit_length() - 1
    from numba.cpython.unsafe.numbers import trailing_zeros

    return trailing_zeros


ctz = _make_ctz()


def _make_clz():
    """``clz(x)``: the number of leading zero bits of a nonzero uint64."""
    if numba.config.DISABLE_JIT:
        return lambda x: 64 - int(x).bit_length()
    from numba.cpython.unsafe.numbers import leading_zeros

    return leading_zeros


clz = _make_clz()


def byte_masks_intrinsic(tests, fold=False):
    """An intrinsic ``f(uint8 array, i)`` -> a tuple of uint64, one per test: bit j is set
    when byte ``i + j`` passes it. A test is a list of ``(lo, n)``: the byte is in
    ``lo .. lo + n - 1`` for one of them. With ``fold``, bytes are or-ed with 0x20 first
    (a letter's lower case). The caller makes sure ``i + 64 <= array.size``.

    One 64-byte vector load and a compare per range: LLVM turns each mask into a
    ``vpcmpeqb``/``vpmovmskb`` pair. Built from Numba's loops instead, the masks took
    many times as long (LLVM widened every byte to 64 bits).
    """
    if numba.config.DISABLE_JIT:

        def twin(arr, i):
            out = []
            for test in tests:
                m = 0
                for j in range(64):
                    b = int(arr[i + j]) | (0x20 if fold else 0)
                    if any(lo <= b < lo + n for lo, n in test):
                        m |= 1 << j
                out.append(np.uint64(m))
            return tuple(out)

        return twin
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def byte_masks(typingctx, arr, idx):
        sig = types.UniTuple(types.uint64, len(tests))(arr, idx)

        def codegen(context, builder, signature, args):
            vt = ir.VectorType(ir.IntType(8), 64)
            ptr = _item_pointer(context, builder, signature, args, 64)
            v = builder.load(builder.bitcast(ptr, vt.as_pointer()), align=1)
            if fold:
                v = builder.or_(v, ir.Constant(vt, [0x20] * 64))
            masks = []
            for test in tests:
                hit = None
                for lo, n in test:
                    if n == 1:
                        h = builder.icmp_unsigned("==", v, ir.Constant(vt, [lo] * 64))
                    else:
                        h = builder.icmp_unsigned("<", builder.sub(v, ir.Constant(vt, [lo] * 64)), ir.Constant(vt, [n] * 64))
                    hit = h if hit is None else builder.or_(hit, h)
                masks.append(builder.bitcast(hit, ir.IntType(64)))
            return context.make_tuple(builder, signature.return_type, masks)

        return sig, codegen

    return byte_masks


def _make_utf8_codes():
    """``utf8_codes(buf, i, dst, k)``: for each of the 64 bytes from ``buf[i]``, the code
    point of a character of two or three bytes that started there (16 bits, decoded as
    the scanner's ``_step`` does; garbage where none starts), written as 64 uint16 to the
    128 bytes of the int64 array ``dst`` from ``dst[k]``. The caller makes sure
    ``i + 66 <= buf.size`` and ``k + 16 <= dst.size``.

    Vector shifts, ands and a select, where decoding one character at a time cost a
    dozen instructions a character (bench/results/session18-utf8-windows-20261204.md).
    """
    if numba.config.DISABLE_JIT:

        def twin(buf, i, dst, k):
            codes = dst.view(np.uint16)
            for j in range(64):
                a, b, c = int(buf[i + j]), int(buf[i + j + 1]) & 0x3F, int(buf[i + j + 2]) & 0x3F
                cp = ((a & 0x0F) << 12) | (b << 6) | c if a >= 0xE0 else ((a & 0x1F) << 6) | b
                codes[4 * k + j] = cp & 0xFFFF

        return twin
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def utf8_codes(typingctx, buf, i, dst, k):
        sig = types.void(buf, i, dst, k)

        def codegen(context, builder, signature, args):
            v8 = ir.VectorType(ir.IntType(8), 64)
            v16 = ir.VectorType(ir.IntType(16), 64)
            src = builder.bitcast(_item_pointer(context, builder, signature, args[:2], 66), ir.IntType(8).as_pointer())
            a, b, c = (
                builder.zext(builder.load(builder.bitcast(builder.gep(src, [ir.Constant(ir.IntType(64), d)]), v8.as_pointer()), align=1), v16)
                for d in range(3)
            )

            def k16(x):
                return ir.Constant(v16, [x] * 64)

            b6 = builder.and_(b, k16(0x3F))
            cp2 = builder.or_(builder.shl(builder.and_(a, k16(0x1F)), k16(6)), b6)
            cp3 = builder.or_(
                builder.or_(builder.shl(builder.and_(a, k16(0x0F)), k16(12)), builder.shl(b6, k16(6))), builder.and_(c, k16(0x3F))
            )
            cp = builder.select(builder.icmp_unsigned(">=", a, k16(0xE0)), cp3, cp2)
            dsig = types.void(signature.args[2], signature.args[3])
            ptr = _item_pointer(context, builder, dsig, args[2:], 128)
            builder.store(cp, builder.bitcast(ptr, v16.as_pointer()), align=1)
            return context.get_dummy_value()

        return sig, codegen

    return utf8_codes


utf8_codes = _make_utf8_codes()


def _make_code_at():
    """``code_at(dst, k, j)``: the ``j``-th uint16 of the int64 array ``dst`` from
    ``dst[k]`` (as int64), and ``set_code(dst, k, j, v)`` to write it."""
    if numba.config.DISABLE_JIT:

        def get(dst, k, j):
            return np.int64(dst.view(np.uint16)[4 * k + j])

        def put(dst, k, j, v):
            dst.view(np.uint16)[4 * k + j] = v

        return get, put
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    def _slot(context, builder, signature, args):
        upto = None  # bytes from dst[k] through uint16 j, checked under NUMBA_BOUNDSCHECK
        if numba.config.BOUNDSCHECK:
            j = context.cast(builder, args[2], signature.args[2], types.uint64)
            upto = builder.mul(builder.add(j, ir.IntType(64)(1)), ir.IntType(64)(2))
        ptr = _item_pointer(context, builder, types.void(signature.args[0], signature.args[1]), args[:2], upto)
        i16p = builder.bitcast(ptr, ir.IntType(16).as_pointer())
        return builder.gep(i16p, [args[2]])

    @intrinsic
    def code_at(typingctx, dst, k, j):
        sig = types.int64(dst, k, j)

        def codegen(context, builder, signature, args):
            return builder.zext(builder.load(_slot(context, builder, signature, args), align=2), ir.IntType(64))

        return sig, codegen

    @intrinsic
    def set_code(typingctx, dst, k, j, v):
        sig = types.void(dst, k, j, v)

        def codegen(context, builder, signature, args):
            builder.store(builder.trunc(args[3], ir.IntType(16)), _slot(context, builder, signature, args), align=2)
            return context.get_dummy_value()

        return sig, codegen

    return code_at, set_code


code_at, set_code = _make_code_at()


def code_masks_intrinsic(values, mask=0x0F):
    """An intrinsic ``f(dst, k)`` -> a tuple of uint64, one per value: bit j is set when
    the low byte of the ``j``-th uint16 from ``dst[k]`` (int64 array), and-ed with
    ``mask``, equals it. Reads what :func:`utf8_codes` and ``set_code`` wrote."""
    if numba.config.DISABLE_JIT:

        def twin(dst, k):
            codes = dst.view(np.uint16)[4 * k : 4 * k + 64]
            return tuple(np.uint64(sum(1 << j for j in range(64) if (int(codes[j]) & 0xFF & mask) == v)) for v in values)

        return twin
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def code_masks(typingctx, dst, k):
        sig = types.UniTuple(types.uint64, len(values))(dst, k)

        def codegen(context, builder, signature, args):
            v8 = ir.VectorType(ir.IntType(8), 64)
            v16 = ir.VectorType(ir.IntType(16), 64)
            ptr = _item_pointer(context, builder, signature, args, 128)
            codes = builder.trunc(builder.load(builder.bitcast(ptr, v16.as_pointer()), align=1), v8)
            codes = builder.and_(codes, ir.Constant(v8, [mask] * 64))
            masks = [
                builder.bitcast(builder.icmp_unsigned("==", codes, ir.Constant(v8, [v] * 64)), ir.IntType(64)) for v in values
            ]
            return context.make_tuple(builder, signature.return_type, masks)

        return sig, codegen

    return code_masks
