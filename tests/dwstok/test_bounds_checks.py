"""Kernels compiled with bounds checks (``NUMBA_BOUNDSCHECK=1``, as ``make test-bounds``
runs the tests) check the raw loads and stores of ``dwstok._intrinsics`` too: one that
would reach past its array raises IndexError instead of reading what lies beyond. And
``rows`` of a width that does not divide the array raises ValueError, as ``reshape``
does, instead of dropping the rest.

The cases compile in one fresh process with a cache folder of its own: Numba's cache
does not tell kernels compiled with checks from kernels without, so a shared folder
would hand a checked run the unchecked kernels."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from dwstok._intrinsics import byte_masks_intrinsic, code_at, code_masks_intrinsic, load8, rows, set_code, utf8_codes
    from dwstok._jit import njit

    masks = byte_masks_intrinsic([[(0x61, 26)]])
    codes = code_masks_intrinsic([1])

    @njit
    def k_load8(buf, i):
        return load8(buf, i)

    @njit
    def k_masks(buf, i):
        return masks(buf, i)[0]

    @njit
    def k_codes(buf, i, dst, k):
        utf8_codes(buf, i, dst, k)
        return codes(dst, k)[0]

    @njit
    def k_code_at(dst, k, j):
        set_code(dst, k, j, 7)
        return code_at(dst, k, j)

    @njit
    def k_rows(a, ncols):
        return rows(a, ncols).shape[0]

    def outcome(f, *args):
        try:
            f(*args)
            return "ok"
        except (IndexError, ValueError) as e:
            return type(e).__name__

    buf = np.frombuffer(b"abcdefghij" * 7, np.uint8)  # 70 bytes
    dst = np.zeros(20, np.int64)  # 160 bytes
    print(
        outcome(k_load8, buf, 62), outcome(k_load8, buf, 63), outcome(k_load8, buf, -1),
        outcome(k_masks, buf, 6), outcome(k_masks, buf, 7),
        outcome(k_codes, buf, 4, dst, 4), outcome(k_codes, buf, 5, dst, 4), outcome(k_codes, buf, 4, dst, 5),
        outcome(k_code_at, dst, 16, 15), outcome(k_code_at, dst, 16, 16),
        outcome(k_rows, dst, 4), outcome(k_rows, dst, 3), outcome(k_rows, dst, 0),
    )
    """
)


def test_raw_access_past_an_array_and_rows_of_a_bad_width_raise_under_bounds_checks(tmp_path):
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "numba"), DWSTOK_COMPILE="foreground")
    env.pop("NUMBA_DISABLE_JIT", None)
    script = tmp_path / "kernels.py"  # (a file: Numba caches no kernel defined in ``-c``)
    script.write_text(SCRIPT)
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    # load8: 62 + 8 = 70 fits, 63 does not, -1 never; 64-byte masks from 6 fit, from 7
    # not; utf8_codes reads 66 bytes (4 + 66 = 70) and writes 128 (words 4..19 of 20);
    # uint16 15 from word 16 is its last (16 * 8 + 16 * 2 = 160), 16 is past it; rows:
    # 20 words in rows of 4, of 3 (20 = 6 * 3 + 2), of 0
    assert r.stdout.split() == ["ok", "IndexError", "IndexError", "ok", "IndexError", "ok", "IndexError", "IndexError", "ok", "IndexError",
                                "ok", "ValueError", "ValueError"]
