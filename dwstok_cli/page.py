"""`dwstok page MODEL... --out DIR`: a static try-it page that tokenizes in the browser.

The site opens from ``file://`` or any static host, with no server and no network:
``index.html``, the bundled encoders (``dwstok-page.min.js``, built from ``web/`` by
``make page-bundle`` and shipped as package data) and one ``data/NAME.js`` per tokenizer.
"""

from __future__ import annotations

import base64
import os
from importlib.resources import files
from pathlib import Path
from typing import Any

import click


BUNDLE = "dwstok-page.min.js"
TEMPLATE = "index.html"
NOTES = {
    "o200k": "GPT-4o; about six times the vocabulary",
    "gpt2": "GPT-2 (2019)",
    "mistral": "SentencePiece BPE, byte fallback",
}


@click.command("page")
@click.argument("models", nargs=-1, required=True, type=click.Path())
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Folder to write the site into.")
@click.option(
    "--compare",
    default=None,
    help="Reference tokenizers to show too, from gpt2,mistral,o200k [default: all three when a reference folder is set].",
)
@click.option(
    "--reference-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder with r50k_base.tiktoken, o200k_base.tiktoken, encodings.json, mistral7b_v0.1.tokenizer.model [default: $DWSTOK_REFTOK].",
)
@click.option("--title", default="DWSLMTok", show_default=True, help="The page's title.")
def command(models: tuple[str, ...], out_dir: str, compare: str | None, reference_dir: str | None, title: str) -> None:
    """Write a static page to --out that shows each MODEL's tokens (a model file or a
    workdir; several side by side), next to GPT-2, Mistral and o200k, all encoded in the
    browser. Open DIR/index.html from disk."""
    from . import reference

    if compare is None:
        names = list(reference.NAMES) if (reference_dir or os.environ.get(reference.ENV)) else []
    else:
        names = reference.parse_compare(compare)
    ref = reference.reference_dir(reference_dir) if names else None
    summary = write_site(models, Path(out_dir), compare=names, reference_dir=ref, title=title)
    for name, size in summary["files"].items():
        click.echo(f"{name:<28} {size / 1e6:8.2f} MB")
    click.echo(f"page: {summary['index']} ({summary['bytes'] / 1e6:.1f} MB in all); open it in a browser")


def model_entry(tok, name: str) -> dict[str, Any]:
    from .page_data import tiktoken_entry

    specials = set(tok.special_tokens.values())
    entry = tiktoken_entry(
        name=name,
        label=f"dwstok {tok.version}" if tok.version else name,
        ranks=((i, b) for i, b in tok.vocab.items() if i not in specials),
        pattern=tok.pattern,
        specials=tok.special_tokens,
        n_vocab=tok.n_vocab,
        note=f"pattern {tok.pattern_name or 'custom'}",
    )
    entry["dwstok"] = True
    return entry


def reference_entry(name: str, d: Path) -> dict[str, Any]:
    from dwstok.errors import ModelFileError

    from . import reference
    from .page_data import spm_entry, tiktoken_entry
    from .spm_convert import spm_tokenizer_json

    label, note = reference.LABELS[name], NOTES[name]
    if name == "mistral":
        return spm_entry(name=name, label=label, tokenizer_json=spm_tokenizer_json(d / reference.MISTRAL), note=note)
    spec = reference.tiktoken_spec(d, name)
    ranks = []
    path = spec["path"]
    for n, line in enumerate(path.read_bytes().splitlines()):
        if line:
            try:
                tok_b64, rank = line.split()
                ranks.append((int(rank), base64.b64decode(tok_b64, validate=True)))
            except ValueError:
                raise ModelFileError(f"{path}:{n + 1} is not a tiktoken rank line (base64 token, space, rank)") from None
    n_vocab = max([r for r, _ in ranks] + list(spec["specials"].values())) + 1
    return tiktoken_entry(name=name, label=label, ranks=ranks, pattern=spec["pattern"], specials=spec["specials"], n_vocab=n_vocab, note=note)


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_site(models, out: Path, *, compare: list[str], reference_dir: Path | None, title: str = "DWSLMTok") -> dict[str, Any]:
    """Write ``index.html``, the bundle and ``data/*.js`` into ``out``; returns the files and sizes."""
    from dwstok.errors import InputError

    from . import reference
    from .model_arg import load_model
    from .page_data import data_script

    entries = []
    seen: dict[str, str] = {}
    for arg in models:
        tok = load_model(arg)
        name = tok.version or Path(arg).stem
        if name in seen or name in reference.NAMES:
            raise InputError(
                f"{arg} and {seen.get(name, 'a reference tokenizer')} are both named {name!r} in the page;"
                " show models of different versions"
            )
        seen[name] = arg
        entries.append(model_entry(tok, name))
    for name in compare:
        entries.append(reference_entry(name, reference_dir))
    assets = files("dwstok_cli") / "page_assets"
    bundle = assets / BUNDLE
    if not bundle.is_file():
        raise InputError(f"the page bundle {BUNDLE} is missing from this install; run `make page-bundle` in a checkout")
    (out / "data").mkdir(parents=True, exist_ok=True)
    written: dict[str, int] = {}
    scripts = []
    for e in entries:
        rel = f"data/{e['name']}.js"
        data = data_script(e).encode("ascii")
        _write(out / rel, data)
        written[rel] = len(data)
        scripts.append(f'<script src="{rel}"></script>')
    _write(out / BUNDLE, bundle.read_bytes())
    written[BUNDLE] = (out / BUNDLE).stat().st_size
    from html import escape

    html = (assets / TEMPLATE).read_text(encoding="utf-8")
    html = html.replace("__TITLE__", escape(title)).replace("__DATA_SCRIPTS__", "\n".join(scripts))
    _write(out / TEMPLATE, html.encode("utf-8"))  # last: the page exists only once it all does
    written[TEMPLATE] = len(html.encode("utf-8"))
    return {"index": str(out / TEMPLATE), "files": written, "bytes": sum(written.values()), "tokenizers": [e["name"] for e in entries]}
