"""Fairness on parallel text: the same text in many languages (``<lang>.txt`` files),
tokens per language relative to English, the worst-served languages, a Gini coefficient
over languages, and a flag on texts that are not in Unicode NFC (the Vietnamese UDHR is
decomposed; its NFC form is counted too, to show what that costs).

>>> gini([1.0, 1.0, 1.0]), round(gini([1.0, 3.0]), 3)
(0.0, 0.25)
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import numpy as np

from dwstok.errors import InputError

WORST = 5


def gini(values) -> float:
    """Gini coefficient: mean absolute difference over twice the mean (0 = all equal)."""
    x = np.asarray(values, np.float64)
    if x.size == 0 or x.mean() == 0:
        return 0.0
    return float(np.abs(x[:, None] - x[None, :]).mean() / (2 * x.mean()))


def read_parallel(folder: str | Path) -> dict[str, str]:
    """``{lang: text}`` from ``<lang>.txt`` files (UTF-8), sorted by language."""
    d = Path(folder)
    if not d.is_dir():
        raise InputError(f"--parallel {d}: not a folder")
    files = sorted(d.glob("*.txt"))
    if not files:
        subs = sorted(p.name for p in d.iterdir() if p.is_dir() and any(p.glob("*.txt")))
        hint = f"; pass one of its subfolders ({', '.join(subs)})" if subs else ""
        raise InputError(f"--parallel {d} holds no <lang>.txt files{hint}")
    out = {}
    for f in files:
        try:
            out[f.stem] = f.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{f}: not UTF-8 at byte {e.start}; parallel texts must be UTF-8") from None
    return out


def fairness_section(texts: dict[str, str], subjects, *, threads: int, pivot: str = "en") -> dict:
    langs = list(texts)
    nfc = {g: unicodedata.normalize("NFC", t) for g, t in texts.items()}
    not_nfc = [g for g in langs if nfc[g] != texts[g]]
    docs = [texts[g] for g in langs] + [nfc[g] for g in not_nfc]
    tokens: dict[str, dict[str, int]] = {g: {} for g in langs}
    nfc_tokens: dict[str, dict[str, int]] = {g: {} for g in not_nfc}
    for s in subjects:
        counts = s.doc_tokens(docs, threads=threads).tolist()
        for g, n in zip(langs, counts):
            tokens[g][s.name] = int(n)
        for g, n in zip(not_nfc, counts[len(langs) :]):
            nfc_tokens[g][s.name] = int(n)
    summary = {}
    if pivot in tokens:
        for s in subjects:
            base = tokens[pivot][s.name]
            rel = {g: tokens[g][s.name] / base for g in langs} if base else {}
            worst = sorted(rel, key=lambda g: (-rel[g], g))[:WORST]
            summary[s.name] = {"relative": rel, "worst": worst, "gini": gini(list(rel.values()))}
    return {
        "pivot": pivot if pivot in tokens else None,
        "tokens": tokens,
        "not_nfc": {
            g: {
                "tokens_nfc": nfc_tokens[g],
                "ratio": {n: (tokens[g][n] / v if v else None) for n, v in nfc_tokens[g].items()},
            }
            for g in not_nfc
        },
        "tokenizers": summary,
    }
