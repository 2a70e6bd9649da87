"""`dwstok info ARTIFACT`: what an artifact is (kind, version, pattern, hash, counts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click


@click.command("info")
@click.argument("artifact", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of aligned text.")
def command(artifact: str, as_json: bool) -> None:
    """Describe ARTIFACT: a stage folder, a _manifest.json, a model.json, a part-NNNNN.arrow,
    count/pieces.arrow, stats.json, tokenizer.json or a .tiktoken file."""
    d = describe(Path(artifact))
    if as_json:
        click.echo(json.dumps(d, indent=1, ensure_ascii=False))
        return
    width = max(map(len, d))
    for k, v in d.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={_fmt(b)}" for a, b in v.items())
        click.echo(f"{k.ljust(width)}  {_fmt(v)}")


def _fmt(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def describe(p: Path) -> dict[str, Any]:
    from dwstok.errors import InputError
    from stages.manifest import MANIFEST, hash_file

    if not p.exists():
        raise InputError(f"{p} not found")
    if p.is_dir():
        if (p / MANIFEST).is_file():
            return _manifest(p / MANIFEST)
        raise InputError(f"{p} is a folder without a {MANIFEST}: not a finished stage output")
    name = p.name
    if name == MANIFEST:
        return _manifest(p)
    if name.endswith(".arrow"):
        return _arrow(p)
    if name.endswith(".tiktoken"):
        return _tiktoken(p)
    if name.endswith(".json"):
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise InputError(f"{p} is not readable JSON: {e}") from None
        if isinstance(obj, dict):
            if "merge_rule" in obj and "vocab" in obj:
                return _model(p)
            if "model" in obj and "pre_tokenizer" in obj:
                return _hf(p, obj)
            if "docs_by_lang" in obj:
                return {
                    "kind": "count stats",
                    "path": str(p),
                    "sha256": hash_file(p).sha256,
                    "docs": obj["docs"],
                    "bytes": obj["bytes"],
                    "languages": len(obj["docs_by_lang"]),
                    "han_chars": len(obj.get("han", {})),
                }
            if "key" in obj and "stats" in obj and "index" in obj:
                st = obj["stats"]
                return {
                    "kind": "shard marker",
                    "path": str(p),
                    "index": obj["index"],
                    "outputs": ", ".join(obj["outputs"]),
                    "counts": {k: v for k, v in st.items() if isinstance(v, int)},
                }
            if "tokenizer_class" in obj:
                return {"kind": "HF tokenizer_config.json", "path": str(p), "tokenizer_class": obj["tokenizer_class"]}
    raise InputError(f"{p}: not a dwstok artifact this command knows")


def _manifest(p: Path) -> dict[str, Any]:
    from dwstok.errors import InputError
    from stages.manifest import read_manifest

    m = read_manifest(p.parent)
    if m is None:
        raise InputError(f"{p} is not a readable stage manifest")
    d: dict[str, Any] = {
        "kind": f"{m.stage} output",
        "path": str(p.parent),
        "created": m.created,
        "config_hash": m.config_hash,
        "output_hash": m.output_hash,
    }
    for k in ("version", "pattern_name", "model_sha256"):
        if k in m.info:
            d[k] = m.info[k]
    d["counts"] = {k: v for k, v in m.counts.items() if not isinstance(v, (dict, list))}
    d["files"] = len(m.outputs)
    d["timings"] = m.timings
    return d


def _model(p: Path) -> dict[str, Any]:
    from dwstok.tokenizer import Tokenizer

    tok = Tokenizer.load(p)
    md = tok.metadata or {}
    d = {
        "kind": "dwstok model",
        "path": str(p),
        "version": tok.version,
        "pattern": tok.pattern_name or tok.pattern,
        "sha256": tok.sha256,
        "n_vocab": tok.n_vocab,
        "specials": len(tok.special_tokens),
        "merges": len(tok.merges),
    }
    from dwstok.stochastok import SplitTable

    # StochasTok's table: every way a token is two tokens (DWSLM's 32.3 model: 61,525)
    d["stochastok_splits"] = SplitTable.from_tokenizer(tok).n_splits
    if md.get("han"):
        d["han"] = {k: v for k, v in md["han"].items() if not isinstance(v, (list, dict))}
    if md.get("config_hash"):
        d["config_hash"] = md["config_hash"]
    return d


def _arrow(p: Path) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from dwstok.errors import InputError
    from stages.manifest import hash_file

    try:
        with pa.memory_map(str(p)) as src:
            r = ipc.open_file(src)
            schema = r.schema
            rows = sum(r.get_batch(i).num_rows for i in range(r.num_record_batches))
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{p} is not a readable Arrow IPC file: {e}") from None
    md = {k.decode(): v.decode("utf-8", "replace") for k, v in (schema.metadata or {}).items()}
    kind = md.get("dwstok.kind")
    if kind is None:
        kind = "token shard" if md.get("dwstok.format", "").startswith("dwstok-shard") else "Arrow IPC file"
    d: dict[str, Any] = {"kind": kind, "path": str(p)}
    for k, v in md.items():
        if k.startswith("dwstok.") and k != "dwstok.kind":
            short = k.removeprefix("dwstok.")
            if short == "pattern":
                from dwstok.patterns import resolve

                v = resolve(v)[0] or v
            d[short] = v if len(v) < 200 else v[:200] + "…"
    d["sha256"] = hash_file(p).sha256
    d["rows"] = rows
    d["columns"] = ", ".join(schema.names) if len(schema.names) <= 8 else f"{len(schema.names)} columns"
    return d


def _tiktoken(p: Path) -> dict[str, Any]:
    from stages.manifest import hash_file

    with open(p, "rb") as f:
        n = sum(1 for line in f if line.strip())
    return {"kind": "tiktoken rank file", "path": str(p), "sha256": hash_file(p).sha256, "ranks": n}


def _hf(p: Path, obj: dict[str, Any]) -> dict[str, Any]:
    from stages.manifest import hash_file

    model = obj.get("model") or {}
    return {
        "kind": "HF tokenizers tokenizer.json",
        "path": str(p),
        "sha256": hash_file(p).sha256,
        "model": model.get("type"),
        "vocab": len(model.get("vocab") or {}),
        "merges": len(model.get("merges") or []),
        "added_tokens": len(obj.get("added_tokens") or []),
    }
