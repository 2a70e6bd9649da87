"""Token audit of a dwstok model: which ids are waste, and which are glitch candidates.

- *unreachable*: encoding the token's own bytes does not give that single token;
- *dead*: a learned token (two bytes or more) never emitted on the eval corpus;
- *rare*: emitted, but fewer than ``RARE`` times;
- *scaffold*: a part of later merges, emitted itself less than ``SCAFFOLD_SHARE`` of what
  the tokens made directly from it are: an intermediate step more than a token;
- *longest*: the longest tokens, as ``[id, bytes]``;
- *repeated*: one character repeated (three times or more); *punctuation*: punctuation
  and symbols only (two or more, around optional whitespace).
"""

from __future__ import annotations

import unicodedata

import numpy as np

RARE = 10
SCAFFOLD_SHARE = 0.1
LONGEST = 20
EXAMPLES = 10


def unreachable(model) -> list[int]:
    """Ids whose bytes, encoded alone, are not that one token (one batch call)."""
    toks = model.tokens
    ids = [i for i, b in enumerate(toks) if b]
    if not ids:
        return []
    offsets = np.zeros(len(ids) + 1, np.int64)
    np.cumsum([len(toks[i]) for i in ids], out=offsets[1:])
    data = np.frombuffer(b"".join(toks[i] for i in ids), np.uint8)
    out, doc = model.tok.encode_utf8_batch(data, offsets, num_threads=1)
    single = np.diff(doc) == 1
    first = out[np.minimum(doc[:-1], max(out.size - 1, 0))] if out.size else np.zeros(len(ids), np.uint32)
    ok = single & (first == np.array(ids, np.int64))
    return [i for i, good in zip(ids, ok.tolist()) if not good]


def _text(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_repeated(b: bytes) -> bool:
    s = _text(b)
    return s is not None and len(s) >= 3 and len(set(s)) == 1


def is_punctuation(b: bytes) -> bool:
    s = _text(b)
    if s is None:
        return False
    core = s.strip()
    return len(core) >= 2 and all(unicodedata.category(c)[0] in "PS" for c in core)


def children_emitted(model, counts: np.ndarray) -> np.ndarray:
    """For each id: how often the tokens made directly from it (one merge up) were emitted."""
    by_bytes = {b: i for i, b in enumerate(model.tokens) if b}
    out = np.zeros(len(model.tokens), np.int64)
    for a, b in model.tok.merges:
        c = by_bytes.get(a + b)
        if c is None:
            continue
        out[by_bytes[a]] += counts[c]
        if b != a:
            out[by_bytes[b]] += counts[c]
    return out


def _examples(model, ids, counts=None) -> list[dict]:
    out = []
    for i in ids[:EXAMPLES]:
        e = {"id": int(i), "text": model.tokens[i].decode("utf-8", "backslashreplace"), "bytes": len(model.tokens[i])}
        if counts is not None:
            e["count"] = int(counts[i])
        out.append(e)
    return out


def audit(model, *, with_corpus: bool = True) -> dict:
    toks = model.tokens
    learned = np.array([len(b) >= 2 for b in toks], bool)
    result: dict = {}
    unr = unreachable(model)
    result["unreachable"] = unr
    if with_corpus and model.ids is not None:
        counts = model.token_counts()
        dead = np.flatnonzero(learned & (counts == 0)).tolist()
        rare = np.flatnonzero(learned & (counts > 0) & (counts < RARE)).tolist()
        kids = children_emitted(model, counts)
        scaffold = np.flatnonzero(learned & (kids > 0) & (counts < SCAFFOLD_SHARE * kids)).tolist()
        result.update(dead=dead, rare=rare, scaffold=scaffold)
    else:
        counts = None
    lens = np.array([len(b) for b in toks], np.int64)
    order = np.lexsort((np.arange(lens.size), -lens))[:LONGEST]
    result["longest"] = [[int(i), int(lens[i])] for i in order if lens[i] > 0]
    result["repeated"] = [i for i, b in enumerate(toks) if len(b) >= 3 and is_repeated(b)]
    result["punctuation"] = [i for i, b in enumerate(toks) if len(b) >= 2 and is_punctuation(b)]
    lists = ("unreachable", "dead", "rare", "scaffold", "repeated", "punctuation")
    result["counts"] = {k: len(result[k]) for k in lists if k in result}
    result["examples"] = {k: _examples(model, result[k], counts) for k in lists if k in result}
    result["examples"]["longest"] = _examples(model, [i for i, _ in result["longest"]], counts)
    return result


def stochastok_section(model, *, p: float = 0.1, seed: int = 0) -> dict:
    """The split table's size and the length increase StochasTok at ``p`` causes on the
    eval corpus (one iteration, fixed seed)."""
    from dwstok.stochastok import StochasTok

    st = StochasTok.from_tokenizer(model.tok, p=p)
    start = st.table.start
    per = np.diff(start)
    row = {"p": p, "splits": int(per.sum()), "splittable_tokens": int((per > 0).sum())}
    if model.ids is not None and model.ids.size:
        out = st(model.ids, seed=seed)
        row["tokens"] = int(model.ids.size)
        row["tokens_after"] = int(out.size)
        row["increase"] = out.size / model.ids.size - 1.0
    return row
