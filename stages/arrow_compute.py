"""Arrow compute functions for pretokenize and count, without importing ``pyarrow.compute``.

``pyarrow.compute`` wraps and documents each of Arrow's 280 functions when imported:
40 ms holding the GIL, which every pretokenize shard thread waited for before its first
batch, and count's start after it (``Array.cast``, ``take``, ``dictionary_encode``,
``Table.sort_by`` and ``group_by`` import it too). The functions here reach the same
kernels through ``pyarrow._compute`` and ``pyarrow._acero``, the modules that
``pyarrow.compute`` and ``pyarrow.acero`` wrap. A build then imports it only in the
stages after train (and in count when it prunes: ``Table.filter``).
"""

from __future__ import annotations


def arrow_call(name: str, *args, options=None):
    """Arrow's compute function ``name`` on ``args`` (arrays, tables or scalars), as
    ``pyarrow.compute.<name>(*args)`` calls it, with ``options`` (``pyarrow._compute``'s
    options classes) or the defaults.

    >>> import pyarrow as pa
    >>> arrow_call("equal", pa.array(["en", ""]), pa.scalar("")).to_pylist()
    [False, True]
    >>> arrow_call("take", pa.array(["en", "de"]), pa.array([1, 1, 0])).to_pylist()
    ['de', 'de', 'en']
    """
    from pyarrow._compute import call_function

    return call_function(name, list(args), options)


def arrow_cast(array, target_type):
    """``array.cast(target_type)``: a safe cast (a string cast checks the UTF-8).

    >>> import pyarrow as pa
    >>> arrow_cast(pa.array(["a"]), pa.large_string()).type
    DataType(large_string)
    """
    from pyarrow._compute import CastOptions, call_function

    return call_function("cast", [array], CastOptions.safe(target_type))


def sorted_table(table, keys: list[tuple[str, str]]):
    """``table.sort_by(keys)``: ``keys`` are ``(column, "ascending" | "descending")``.

    >>> import pyarrow as pa
    >>> sorted_table(pa.table({"a": [2, 1, 2], "b": [1, 0, 0]}), [("a", "ascending"), ("b", "ascending")]).to_pydict()
    {'a': [1, 2, 2], 'b': [0, 0, 1]}
    """
    from pyarrow._compute import SortOptions

    return arrow_call("take", table, arrow_call("sort_indices", table, options=SortOptions(sort_keys=keys)))


def grouped_sums(table, keys: list[str], column: str):
    """``table.group_by(keys, use_threads=False).aggregate([(column, "sum")])``: the
    ``keys`` and ``<column>_sum``, a row per distinct key, through Arrow's Acero as
    ``pyarrow.acero`` runs it.

    >>> import pyarrow as pa
    >>> t = pa.table({"k": ["x", "y", "x"], "n": [1, 2, 3]})
    >>> r = grouped_sums(t, ["k"], "n")
    >>> r.column("k").to_pylist(), r.column("n_sum").to_pylist()
    (['x', 'y'], [4, 2])
    """
    from pyarrow._acero import AggregateNodeOptions, Declaration, TableSourceNodeOptions

    decl = Declaration.from_sequence([
        Declaration("table_source", TableSourceNodeOptions(table)),
        Declaration("aggregate", AggregateNodeOptions([([column], "hash_sum", None, f"{column}_sum")], keys=keys)),
    ])
    return decl.to_table(use_threads=False)
