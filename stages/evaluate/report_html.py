"""``report.html``: one self-contained page (no network) with the report's charts.

Charts are static SVG drawn by matplotlib and inlined, so the page needs no JavaScript
and no fonts or scripts from anywhere; text stays text (``svg.fonttype = none``) and the
browser draws it with its own fonts, CJK included. matplotlib was chosen over a JS
library (Vega, Plotly) because an inlined SVG cannot fail to load or to run, and over
hand-built SVG because axes, ticks, legends and log scales are its daily work.
"""

from __future__ import annotations

import html
import io
from pathlib import Path

PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd"]
TINTS = ["#fde2e4", "#e2ece9", "#dfe7fd", "#fff1c1", "#e8dff5", "#d7f0d2", "#fbe0c3"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "svg.fonttype": "none",  # text as <text>: small, selectable, drawn with the browser's fonts
        "svg.hashsalt": "dwstok",  # stable ids, so the same report gives the same file
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "figure.dpi": 96,
    })
    return plt


def _svg(fig) -> str:
    plt = _plt()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _grouped_barh(labels, series: dict[str, list], *, title, xlabel, ref=None, log=False):
    plt = _plt()
    n = max(len(series), 1)
    h = 0.8 / n
    fig, ax = plt.subplots(figsize=(8, max(2.0, 0.1 * len(labels) * n + 1.2)))
    for k, (name, vals) in enumerate(series.items()):
        ys = [i + (k - (n - 1) / 2) * h for i in range(len(labels))]
        ax.barh(ys, [v if v is not None else 0 for v in vals], height=h, label=name, color=PALETTE[k % len(PALETTE)])
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)  # first label on top, no empty band
    if ref is not None:
        ax.axvline(ref, color="#333", linewidth=0.8)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_title(title, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return _svg(fig)


def chart_id_space(r) -> str:
    plt = _plt()
    parts = ["specials", "bytes", "forced_merges", "learned_merges"]
    names = list(r["id_space"])
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(names) + 1.2))
    for i, m in enumerate(names):
        left = 0
        for k, p in enumerate(parts):
            w = r["id_space"][m][p]
            ax.barh(i, w, left=left, color=PALETTE[k], label=p.replace("_", " ") if i == 0 else None)
            left += w
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel("token id")
    ax.set_title("The id space to scale", loc="left")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=4, frameon=False)
    return _svg(fig)


def chart_bpt(r) -> str:
    groups = [*r["groups"], "all"]
    rows = [*r["groups"].values(), r["all"]]
    series = {n: [row["bytes_per_token"][n] for row in rows] for n in r["tokenizers"]}
    return _grouped_barh(groups, series, title="Bytes per token by group (higher is better)", xlabel="bytes / token")


def chart_change(r) -> str:
    base = r["baseline"]
    groups = [*r["groups"], "all"]
    rows = [*r["groups"].values(), r["all"]]
    series = {n: [100 * ((row.get("change") or {}).get(n) or 0) for row in rows] for n in r["tokenizers"] if n != base}
    return _grouped_barh(groups, series, title=f"Change in bytes/token against {base} (%)", xlabel="%", ref=0)


def chart_weights(r) -> str:
    models = [m for m in r["models"] if r["balance"].get(m)]
    groups = [row["group"] for row in r["balance"][models[0]]["groups"]]
    series = {}
    for m in models:
        w = {row["group"]: row["weight"] for row in r["balance"][m]["groups"]}
        series[f"{m} (α={r['balance'][m]['alpha']})"] = [max(w.get(g, 0), 1e-3) for g in groups]
    return _grouped_barh(groups, series, title="Pair-count weight per group (log scale; 1 = plain count)",
                         xlabel="weight", ref=1, log=True)


def chart_parallel(r) -> str:
    p = r["fairness"]
    langs = list(r["parallel"])
    s = p["tokenizers"]
    series = {n: [s[n]["relative"][g] for g in langs] for n in r["tokenizers"] if n in s}
    return _grouped_barh(langs, series, title=f"Tokens relative to {p['pivot']} on the same text", xlabel="× English", ref=1)


def chart_han(r) -> str:
    plt = _plt()
    h = r["han"]["tokenizers"]
    names = list(h)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 0.35 * len(names) + 1.4))
    a1.barh(names, [h[n]["single_token_chars"] for n in names], color=PALETTE[0])
    a1.set_title("Han characters that are single tokens", loc="left")
    a1.invert_yaxis()
    share = [100 * (h[n].get("share") or 0) for n in names]
    a2.barh(names, share, color=PALETTE[2])
    a2.set_xlim(0, 100)
    a2.set_title("Han occurrences of characters that are one token (%)", loc="left")
    a2.invert_yaxis()
    return _svg(fig)


def chart_digits(r) -> str:
    plt = _plt()
    d = r["digits"]["tokenizers"]
    names = list(d)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 0.35 * len(names) + 1.4))
    a1.barh(names, [d[n]["three_digit_tokens"] for n in names], color=PALETTE[1])
    a1.set_xlim(0, 1000)
    a1.set_title("Three-digit groups that are one token (of 1,000)", loc="left")
    a1.invert_yaxis()
    a2.barh(names, [100 * (d[n].get("aligned_share") or 0) for n in names], color=PALETTE[4])
    a2.set_xlim(0, 100)
    a2.set_title("Digit tokens aligned to place value (%)", loc="left")
    a2.invert_yaxis()
    return _svg(fig)


def chart_stage_times(r) -> str:
    plt = _plt()
    st = r["stage_times"]
    names = list(st)
    stages = list(dict.fromkeys(s for m in names for s in st[m]))
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(names) + 1.2))
    for i, m in enumerate(names):
        left = 0.0
        for k, s in enumerate(stages):
            w = st[m].get(s, 0.0)
            ax.barh(i, w, left=left, color=PALETTE[k % len(PALETTE)], label=s if i == 0 else None)
            left += w
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    ax.set_title("Build stage times (from the manifests)", loc="left")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=5, frameon=False)
    return _svg(fig)


def _table(ts) -> str:
    out = []
    for t in ts:
        out.append(f"<table><caption>{html.escape(t.title)}</caption><thead><tr>")
        out.extend(f"<th>{html.escape(h)}</th>" for h in t.header)
        out.append("</tr></thead><tbody>")
        for row in t.rows:
            out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
        out.append("</tbody></table>")
        if t.notes:
            out.append("<ul class=notes>" + "".join(f"<li>{html.escape(n)}</li>" for n in t.notes) + "</ul>")
    return "\n".join(out)


def han_sentence_html(r) -> str:
    hs = r["han_sentence"]
    rows = []
    for n, pieces in hs["pieces"].items():
        spans = "".join(
            f'<span class=tok style="background:{TINTS[k % len(TINTS)]}" title="{html.escape(p)}">{html.escape(p)}</span>'
            for k, p in enumerate(pieces)
        )
        rows.append(f"<tr><th>{html.escape(n)}</th><td>{len(pieces)}</td><td class=sent>{spans}</td></tr>")
    return f"<table class=han><caption>{html.escape(hs['text'])}</caption><thead><tr><th>tokenizer</th><th>tokens</th><th>pieces</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em} h2{margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:1em 0;font-size:13px} caption{text-align:left;font-weight:600;padding:.3em 0}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:right} td:first-child,th:first-child{text-align:left}
figure{margin:1em 0} figure svg{max-width:100%;height:auto}
.tok{padding:1px 0;border-right:1px solid #999;font-size:18px} .sent{text-align:left} ul.notes{font-size:12px;color:#555}
"""


def render_html(r: dict) -> str:
    from .render_terminal import (
        audit_tables, balance_tables, compression_tables, digit_tables, fairness_tables, han_tables, stochastok_tables,
    )

    def fig(svg: str, name: str) -> str:
        return f'<figure class=chart data-chart="{name}">{svg}</figure>'

    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>dwstok eval: {html.escape(', '.join(r['tokenizers']))}</title><style>{CSS}</style></head><body>",
        f"<h1>dwstok eval</h1><p>{r['corpus']['docs']:,} documents, {r['corpus']['bytes'] / 1e6:.1f} MB from "
        f"{html.escape(', '.join(r['corpus']['paths']) or 'no corpus')}; baseline {html.escape(str(r['baseline']))}; "
        f"evaluated in {r['timings']['total']:.1f} s.</p>",
    ]
    if r["id_space"]:
        parts += ["<h2>Id space</h2>", fig(chart_id_space(r), "id-space")]
    if r["groups"]:
        parts += ["<h2>1. Compression per language group</h2>", fig(chart_bpt(r), "bytes-per-token")]
        if len(r["tokenizers"]) > 1:
            parts.append(fig(chart_change(r), "change"))
        parts.append(_table(compression_tables(r)))
    if any(r["balance"].values()):
        parts += ["<h2>2. Balance</h2>", fig(chart_weights(r), "weights"), _table(balance_tables(r))]
    parts += ["<h2>3. Han</h2>", fig(chart_han(r), "han"), _table(han_tables(r)), han_sentence_html(r)]
    parts += ["<h2>4. Digits</h2>", fig(chart_digits(r), "digits"), _table(digit_tables(r))]
    if r.get("fairness") and r["fairness"]["tokenizers"]:
        parts += ["<h2>5. Fairness on parallel text</h2>", fig(chart_parallel(r), "parallel"), _table(fairness_tables(r))]
    parts += ["<h2>6. Token audit</h2>", _table(audit_tables(r))]
    parts += ["<h2>7. StochasTok</h2>", _table(stochastok_tables(r))]
    if r.get("stage_times"):
        parts += ["<h2>Build</h2>", fig(chart_stage_times(r), "stage-times")]
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(r: dict, out_dir: str | Path) -> Path:
    """Write ``report.html`` (and ``report.json``) under ``out_dir``, each under a temporary
    name first."""
    import json

    from ..manifest import atomic_path

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    page = out / "report.html"
    with atomic_path(page) as tmp:
        Path(tmp).write_text(render_html(r), encoding="utf-8")
    with atomic_path(out / "report.json") as tmp:
        Path(tmp).write_text(json.dumps(r, ensure_ascii=False, indent=1), encoding="utf-8")
    return page
