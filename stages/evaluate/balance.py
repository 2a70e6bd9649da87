"""Balance: each group's pair-count weight at the model's α, from its build's count stats.

A group's weight is ``w_g = (q_g^α / Σ q^α) / q_g`` (``dwstok.training.lang_weights``), so the
smaller its share q_g the larger its weight: a group of one document can weigh ×20 and
its few pieces then steer merges. Such groups are flagged.

>>> t = balance_table({"en": 9_000_000, "fr": 990_000, "th": 10_000}, {"en": 900, "fr": 99, "th": 1}, 0.7)
>>> [(r["group"], r["flag"]) for r in t["groups"]]
[('en', None), ('fr', None), ('th', 'extreme weight from 0.10% of the bytes, 1 doc')]
"""

from __future__ import annotations

from typing import Mapping

from dwstok.training import LANG_WEIGHT_SCALE, lang_weights

EXTREME_WEIGHT = 4.0  # at least this many times a plain count ...
SMALL_SHARE = 0.002  # ... from a group holding under 0.2% of the bytes


def balance_table(bytes_by_lang: Mapping[str, int], docs_by_lang: Mapping[str, int] | None, alpha: float) -> dict:
    weights = lang_weights(bytes_by_lang, alpha)
    total = sum(int(v) for v in bytes_by_lang.values()) or 1
    rows = []
    for g in sorted(bytes_by_lang, key=lambda g: (-int(bytes_by_lang[g]), g)):
        w = weights[g] / LANG_WEIGHT_SCALE
        share = int(bytes_by_lang[g]) / total
        docs = int(docs_by_lang[g]) if docs_by_lang and g in docs_by_lang else None
        flag = None
        if w >= EXTREME_WEIGHT and share < SMALL_SHARE:
            flag = f"extreme weight from {share:.2%} of the bytes" + (
                f", {docs:,} doc" + ("s" if docs != 1 else "") if docs is not None else ""
            )
        rows.append({"group": g, "bytes": int(bytes_by_lang[g]), "docs": docs, "share": share, "weight": w, "flag": flag})
    return {"alpha": float(alpha), "groups": rows}


def model_balance(model) -> dict | None:
    """The balance table of a model (``ModelSubject``): its workdir's count stats, else
    the byte counts its metadata records."""
    md = model.tok.metadata or {}
    alpha = (md.get("balance") or {}).get("alpha")
    if alpha is None:
        return None
    if model.stats:
        return balance_table(model.stats["bytes_by_lang"], model.stats.get("docs_by_lang"), alpha)
    by_lang = (md.get("trained_on") or {}).get("bytes_by_lang")
    return balance_table(by_lang, None, alpha) if by_lang else None
