"""A synthetic corpus whose unique-piece growth and piece frequencies follow the train split.

Fit (``fit``), from ``train.parquet`` pretokenized with dwstok's own scanner (the config's
pattern, o200k-rdigits for 32.3):

- Every piece gets a *shape class*: the categories of its first, second and last character
  (Unicode general category, with ``\\r``/``\\n`` and other white space apart), its length if
  it is a number, and whether it holds an apostrophe. Pieces of one class join their
  neighbours the same way under the pretokenizer, so a piece can be swapped for another of
  its class without the text splitting differently.
- The *skeleton* is the train split's sequence of classes, document by document, per
  language group. Generation walks it (cyclically) and draws each token's piece from its
  (group, class) population, so the mix of classes and document lengths stays the real one.
- A population: the *head*, every real piece seen at least twice, at its real frequency; and
  a power-law *tail* holding the mass of the real pieces seen once (the Good-Turing estimate
  of the chance of a new piece): tail rank ``j`` has ``P(J >= j) = (1 + j / r0)^(1 - a)``
  (a Lomax law continuing the head, ``r0`` the head's size). The first tail ranks are the
  real once-seen pieces; later ranks are *synthetic* pieces: a real once-seen piece of the
  class (so real lengths) with some letters, digits and punctuation replaced by characters
  of the same category, drawn from the group's own characters at their frequencies.
- ``a`` (one per group) is fitted so that the model's expected unique pieces match the
  group's real Heaps curve (unique pieces in prefixes of 1/32 ... all of the group's tokens),
  by least squares in log space (golden-section search).

Generation (``generate``) is deterministic in (model, seed, size): chunk ``k`` draws from
``default_rng([seed, k])``, and a synthetic piece's string depends only on its (population,
rank), so a rank drawn twice is the same piece. Each chunk (one Parquet row group, columns
``text``, ``lang``) holds every group at its real byte share. Numba kernels do the draws,
the synthetic strings and the byte gather.

``measure`` streams a Parquet file row group by row group, pretokenizes it with the same
scanner, and reports unique pieces after each row group (the Heaps curve).
"""

from __future__ import annotations

import argparse
import json
import math
import time
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dwstok._jit import njit
from dwstok.scanner import get_scanner, scan_range

PATTERN = "o200k-rdigits"
HEAD_MIN = 2  # pieces seen at least this often form the head
P_MUTATE = 0.3  # chance that a mutable character of a synthetic piece is replaced
MUTABLE_PREFIXES = ("L", "M", "N", "P", "S")
KEEP_CHARS = set("'/")  # the pattern treats these specially: never replaced, never drawn
PREFIX_FRACTIONS = [1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0]


# ---------------------------------------------------------------- scanning


@njit
def _scan_docs(kind, buf, starts, table, out):
    n = 0
    for d in range(starts.shape[0] - 1):
        n += scan_range(kind, buf, starts[d], starts[d + 1], table, out[n:])
    return n


def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, int64 offsets) of a string/binary array, offsets starting at 0."""
    arr = pc.cast(arr, pa.large_binary()) if not pa.types.is_large_binary(arr.type) else arr
    arr = pa.concat_arrays([arr]) if arr.offset else arr
    offs = np.frombuffer(arr.buffers()[1], np.int64)[: len(arr) + 1]
    buf = np.frombuffer(arr.buffers()[2], np.uint8) if arr.buffers()[2] is not None else np.zeros(0, np.uint8)
    return buf[offs[0] : offs[-1]], offs - offs[0]


def scan(texts: pa.Array, pattern: str = PATTERN) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(text bytes, piece boundaries, first piece of each document) for a string array."""
    s = get_scanner(pattern)
    buf, offs = _binary_parts(texts)
    out = np.empty(len(buf) + len(offs), np.int64)
    n = _scan_docs(s.kind, buf, offs, s.table, out)
    bounds = out[: n + 1].copy()
    doc_first = np.searchsorted(bounds, offs)  # every document start is a boundary
    return buf, bounds, doc_first


def pieces_array(buf: np.ndarray, bounds: np.ndarray) -> pa.Array:
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(bounds) - 1, [None, pa.py_buffer(bounds), pa.py_buffer(buf)])


# ---------------------------------------------------------------- classes


def char_cat(ch: str) -> str:
    if ch in "\r\n":
        return "NL"
    if ch.isspace():
        return "WS"
    return unicodedata.category(ch)


def shape(piece: str) -> str:
    first, last = char_cat(piece[0]), char_cat(piece[-1])
    second = char_cat(piece[1]) if len(piece) > 1 else "-"
    digits = str(len(piece)) if first.startswith("N") else ""
    return f"{first}.{second}.{last}.{digits}.{int(chr(39) in piece)}"


def _mutable(ch: str) -> bool:
    return ch not in KEEP_CHARS and char_cat(ch)[0] in MUTABLE_PREFIXES


# ---------------------------------------------------------------- the tail law


def _tail_grid(r0: np.ndarray, a: float) -> tuple[np.ndarray, np.ndarray]:
    """Per population: (ranks per bin, probability per rank in bin) of the Lomax tail."""
    x = np.concatenate([[1.0], np.geomspace(1 + 1e-7, 1e22, 600)])
    f = x ** (1 - a)
    mass = f[:-1] - f[1:]  # P(bin)
    width = r0[:, None] * np.diff(x)[None, :]
    return width, mass[None, :] / width


def expected_tail_uniques(m: np.ndarray, r0: np.ndarray, a: float) -> np.ndarray:
    """Expected distinct tail ranks after m[p, k] draws from population p's tail."""
    width, q = _tail_grid(r0, a)
    return np.einsum("pb,pkb->pk", width, -np.expm1(-m[:, :, None] * q[:, None, :]))


def _golden(f, lo: float, hi: float, iters: int = 40) -> float:
    g = (math.sqrt(5) - 1) / 2
    c, d = hi - g * (hi - lo), lo + g * (hi - lo)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc < fd:
            hi, d, fd = d, c, fc
            c = hi - g * (hi - lo)
            fc = f(c)
        else:
            lo, c, fc = c, d, fd
            d = lo + g * (hi - lo)
            fd = f(d)
    return (lo + hi) / 2


def loglog_fit(x, y) -> tuple[float, float]:
    """(exponent, coefficient) of y = coefficient * x^exponent, least squares in log space."""
    b, la = np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)
    return float(b), float(math.exp(la))


def zipf_fit(counts: np.ndarray, lo_rank: int = 10, min_count: int = 5) -> dict:
    """Zipf exponent s of count ~ rank^-s over ranks lo_rank .. the last piece seen min_count times."""
    c = np.sort(np.asarray(counts, np.int64))[::-1]
    hi = int(np.searchsorted(-c, -min_count, side="right"))
    r = np.unique(np.geomspace(lo_rank, max(hi, lo_rank + 2), 200).astype(np.int64))
    r = r[r <= len(c)]
    s, _ = loglog_fit(r, c[r - 1])
    n = len(c)
    return {"zipf_s": -s, "ranks": [int(lo_rank), hi], "unique": n, "once": float((c == 1).sum() / n),
            "kept_min_count_2": float((c >= 2).sum() / n), "tokens": int(c.sum())}


# ---------------------------------------------------------------- fit


def fit(train: Path, out: Path, pattern: str = PATTERN, min_tokens: int = 50_000) -> dict:
    """Fit the model to ``train`` (Parquet, text + lang) and save it as ``out`` (.npz + .json)."""
    t0 = time.perf_counter()
    table = pq.read_table(train, columns=["text", "lang"])
    texts = table.column("text").combine_chunks()
    langs_doc = table.column("lang").to_pylist()
    buf, bounds, doc_first = scan(texts, pattern)
    n_tok = len(bounds) - 1
    enc = pc.dictionary_encode(pieces_array(buf, bounds))
    ids = enc.indices.to_numpy().astype(np.int32)
    dictionary = enc.dictionary
    n_pieces = len(dictionary)
    groups = sorted(set(langs_doc))
    g_of_doc = np.array([groups.index(x) for x in langs_doc], np.int32)
    doc_ntok = np.diff(doc_first)
    g_of_tok = np.repeat(g_of_doc, doc_ntok)
    doc_bytes = np.diff(_binary_parts(texts)[1])

    # Heaps curve of the whole split, at every 1/64 of its documents (file order).
    first_sorted = np.sort(np.unique(ids, return_index=True)[1])
    cut_docs = np.unique(np.linspace(0, len(doc_ntok), 65).astype(np.int64))[1:]
    heaps_real = [{"bytes": int(doc_bytes[:d].sum()), "unique": int(np.searchsorted(first_sorted, doc_first[d]))}
                  for d in cut_docs]

    # Classes and characters of every unique piece.
    dict_buf, dict_off = _binary_parts(dictionary)
    strs = [dict_buf[dict_off[i] : dict_off[i + 1]].tobytes().decode("utf-8") for i in range(n_pieces)]
    shapes = [shape(s) for s in strs]
    shape_names = sorted(set(shapes))
    lut = {n: i for i, n in enumerate(shape_names)}
    cls = np.fromiter((lut[x] for x in shapes), np.int32, n_pieces)
    cps_all = np.frombuffer("".join(strs).encode("utf-32-le"), np.uint32)
    nchar = np.fromiter((len(s) for s in strs), np.int64, n_pieces)
    cp_off = np.concatenate([[0], np.cumsum(nchar)])
    has_apos = np.fromiter((chr(39) in s for s in strs), bool, n_pieces)
    uniq_cp, cp_inv = np.unique(cps_all, return_inverse=True)
    cats = [char_cat(chr(c)) for c in uniq_cp]
    mut_names = sorted({c for c, cp in zip(cats, uniq_cp) if _mutable(chr(cp))})
    cat_of_uniq = np.array([mut_names.index(c) if _mutable(chr(cp)) else -1 for c, cp in zip(cats, uniq_cp)], np.int16)
    char_cat_idx = cat_of_uniq[cp_inv]  # per dictionary character: mutable category or -1
    mut_cs = np.concatenate([[0], np.cumsum(char_cat_idx >= 0)])
    n_mut = mut_cs[cp_off[1:]] - mut_cs[cp_off[:-1]]

    # Populations: one per (group, class) present.
    pop_key = g_of_tok.astype(np.int64) * len(shape_names) + cls[ids]
    pkeys, pop_of_tok = np.unique(pop_key, return_inverse=True)
    n_pop = len(pkeys)
    pop_group = (pkeys // len(shape_names)).astype(np.int32)
    # counts per (population, piece)
    pp = pop_of_tok.astype(np.int64) * n_pieces + ids
    pp_keys, pp_counts = np.unique(pp, return_counts=True)
    pp_pop = pp_keys // n_pieces
    pp_piece = (pp_keys % n_pieces).astype(np.int32)
    # order within a population: count descending, then a fixed hash of the piece id
    tie = (pp_piece.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(11)
    order = np.lexsort((tie, -pp_counts, pp_pop))
    pp_pop, pp_piece, pp_counts = pp_pop[order], pp_piece[order], pp_counts[order]
    pop_tokens = np.bincount(pp_pop, weights=pp_counts, minlength=n_pop)
    is_head = pp_counts >= HEAD_MIN
    head_pop, head_ids, head_cnt = pp_pop[is_head], pp_piece[is_head], pp_counts[is_head]
    head_start = np.searchsorted(head_pop, np.arange(n_pop))
    head_end = np.searchsorted(head_pop, np.arange(n_pop), side="right")
    head_cum = np.cumsum(head_cnt / pop_tokens[head_pop])
    head_cum -= np.concatenate([[0.0], head_cum])[head_start[head_pop]]  # cumulative within pop
    rt_pop, rt_ids, rt_cnt = pp_pop[~is_head], pp_piece[~is_head], pp_counts[~is_head]
    rt_start = np.searchsorted(rt_pop, np.arange(n_pop))
    rt_end = np.searchsorted(rt_pop, np.arange(n_pop), side="right")
    tau = np.bincount(rt_pop, weights=rt_cnt, minlength=n_pop) / pop_tokens
    r0 = np.maximum(head_end - head_start, 1).astype(np.float64)
    tpl_ok = (n_mut[rt_ids] > 0) & ~has_apos[rt_ids]
    tpl_pop, tpl_ids = rt_pop[tpl_ok], rt_ids[tpl_ok]
    tpl_start = np.searchsorted(tpl_pop, np.arange(n_pop))
    tpl_end = np.searchsorted(tpl_pop, np.arange(n_pop), side="right")

    # Character inventories per (group, mutable category), weighted by occurrences.
    inv_cps, inv_cum, inv_start, inv_end = [], [], [], []
    pos = 0
    grp_piece_counts = [np.bincount(ids[g_of_tok == g], minlength=n_pieces) for g in range(len(groups))]
    char_piece = np.repeat(np.arange(n_pieces), nchar)
    mut_chars = np.flatnonzero(char_cat_idx >= 0)
    mut_piece, mut_cat, mut_cp = char_piece[mut_chars], char_cat_idx[mut_chars].astype(np.int64), cps_all[mut_chars]
    for g in range(len(groups)):
        w = grp_piece_counts[g][mut_piece]
        live = w > 0
        ck, inv = np.unique(mut_cat[live] << 32 | mut_cp[live].astype(np.int64), return_inverse=True)
        ww = np.bincount(inv, weights=w[live], minlength=len(ck))
        ck_cat = ck >> 32
        for k in range(len(mut_names)):
            lo, hi = np.searchsorted(ck_cat, [k, k + 1])
            inv_start.append(pos)
            inv_cps.append(ck[lo:hi] & 0xFFFFFFFF)
            inv_cum.append(np.cumsum(ww[lo:hi]) / max(ww[lo:hi].sum(), 1.0))
            pos += hi - lo
            inv_end.append(pos)

    heaps_groups = {}
    for g in range(len(groups)):
        tok_g = np.flatnonzero(g_of_tok == g)
        ns = np.unique(np.maximum((np.array(PREFIX_FRACTIONS) * len(tok_g)).astype(np.int64), 1))
        fs = np.sort(np.unique(ids[tok_g], return_index=True)[1])
        heaps_groups[groups[g]] = {"tokens": len(tok_g), "prefix_tokens": ns.tolist(),
                                   "unique": np.searchsorted(fs, ns).tolist()}
    a_group = np.full(len(groups), np.nan)
    byte_share = np.bincount(g_of_doc, weights=doc_bytes, minlength=len(groups)) / doc_bytes.sum()
    pop_of_tok = pop_of_tok.astype(np.int32)
    # skeleton per group: its tokens' populations, document by document
    order_tok = np.argsort(g_of_tok, kind="stable")
    skel = pop_of_tok[order_tok]
    skel_group_start = np.searchsorted(g_of_tok[order_tok], np.arange(len(groups) + 1))
    order_doc = np.argsort(g_of_doc, kind="stable")
    skel_doc_ntok = doc_ntok[order_doc]
    skel_doc_bytes = doc_bytes[order_doc]
    skel_doc_group_start = np.searchsorted(g_of_doc[order_doc], np.arange(len(groups) + 1))

    np.savez(
        out.with_suffix(".npz"),
        dict_buf=dict_buf, dict_off=dict_off, cps=cps_all, cp_off=cp_off, char_cat=char_cat_idx.astype(np.int16),
        pop_group=pop_group, head_start=head_start, head_end=head_end, head_ids=head_ids, head_cum=head_cum,
        tau=tau, r0=r0, rt_start=rt_start, rt_end=rt_end, rt_ids=rt_ids,
        tpl_start=tpl_start, tpl_end=tpl_end, tpl_ids=tpl_ids,
        inv_cps=np.concatenate(inv_cps).astype(np.uint32), inv_cum=np.concatenate(inv_cum),
        inv_start=np.array(inv_start), inv_end=np.array(inv_end),
        a_group=a_group, byte_share=byte_share,
        skel=skel, skel_group_start=skel_group_start, skel_doc_ntok=skel_doc_ntok,
        skel_doc_bytes=skel_doc_bytes, skel_doc_group_start=skel_doc_group_start,
    )
    beta, k = loglog_fit([p["bytes"] for p in heaps_real[len(heaps_real) // 8 :]],
                         [p["unique"] for p in heaps_real[len(heaps_real) // 8 :]])
    zipf_groups = {}
    for g in range(len(groups)):
        c = grp_piece_counts[g]
        c = c[c > 0]
        if c.sum() >= 1_000_000:
            zipf_groups[groups[g]] = zipf_fit(c)
    summary = {
        "train": str(train), "pattern": pattern, "docs": len(doc_ntok), "bytes": int(doc_bytes.sum()),
        "tokens": int(n_tok), "unique_pieces": int(n_pieces), "groups": groups,
        "byte_share": dict(zip(groups, byte_share.round(8).tolist())),
        "shape_classes": len(shape_names), "populations": int(n_pop), "head_min": HEAD_MIN, "p_mutate": P_MUTATE,
        "heaps_real": heaps_real, "heaps_fit": {"beta": beta, "k": k, "over": "prefixes from 1/8 of the documents on"},
        "heaps_groups": heaps_groups,
        "zipf_real": zipf_fit(np.bincount(ids, minlength=n_pieces)), "zipf_real_groups": zipf_groups,
        "fit_seconds": round(time.perf_counter() - t0, 1),
    }
    out.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    return calibrate(out, min_tokens=min_tokens)


MULTIPLES = [1.0, 2.5, 5.0, 10.0, 25.0]


def _lomax_pmf(j: np.ndarray, r0: np.ndarray, a: np.ndarray) -> np.ndarray:
    return (1 + j / r0) ** (1 - a) - (1 + (j + 1) / r0) ** (1 - a)


def expected_overlap(z: dict, tau: np.ndarray, keep: np.ndarray, a_pop: np.ndarray, head_pop, head_p,
                     pop_tokens, group_tokens, mults) -> np.ndarray:
    """Expected (sum over groups of unique pieces) - (unique pieces of the union), at each
    multiple of the real size: only real pieces (head and once-seen) can be in two groups."""
    share = pop_tokens / group_tokens[z["pop_group"]]
    rt_pop = np.repeat(np.arange(len(tau)), z["rt_end"] - z["rt_start"])
    j = np.arange(len(rt_pop)) - z["rt_start"][rt_pop]
    q = np.concatenate([share[head_pop] * head_p * keep[head_pop],
                        share[rt_pop] * tau[rt_pop] * _lomax_pmf(j, z["r0"][rt_pop], a_pop[rt_pop])])
    pop = np.concatenate([head_pop, rt_pop])
    piece = np.concatenate([z["head_ids"], z["rt_ids"]])
    n_pieces = len(z["dict_off"]) - 1
    out = []
    for mlt in mults:
        log_miss = -(group_tokens[z["pop_group"][pop]] * mlt) * q  # log P(piece not drawn in that group)
        seen_sum = -np.expm1(log_miss).sum()
        seen_union = -np.expm1(np.bincount(piece, weights=log_miss, minlength=n_pieces)).sum()
        out.append(seen_sum - seen_union)
    return np.array(out)


def calibrate(path: Path, rounds: int = 2, min_tokens: int = 50_000) -> dict:
    """Fit each group's tail (scale s of the once-seen mass, Lomax exponent a) so that the
    model's expected unique pieces follow a target from 1x to 25x the real size.

    The target keeps each group's own Heaps growth, U_g (n / N)^beta_g (beta_g: the group's
    log-log slope over its prefixes from 1/8 on), scaled at each size by one factor so that the
    union over groups follows the whole split's Heaps fit: the groups' sum minus the expected
    overlap (pieces in several groups; computed from the model, so two rounds). Groups with
    fewer than ``min_tokens`` tokens keep their once-seen mass and take the mean exponent."""
    z = dict(np.load(path.with_suffix(".npz")))
    summary = json.loads(path.with_suffix(".json").read_text())
    groups = summary["groups"]
    tau0 = z.get("tau0", z["tau"])
    cum0 = z.get("head_cum0", z["head_cum"])
    n_pop = len(tau0)
    pop_tokens = np.bincount(z["skel"], minlength=n_pop).astype(np.float64)
    group_tokens = np.array([summary["heaps_groups"][g]["tokens"] for g in groups], np.float64)
    head_pop = np.repeat(np.arange(n_pop), z["head_end"] - z["head_start"])
    prev = np.concatenate([[0.0], cum0])[:-1]
    prev[z["head_start"][z["head_end"] > z["head_start"]]] = 0.0
    head_p = cum0 - prev  # per head piece: probability within its population (sums to 1 - tau0)
    mults = np.array(MULTIPLES)
    hf = summary["heaps_fit"]
    union_target = hf["k"] * (summary["bytes"] * mults) ** hf["beta"]
    big = [g for g, n in enumerate(groups) if group_tokens[g] >= min_tokens]
    beta_g = {g: loglog_fit(summary["heaps_groups"][groups[g]]["prefix_tokens"][2:],
                            summary["heaps_groups"][groups[g]]["unique"][2:])[0] for g in big}
    own = {g: summary["heaps_groups"][groups[g]]["unique"][-1] * mults ** beta_g[g] for g in big}
    a_group, s_group = np.full(len(groups), 1.6), np.ones(len(groups))
    overlap = np.zeros(len(mults))
    fits, history = {}, []
    for _ in range(rounds):
        small = 0.0  # groups too small to fit, at their own real size (they grow little)
        lam = (union_target + overlap - small) / sum(own.values())
        for g in big:
            name = groups[g]
            ng = group_tokens[g]
            ns = ng * mults
            target = own[g] * lam
            pops = np.flatnonzero(z["pop_group"] == g)
            share = pop_tokens[pops] / ng
            hsel = np.isin(head_pop, pops)
            hp, hpop = head_p[hsel], np.searchsorted(pops, head_pop[hsel])
            r0 = z["r0"][pops]

            def model(scale, a, pops=pops, share=share, hp=hp, hpop=hpop, r0=r0, ns=ns):
                t = np.minimum(tau0[pops] * scale, 0.999)
                keep = (1 - t) / np.maximum(1 - tau0[pops], 1e-12)
                e = (-np.expm1(-np.outer(hp * keep[hpop] * share[hpop], ns))).sum(axis=0)
                live = t > 0
                m = (share * t)[live, None] * ns[None, :]
                return e + expected_tail_uniques(m, r0[live], a).sum(axis=0)

            best = None
            for scale in np.geomspace(0.25, 4.0, 17):
                def loss(a, scale=scale, target=target, model=model):
                    return float(((np.log(model(scale, a)) - np.log(target)) ** 2).sum())
                a = _golden(loss, 1.02, 4.0, iters=25)
                cand = (loss(a), scale, a)
                best = cand if best is None or cand[0] < best[0] else best
            _, s_group[g], a_group[g] = best
            fits[name] = {"beta": round(beta_g[g], 4), "tail_scale": round(float(s_group[g]), 4),
                          "a": round(float(a_group[g]), 4), "target": target.round().astype(int).tolist(),
                          "model": model(s_group[g], a_group[g]).round().astype(int).tolist()}
        w = group_tokens[big]
        a_other = float(np.average(a_group[big], weights=w)) if big else 1.6
        for g in range(len(groups)):
            if g not in big:
                a_group[g] = a_other
        t = np.minimum(tau0 * s_group[z["pop_group"]], 0.999)
        keep = (1 - t) / np.maximum(1 - tau0, 1e-12)
        overlap = expected_overlap(z, t, keep, a_group[z["pop_group"]], head_pop, head_p, pop_tokens, group_tokens, mults)
        history.append({"scale_factor": lam.round(4).tolist(), "overlap": overlap.round().astype(int).tolist()})
    # apply: tail mass scaled, head probabilities down in proportion, cumulative within population
    cum = np.cumsum(head_p * keep[head_pop])
    starts = z["head_start"][z["head_end"] > z["head_start"]]
    offs = np.concatenate([[0.0], cum])[:-1]
    base = np.zeros_like(cum)
    base[starts] = offs[starts]
    cum = cum - np.maximum.accumulate(base)
    z.update(tau0=tau0, head_cum0=cum0, tau=t, head_cum=cum, a_group=a_group)
    np.savez(path.with_suffix(".npz"), **z)
    model_union = np.array([sum(fits[groups[g]]["model"][i] for g in big) for i in range(len(mults))]) - overlap
    summary["calibration"] = {"multiples": MULTIPLES, "groups": fits, "a_other_groups": a_other, "rounds": history,
                              "union_target": union_target.round().astype(int).tolist(),
                              "union_model": model_union.round().astype(int).tolist()}
    path.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


# ---------------------------------------------------------------- generation kernels


@njit
def _mix(x):
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit
def _draw(pops, u, head_start, head_end, head_cum, head_ids, tau, r0, inv_am1, rt_start, rt_end, rt_ids,
          tpl_start, tpl_end, out_piece, out_key):
    """Per token: a real piece id (out_piece >= 0) or a synthetic key (out_piece == -1)."""
    for i in range(pops.shape[0]):
        p = pops[i]
        x = u[i]
        h = 1.0 - tau[p]
        if (x < h or tau[p] <= 0.0) and head_end[p] > head_start[p]:
            lo = head_start[p]
            hi = head_end[p]
            j = lo + np.searchsorted(head_cum[lo:hi], x, side="right")
            if j >= hi:
                j = hi - 1
            out_piece[i] = head_ids[j]
            continue
        v = 1.0 - (x - h) / tau[p]
        if v < 1e-300:
            v = 1e-300
        rank = r0[p] * (v ** (-inv_am1[p]) - 1.0)
        if rank > 9.0e18:
            rank = 9.0e18
        j = np.int64(rank)
        nrt = rt_end[p] - rt_start[p]
        if j < nrt:
            out_piece[i] = rt_ids[rt_start[p] + j]
        elif tpl_end[p] == tpl_start[p]:
            out_piece[i] = rt_ids[rt_start[p] + j % nrt]
        else:
            out_piece[i] = -1
            out_key[i] = _mix(np.uint64(p) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(j))


@njit
def _utf8_len(c):
    if c < 0x80:
        return 1
    if c < 0x800:
        return 2
    if c < 0x10000:
        return 3
    return 4


@njit
def _synth(keys, key_pop, pop_group, tpl_start, tpl_end, tpl_ids, cps, cp_off, char_cat, n_cat,
           inv_cps, inv_cum, inv_start, inv_end, p_mut, out_off):
    """UTF-8 bytes of each synthetic piece: its template with characters replaced."""
    n = keys.shape[0]
    chosen = np.empty(n, np.int64)
    total = 0
    for i in range(n):
        p = key_pop[i]
        t = tpl_ids[tpl_start[p] + np.int64(keys[i] % np.uint64(tpl_end[p] - tpl_start[p]))]
        chosen[i] = t
        total += 4 * (cp_off[t + 1] - cp_off[t])
    buf = np.empty(total, np.uint8)
    pos = 0
    for i in range(n):
        t = chosen[i]
        g = pop_group[key_pop[i]]
        a, b = cp_off[t], cp_off[t + 1]
        n_m = 0
        for c in range(a, b):
            if char_cat[c] >= 0:
                n_m += 1
        h = _mix(keys[i] ^ np.uint64(0xD1B54A32D192ED03))
        forced = np.int64(h % np.uint64(n_m))
        out_off[i] = pos
        k = 0
        for c in range(a, b):
            cp = cps[c]
            cat = char_cat[c]
            if cat >= 0:
                h = _mix(h + np.uint64(c - a + 1))
                if k == forced or (h >> np.uint64(11)) * (1.0 / 9007199254740992.0) < p_mut:
                    seg = g * n_cat + cat
                    lo, hi = inv_start[seg], inv_end[seg]
                    if hi > lo:
                        h2 = _mix(h ^ np.uint64(0xA0761D6478BD642F))
                        r = (h2 >> np.uint64(11)) * (1.0 / 9007199254740992.0)
                        j = lo + np.searchsorted(inv_cum[lo:hi], r, side="right")
                        if j >= hi:
                            j = hi - 1
                        cp = inv_cps[j]
                k += 1
            ln = _utf8_len(cp)
            if ln == 1:
                buf[pos] = cp
            elif ln == 2:
                buf[pos] = 0xC0 | (cp >> 6)
                buf[pos + 1] = 0x80 | (cp & 0x3F)
            elif ln == 3:
                buf[pos] = 0xE0 | (cp >> 12)
                buf[pos + 1] = 0x80 | ((cp >> 6) & 0x3F)
                buf[pos + 2] = 0x80 | (cp & 0x3F)
            else:
                buf[pos] = 0xF0 | (cp >> 18)
                buf[pos + 1] = 0x80 | ((cp >> 12) & 0x3F)
                buf[pos + 2] = 0x80 | ((cp >> 6) & 0x3F)
                buf[pos + 3] = 0x80 | (cp & 0x3F)
            pos += ln
    out_off[n] = pos
    return buf[:pos]


@njit
def _gather(piece, syn_idx, dict_buf, dict_off, syn_buf, syn_off, tok_len_out):
    """Concatenate the tokens' bytes; tok_len_out[i] = bytes of token i."""
    total = 0
    for i in range(piece.shape[0]):
        p = piece[i]
        if p >= 0:
            ln = dict_off[p + 1] - dict_off[p]
        else:
            ln = syn_off[syn_idx[i] + 1] - syn_off[syn_idx[i]]
        tok_len_out[i] = ln
        total += ln
    out = np.empty(total, np.uint8)
    pos = 0
    for i in range(piece.shape[0]):
        p = piece[i]
        if p >= 0:
            a = dict_off[p]
            src = dict_buf
        else:
            a = syn_off[syn_idx[i]]
            src = syn_buf
        for k in range(tok_len_out[i]):
            out[pos + k] = src[a + k]
        pos += tok_len_out[i]
    return out


# ---------------------------------------------------------------- generate


class Model:
    def __init__(self, path: Path):
        z = np.load(path.with_suffix(".npz"))
        self.__dict__.update({k: z[k] for k in z.files})
        self.summary = json.loads(path.with_suffix(".json").read_text())
        self.groups = self.summary["groups"]
        self.n_cat = len(self.inv_start) // len(self.groups)
        a = self.a_group[self.pop_group]
        self.inv_am1 = 1.0 / (a - 1.0)


def generate(model_path: Path, size: int, out: Path, seed: int = 0, chunk: int = 32 << 20) -> dict:
    """Write ``size`` bytes (of text) of synthetic corpus to ``out`` (Parquet: text, lang)."""
    m = Model(model_path)
    t0 = time.perf_counter()
    ng = len(m.groups)
    doc_cursor = np.zeros(ng, np.int64)
    emitted = np.zeros(ng, np.float64)
    tmp = out.with_name(out.name + ".tmp")
    schema = pa.schema([("text", pa.string()), ("lang", pa.string())])
    writer = pq.ParquetWriter(tmp, schema, compression="zstd")
    langs = np.array(m.groups, dtype=object)
    total, k, docs, syn_total, tokens = 0, 0, 0, 0, 0
    doc_tok0 = np.concatenate([[0], np.cumsum(m.skel_doc_ntok)])
    while total < size:
        goal = min((k + 1) * chunk, size)
        sel_g, sel_d = [], []
        for g in range(ng):
            d0, d1 = m.skel_doc_group_start[g], m.skel_doc_group_start[g + 1]
            nd = d1 - d0
            target = m.byte_share[g] * goal
            exp = emitted[g]
            while nd and exp + 0.5 * m.skel_doc_bytes[d0 + doc_cursor[g] % nd] <= target:
                exp += m.skel_doc_bytes[d0 + doc_cursor[g] % nd]
                sel_g.append(g)
                sel_d.append(d0 + doc_cursor[g] % nd)
                doc_cursor[g] += 1
            emitted[g] = exp  # corrected below with the real bytes
        rng = np.random.default_rng([seed, k])
        perm = rng.permutation(len(sel_d))
        sel_g, sel_d = np.array(sel_g, np.int64)[perm], np.array(sel_d, np.int64)[perm]
        # token ranges of the chosen documents in the skeleton
        starts, lens = doc_tok0[sel_d], m.skel_doc_ntok[sel_d]
        off = np.concatenate([[0], np.cumsum(lens)])
        idx = np.repeat(starts - off[:-1], lens) + np.arange(off[-1])
        pops = m.skel[idx]
        u = rng.random(len(pops))
        piece = np.empty(len(pops), np.int32)
        key = np.zeros(len(pops), np.uint64)
        _draw(pops, u, m.head_start, m.head_end, m.head_cum, m.head_ids, m.tau, m.r0, m.inv_am1,
              m.rt_start, m.rt_end, m.rt_ids, m.tpl_start, m.tpl_end, piece, key)
        syn = piece < 0
        ukeys, first, inv = np.unique(key[syn], return_index=True, return_inverse=True)
        syn_idx = np.zeros(len(pops), np.int64)
        syn_idx[syn] = inv
        syn_off = np.empty(len(ukeys) + 1, np.int64)
        syn_buf = _synth(ukeys, pops[syn][first].astype(np.int64), m.pop_group, m.tpl_start, m.tpl_end, m.tpl_ids,
                         m.cps, m.cp_off, m.char_cat, m.n_cat, m.inv_cps, m.inv_cum, m.inv_start, m.inv_end,
                         P_MUTATE, syn_off)
        tok_len = np.empty(len(pops), np.int64)
        text = _gather(piece, syn_idx, m.dict_buf, m.dict_off, syn_buf, syn_off, tok_len)
        cs = np.concatenate([[0], np.cumsum(tok_len)])
        doc_bytes = cs[off[1:]] - cs[off[:-1]]
        # correct each group's running total with what was really written
        for g in range(ng):
            mask = sel_g == g
            if mask.any():
                emitted[g] += doc_bytes[mask].sum() - m.skel_doc_bytes[sel_d[mask]].sum()
        doc_off = np.concatenate([[0], np.cumsum(doc_bytes)]).astype(np.int64)
        arr = pa.LargeStringArray.from_buffers(len(doc_bytes), pa.py_buffer(doc_off), pa.py_buffer(text))
        writer.write_table(pa.table({"text": arr.cast(pa.string()), "lang": pa.array(langs[sel_g], pa.string())},
                                    schema=schema), row_group_size=len(doc_bytes) or 1)
        total += int(doc_off[-1])
        docs += len(doc_bytes)
        syn_total += int(syn.sum())
        tokens += len(pops)
        k += 1
    writer.close()
    tmp.rename(out)
    return {"path": str(out), "bytes": total, "docs": docs, "tokens": tokens, "row_groups": k,
            "synthetic_tokens": syn_total, "seed": seed, "seconds": round(time.perf_counter() - t0, 1),
            "file_bytes": out.stat().st_size}


# ---------------------------------------------------------------- measure


def measure(path: Path, pattern: str = PATTERN, max_bytes: int | None = None) -> list[dict]:
    """Unique pieces after each row group of ``path`` (streamed): the Heaps curve."""
    f = pq.ParquetFile(path)
    seen = None
    points, nbytes, ntok = [], 0, 0
    for i in range(f.metadata.num_row_groups):
        t = f.read_row_group(i, columns=["text"]).column("text").combine_chunks()
        buf, bounds, _ = scan(t, pattern)
        u = pc.unique(pieces_array(buf, bounds))
        if seen is None:
            seen = u
        else:
            new = pc.filter(u, pc.invert(pc.is_in(u, value_set=seen)))
            seen = pa.concat_arrays([seen, new])
        nbytes += len(buf)
        ntok += len(bounds) - 1
        points.append({"bytes": nbytes, "tokens": ntok, "unique": len(seen)})
        if max_bytes and nbytes >= max_bytes:
            break
    return points


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("fit")
    s.add_argument("train", type=Path)
    s.add_argument("out", type=Path)
    s = sub.add_parser("calibrate")
    s.add_argument("model", type=Path)
    s = sub.add_parser("generate")
    s.add_argument("model", type=Path)
    s.add_argument("size_gb", type=float)
    s.add_argument("out", type=Path)
    s.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("measure")
    s.add_argument("parquet", type=Path)
    args = ap.parse_args()
    if args.cmd == "fit":
        r = fit(args.train, args.out)
        r = {k: v for k, v in r.items() if k not in ("heaps_groups", "heaps_real")}
    elif args.cmd == "calibrate":
        r = calibrate(args.model)["calibration"]
    elif args.cmd == "generate":
        r = generate(args.model, int(args.size_gb * 1e9), args.out, seed=args.seed)
    else:
        r = measure(args.parquet)
    print(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
