"""The report as tables: rich on a terminal, plain aligned text otherwise (cron, CI, pipes).

``tables(report)`` builds plain data (title, header, rows, notes) that both renderers use,
so the two forms never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)


def _pct(x) -> str:
    return "" if x is None else f"{x:+.1%}"


def _f(x, fmt="{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def compression_tables(r: dict) -> list[Table]:
    names = r["tokenizers"]
    base = r.get("baseline")
    rows = []
    for g, row in [*r["groups"].items(), ("all", r["all"])]:
        cells = [g, f"{row['bytes'] / 1e6:.2f}", f"{row['docs']:,}"]
        for n in names:
            bpt = row["bytes_per_token"].get(n)
            ch = (row.get("change") or {}).get(n)
            cells.append(_f(bpt) + (f" ({_pct(ch)})" if ch is not None and n != base else ""))
        rows.append(cells)
    t1 = Table(
        f"Compression: bytes/token per group (change against {base}; higher is better)",
        ["group", "MB", "docs", *names],
        rows,
    )
    a = r["all"]
    rows2 = [
        ["tokens", *[f"{a['tokens'][n]:,}" for n in names]],
        ["tokens / 1k chars", *[_f(a["tokens_per_1k_chars"][n], "{:.1f}") for n in names]],
        ["mean tokens / doc", *[_f(a["mean_tokens_per_doc"][n], "{:,.0f}") for n in names]],
        ["p95 tokens / doc", *[_f(a["p95_tokens_per_doc"][n], "{:,.0f}") for n in names]],
    ]
    return [t1, Table("All documents", ["", *names], rows2)]


def balance_tables(r: dict) -> list[Table]:
    out = []
    models = [m for m in r["models"] if r["balance"].get(m)]
    if not models:
        return out
    groups = {}
    for m in models:
        for row in r["balance"][m]["groups"]:
            groups.setdefault(row["group"], {})[m] = row
    rows, notes = [], []
    for g, per in groups.items():
        any_row = next(iter(per.values()))
        rows.append([g, f"{any_row['share']:.2%}", f"{any_row['docs']:,}" if any_row["docs"] is not None else "-", *[f"×{per[m]['weight']:.2f}" if m in per else "-" for m in models]])
        flags = sorted({(m, per[m]["flag"]) for m in per if per[m]["flag"]})
        for m, f in flags:
            notes.append(f"{g} in {m}: {f}")
    alphas = ", ".join(f"{m} α={r['balance'][m]['alpha']}" for m in models)
    out.append(Table(f"Balance: pair-count weight per group ({alphas})", ["group", "share", "docs", *models], rows, notes))
    return out


def han_tables(r: dict) -> list[Table]:
    h = r["han"]
    rows = []
    for n, row in h["tokenizers"].items():
        rows.append([
            n,
            f"{row['single_token_chars']:,}",
            _f(row.get("share"), "{:.1%}"),
            _f(row.get("emitted"), "{:.1%}"),
            f"{row.get('forced_chars', '-')}",
            f"{row.get('forced_merges', '-')}",
        ])
    return [Table(
        f"Han: {h['occurrences']:,} occurrences of {h['distinct_chars']:,} characters in the corpus",
        ["tokenizer", "single-token chars", "occurrences covered", "emitted alone", "forced chars", "forced merges"],
        rows,
    )]


def digit_tables(r: dict) -> list[Table]:
    d = r["digits"]
    rows = []
    for n, row in d["tokenizers"].items():
        rows.append([
            n,
            *["|".join(row["examples"][x]).replace("\n", "\\n") for x in d["examples"]],
            f"{row['two_digit_tokens']}/100",
            f"{row['three_digit_tokens']}/1000",
            _f(row.get("aligned_share"), "{:.1%}"),
        ])
    return [Table("Digits: splits, single-token groups, digit tokens aligned to place value",
                  ["tokenizer", *d["examples"], "2-digit", "3-digit", "aligned"], rows)]


def fairness_tables(r: dict) -> list[Table]:
    p = r.get("fairness")
    if not p:
        return []
    names = r["tokenizers"]
    s = p["tokenizers"]
    rows = []
    for g in r["parallel"]:
        rows.append([g + (" (not NFC)" if g in p["not_nfc"] else ""), *[
            f"{s[n]['relative'][g]:.2f}" if n in s and s[n]["relative"] else str(r["parallel"][g][n]) for n in names]])
    if s:
        rows.append(["Gini", *[f"{s[n]['gini']:.3f}" for n in names]])
    notes = [f"worst served by {n}: {', '.join(s[n]['worst'])}" for n in names if n in s]
    for g, v in p["not_nfc"].items():
        notes.append(f"{g} is not NFC: it costs " + ", ".join(
            f"{n} ×{x:.2f}" for n, x in v["ratio"].items() if x is not None) + " the tokens of its NFC form")
    title = f"Fairness on {p.get('dir', 'parallel text')}: tokens relative to {p['pivot']}" if p["pivot"] else "Fairness: tokens per language"
    return [Table(title, ["language", *names], rows, notes)]


def audit_tables(r: dict) -> list[Table]:
    lists = ["unreachable", "dead", "rare", "scaffold", "repeated", "punctuation"]
    rows, notes = [], []
    for m, a in r["audit"].items():
        longest = a["longest"][0][1] if a["longest"] else 0
        rows.append([m, *[f"{a['counts'][k]:,}" if k in a["counts"] else "-" for k in lists], f"{longest:,}"])
        for k in ("longest", "unreachable", "repeated"):
            ex = a["examples"].get(k) or []
            if ex:
                shown = ", ".join(f"{e['id']} «{_short(e['text'])}» ({e['bytes']} B)" for e in ex[:3])
                notes.append(f"{m} {k}: {shown}")
    return [Table("Token audit (rare: emitted < 10 times on the corpus)", ["model", *lists, "longest (bytes)"], rows, notes)]


def _short(s: str, n: int = 24) -> str:
    return s if len(s) <= n else s[:n] + f"…(+{len(s) - n})"


def stochastok_tables(r: dict) -> list[Table]:
    rows = []
    for m, st in r["stochastok"].items():
        rows.append([m, f"{st['splits']:,}", f"{st['splittable_tokens']:,}", _pct(st.get("increase"))])
    return [Table("StochasTok (p = 0.1, one iteration, seed 0)", ["model", "splits", "splittable tokens", "length increase"], rows)]


def tables(r: dict) -> list[Table]:
    out: list[Table] = []
    if r["groups"]:
        out += compression_tables(r)
    out += balance_tables(r) + han_tables(r) + digit_tables(r) + fairness_tables(r)
    out += audit_tables(r) + stochastok_tables(r)
    return out


def render_plain(ts: list[Table]) -> str:
    lines = []
    for t in ts:
        widths = [max(len(str(row[i])) for row in [t.header, *t.rows]) for i in range(len(t.header))]
        lines.append(t.title)
        fmt = lambda row: "  ".join(  # noqa: E731
            (c.ljust(w) if i == 0 else c.rjust(w)) for i, (c, w) in enumerate(zip(row, widths))
        ).rstrip()
        lines.append(fmt(t.header))
        lines.append("  ".join("-" * w for w in widths))
        lines.extend(fmt(row) for row in t.rows)
        lines.extend(f"  {n}" for n in t.notes)
        lines.append("")
    return "\n".join(lines)


def render_rich(ts: list[Table], console) -> None:
    from rich.table import Table as RichTable

    for t in ts:
        rt = RichTable(title=t.title, title_justify="left", caption="\n".join(t.notes) or None, caption_justify="left")
        for i, h in enumerate(t.header):
            rt.add_column(h, justify="left" if i == 0 else "right", no_wrap=i > 0)
        for row in t.rows:
            rt.add_row(*row)
        console.print(rt)
