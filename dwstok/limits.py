"""Limits of the encoder that a config can be checked against before any stage runs,
without importing the kernels.

``MAX_IDS``: the most ids a vocabulary may have. The encoder packs up to three ids in
one 64-bit word, 21 bits each, with all ones meaning "no id" (``bpe.span``), and the
pair table keys a pair and its rank in 63 bits (``bpe.build``).

>>> MAX_IDS
2097151
"""

MAX_IDS = (1 << 21) - 1
