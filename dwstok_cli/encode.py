"""`dwstok encode MODEL [TEXT | --file F | -]`: see a text's tokens in the terminal.

Each token tinted in turn (or cut by ``|`` where there is no colour), a small number
where characters took several tokens, then the ids, the token count and bytes/token of
each tokenizer. ``--json`` gives every token's id, text and character offsets.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import click


SHOW = ("tokens", "ids", "bytes")
TINTS = ("on #cfe3ff", "on #ffd9c2", "on #d4f2d0", "on #f6d2f2", "on #fff0b3", "on #d2efef")
SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


@dataclass
class Encoded:
    name: str
    label: str
    n_vocab: int
    ids: list[int]
    spans: list[tuple[int, int]]  # character offsets each token covers
    token_bytes: list[bytes]


def char_spans(text: str, token_bytes: list[bytes], *, skip: int = 0) -> list[tuple[int, int]]:
    """Character offsets of tokens whose bytes spell ``text``'s UTF-8 after ``skip``
    bytes (SentencePiece's dummy-prefix space); same rule as ``encode_with_offsets``.

    >>> char_spans("é!", [b"\\xc3", b"\\xa9!"])
    [(0, 1), (0, 2)]
    """
    char_at = []
    for k, ch in enumerate(text):
        char_at += [k] * len(ch.encode("utf-8"))
    char_at.append(len(text))
    spans = []
    pos = -skip if text else 0
    for b in token_bytes:
        start, pos = max(pos, 0), pos + len(b)
        end = max(pos, 0)
        spans.append((char_at[start], char_at[end - 1] + 1) if end > start else (char_at[start], char_at[start]))
    return spans


def encode_model(tok, name: str, text: str, allowed) -> Encoded:
    ids, spans = tok.encode_with_offsets(text, allowed_special=allowed)
    label = f"dwstok {tok.version}" if tok.version else name
    return Encoded(name, label, tok.n_vocab, ids, spans, [tok.decode_bytes([i]) for i in ids])


def encode_reference(ref: reference.Reference, text: str) -> Encoded:
    ids = ref.encode(text)
    tb = [ref.token_bytes(i) for i in ids]
    skip = sum(map(len, tb)) - len(text.encode("utf-8"))  # Mistral's dummy prefix: 1
    return Encoded(ref.name, ref.label, ref.n_vocab, ids, char_spans(text, tb, skip=skip), tb)


def is_split(text: str, span: tuple[int, int], b: bytes) -> bool:
    """A token whose bytes are not whole characters of the text (or a dummy prefix)."""
    return text[span[0] : span[1]].encode("utf-8") != b


def as_json(e: Encoded, text: str) -> dict:
    n_bytes = len(text.encode("utf-8"))
    return {
        "tokenizer": e.label,
        "name": e.name,
        "n_vocab": e.n_vocab,
        "n_tokens": len(e.ids),
        "bytes_per_token": round(n_bytes / len(e.ids), 4) if e.ids else None,
        "tokens": [
            {"id": i, "text": text[s:t], "start": s, "end": t, "bytes": b.hex(), "split": is_split(text, (s, t), b)}
            for i, (s, t), b in zip(e.ids, e.spans, e.token_bytes)
        ],
    }


def units(e: Encoded) -> list[tuple[int, int, list[int]]]:
    """Tokens that share a character, grouped: ``(start, end, token indexes)``."""
    out: list[tuple[int, int, list[int]]] = []
    for k, (s, t) in enumerate(e.spans):
        if out and s < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], t), out[-1][2] + [k])
        else:
            out.append((s, t, [k]))
    return out


def _visible(s: str) -> str:
    return s.replace("\n", "↵\n").replace("\t", "→")


def render(e: Encoded, text: str, show: str, color: bool):
    from rich.text import Text

    out = Text()
    if show == "ids":
        out.append(" ".join(map(str, e.ids)))
        return out
    if show == "bytes":
        for k, b in enumerate(e.token_bytes):
            if k:
                out.append(" " if color else " | ")
            out.append(b.hex(" ") or "·", style=TINTS[k % len(TINTS)] if color else "")
        return out
    for n, (s, t, ks) in enumerate(units(e)):
        if n and not color:
            out.append("|")
        # a token that covers no character: SentencePiece's dummy-prefix space, drawn as ▁
        out.append(_visible(text[s:t]) or "▁", style=TINTS[n % len(TINTS)] if color else "")
        if len(ks) > 1:  # characters that took several tokens
            out.append(str(len(ks)).translate(SUPERSCRIPT), style="bold magenta" if color else "")
    return out


@click.command("encode")
@click.argument("model", type=click.Path())
@click.argument("text", required=False)
@click.option("--file", "file", type=click.Path(dir_okay=False), help="Read the text from a file (UTF-8).")
@click.option("--compare", default="", help="Reference tokenizers to show too: any of gpt2,mistral,o200k.")
@click.option("--reference-dir", type=click.Path(file_okay=False), default=None, help="Folder of the reference tokenizers [default: $DWSTOK_REFTOK].")
@click.option("--show", type=click.Choice(SHOW), default="tokens", show_default=True, help="Draw tokens, their ids or their bytes.")
@click.option("--allowed-special", default="", help="Special names to parse from the text (comma-separated, or 'all'); none by default.")
@click.option("--json", "as_json_", is_flag=True, help="Print JSON: each token's id, text, character offsets, bytes, split flag.")
@click.option("--color", type=click.Choice(("auto", "always", "never")), default="auto", show_default=True, help="Tint tokens.")
def command(model, text, file, compare, reference_dir, show, allowed_special, as_json_, color) -> None:
    """Encode TEXT (or --file F, or stdin when TEXT is omitted or '-') with MODEL (a model
    file or a workdir) and show its tokens, ids, token count and bytes/token."""
    from dwstok.errors import InputError

    from . import reference
    from .model_arg import load_model

    text = _read_text(text, file, InputError)
    names = reference.parse_compare(compare)
    ref_dir = reference.reference_dir(reference_dir) if names else None
    tok = load_model(model)
    allowed = "all" if allowed_special.strip() == "all" else {s.strip() for s in allowed_special.split(",") if s.strip()}
    results = [encode_model(tok, tok.version or Path(model).stem, text, allowed)]
    results += [encode_reference(reference.load(n, ref_dir), text) for n in names]
    if as_json_:
        doc = as_json(results[0], text)
        if len(results) > 1:
            doc["compare"] = [as_json(e, text) for e in results[1:]]
        click.echo(json.dumps(doc, ensure_ascii=False, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, force_terminal={"always": True, "never": False}.get(color), no_color=color == "never")
    tint = console.is_terminal and color != "never"
    n_bytes = len(text.encode("utf-8"))
    for e in results:
        console.print(f"[bold]{e.label}[/bold]" if tint else e.label)
        console.print(render(e, text, show, tint), soft_wrap=True)
        if show != "ids":
            console.print(f"ids: {' '.join(map(str, e.ids))}", soft_wrap=True)
        console.print()
    table = Table("tokenizer", "vocabulary", "tokens", "bytes/token", box=None, pad_edge=False)
    for e in results:
        table.add_row(e.label, f"{e.n_vocab:,}", f"{len(e.ids):,}", f"{n_bytes / len(e.ids):.2f}" if e.ids else "-")
    console.print(table)


def _read_text(text: str | None, file: str | None, InputError) -> str:
    if text is not None and text != "-" and file:
        raise InputError("give TEXT or --file, not both")
    if file:
        try:
            return Path(file).read_bytes().decode("utf-8")
        except OSError as e:
            raise InputError(f"cannot read {file}: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise InputError(f"{file} is not UTF-8: byte {e.start} is {e.object[e.start]:#04x}") from None
    if text is not None and text != "-":
        return text
    stream = sys.stdin.buffer
    if stream.isatty():
        raise InputError("no text: give TEXT, --file F, or pipe text in (`echo hi | dwstok encode MODEL`)")
    data = stream.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"stdin is not UTF-8: byte {e.start} is {data[e.start]:#04x}") from None
