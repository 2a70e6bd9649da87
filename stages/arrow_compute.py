"""Arrow compute functions for the shard path, without importing ``pyarrow.compute``.

``pyarrow.compute`` wraps and documents each of Arrow's 280 functions when imported:
40 ms holding the GIL, and every shard thread waited for it before its first batch
(``Array.cast``, ``take`` and ``dictionary_encode`` import it too). The functions here
reach the same kernels through ``pyarrow._compute``, the module ``pyarrow.compute``
takes ``call_function`` from. Stages that run after the shards use ``pyarrow.compute``.
"""

from __future__ import annotations


def arrow_call(name: str, *args):
    """Arrow's compute function ``name`` on ``args`` (arrays or scalars), as
    ``pyarrow.compute.<name>(*args)`` calls it with default options.

    >>> import pyarrow as pa
    >>> arrow_call("equal", pa.array(["en", ""]), pa.scalar("")).to_pylist()
    [False, True]
    >>> arrow_call("take", pa.array(["en", "de"]), pa.array([1, 1, 0])).to_pylist()
    ['de', 'de', 'en']
    """
    from pyarrow._compute import call_function

    return call_function(name, list(args))


def arrow_cast(array, target_type):
    """``array.cast(target_type)``: a safe cast (a string cast checks the UTF-8).

    >>> import pyarrow as pa
    >>> arrow_cast(pa.array(["a"]), pa.large_string()).type
    DataType(large_string)
    """
    from pyarrow._compute import CastOptions, call_function

    return call_function("cast", [array], CastOptions.safe(target_type))
