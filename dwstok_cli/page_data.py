r"""What ``dwstok page`` ships for each tokenizer: one ``data/NAME.js`` the page loads.

A ``<script>`` tag loads from ``file://`` where ``fetch`` may not, so every data file is a
script that registers its tokenizer: ``(window.DWSTOK_DATA ||= []).push({...})``.

- rank-based BPE (dwstok models, GPT-2, o200k): the tokens in rank order (:func:`pack_ranks`),
  the pattern rewritten for JavaScript, the specials;
- SentencePiece (Mistral): the ``tokenizer.json`` of :mod:`dwstok_cli.spm_convert`, for
  tokenizers.js.

>>> js_pattern(r"\p{L}++|(?i:'s)")
"\\p{L}+|(?:'[Ssſ])"
"""

from __future__ import annotations

import base64
import json
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

# Unicode White_Space, which ``\s`` means to tiktoken (Rust), ``regex`` and dwstok's
# scanner. JavaScript's ``\s`` differs: it has U+FEFF and lacks U+0085.
_WHITE = r"\t-\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_CASELESS = re.compile(r"\(\?i:([^()]*)\)")


def _fold_class(ch: str) -> str:
    """Every character a case-insensitive ``ch`` matches (``s`` also matches ``ſ``)."""
    same = sorted({c for c in map(chr, range(sys.maxunicode + 1)) if c.casefold() == ch.casefold()}) if ch.isalpha() else [ch]
    return re.escape(ch) if len(same) == 1 else "[" + "".join(same) + "]"


def js_pattern(pattern: str) -> str:
    """``pattern`` (tiktoken / ``regex`` syntax) as a JavaScript ``RegExp`` with the ``u``
    flag reads it, matching the same pieces.

    - ``\\s`` and ``\\S`` become explicit White_Space classes;
    - possessive quantifiers (``++``, ``*+``, ``?+``, ``}+``) become greedy: in these
      patterns each one ends its alternative, so nothing could backtrack into it;
    - ``(?i:...)`` groups are spelled out (case-insensitive groups are new in JavaScript).
    """
    out = []
    in_class = False
    quantified = False  # the last thing written is a quantifier: a "+" after it is possessive
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            esc = pattern[i : i + 2]
            if esc in (r"\p", r"\P") and pattern[i + 2 : i + 3] == "{":
                esc = pattern[i : pattern.index("}", i) + 1]
            if esc == r"\s":
                out.append(_WHITE if in_class else f"[{_WHITE}]")
            elif esc == r"\S":
                if in_class:
                    raise ValueError(r"\S inside a character class has no JavaScript spelling here")
                out.append(f"[^{_WHITE}]")
            else:
                out.append(esc)
            i += len(esc)
            quantified = False
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "+" and quantified:
            i += 1  # possessive -> greedy
            quantified = False
            continue
        elif c == "{":
            close = pattern.index("}", i)
            out.append(pattern[i : close + 1])
            i = close + 1
            quantified = True
            continue
        out.append(c)
        quantified = not in_class and c in "+*?"
        i += 1
    js = "".join(out)
    return _CASELESS.sub(lambda m: "(?:" + "".join(_fold_class(ch) if ch.isalpha() else ch for ch in m.group(1)) + ")", js)


def pack_ranks(ranks: Iterable[tuple[int, bytes]]) -> dict[str, Any]:
    """Tokens in rank order, packed so the page decodes them in one ``atob`` call (one call
    per token cost o200k 1.8 s in a loaded Chromium): ``bytes`` is the base64 of every
    token's bytes end to end, ``lengths`` each token's length, ``runs`` the ranks as
    ``[first, count]`` runs of consecutive ranks.

    >>> pack_ranks([(33, b"b"), (32, b"a"), (40, b"cd")])
    {'bytes': 'YWJjZA==', 'lengths': [1, 1, 2], 'runs': [[32, 2], [40, 1]]}
    """
    runs: list[list[int]] = []
    lengths: list[int] = []
    parts: list[bytes] = []
    for rank, token in sorted(ranks):
        if runs and rank == runs[-1][0] + runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([rank, 1])
        lengths.append(len(token))
        parts.append(token)
    return {"bytes": base64.b64encode(b"".join(parts)).decode("ascii"), "lengths": lengths, "runs": runs}


def tiktoken_entry(
    *, name: str, label: str, ranks: Iterable[tuple[int, bytes]], pattern: str, specials: Mapping[str, int], n_vocab: int, note: str = ""
) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "kind": "tiktoken",
        "n_vocab": n_vocab,
        "note": note,
        "pat_str": js_pattern(pattern),
        "special_tokens": dict(specials),
        "ranks": pack_ranks(ranks),
    }


def spm_entry(*, name: str, label: str, tokenizer_json: Mapping[str, Any], note: str = "") -> dict[str, Any]:
    model = tokenizer_json["model"]
    normalizers = (tokenizer_json.get("normalizer") or {}).get("normalizers", [])
    return {
        "name": name,
        "label": label,
        "kind": "hf",
        "n_vocab": len(model["vocab"]),
        "note": note,
        "dummy_prefix": any(n["type"] == "Prepend" for n in normalizers),
        "tokenizer": tokenizer_json,
    }


def data_script(entry: Mapping[str, Any]) -> str:
    """The ``data/NAME.js`` text for one entry."""
    # ensure_ascii: the file is then plain ASCII, whatever charset the browser assumes
    # for a script read from disk. "</" is escaped so no string can end a <script>.
    body = json.dumps(entry, ensure_ascii=True, separators=(",", ":")).replace("</", "<\\/")
    return f"(window.DWSTOK_DATA=window.DWSTOK_DATA||[]).push({body});\n"
