"""The oracle the BPE kernels' tests compare to: BPE from its definition, in plain Python
(``dwstok.reference``, which export's self-check uses too).

>>> merges = {(b"a", b"a"): 0, (b"aa", b"a"): 1, (b"aaa", b"b"): 2}
>>> merge_order(b"aaab", merges)
[b'aaab']
"""

from __future__ import annotations

from dwstok.reference import merge_order, tiktoken_ranks

__all__ = ["merge_order", "tiktoken_ranks"]
