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
    """Describe ARTIFACT: a workdir (one line per stage: status, age), a stage folder, a
    _manifest.json, a model.json, a part-NNNNN.arrow, count/pieces.arrow, stats.json,
    index.json, tokenizer.json, tokenizer_config.json, tiktoken.json, a .tiktoken file, or a
    corpus file (.parquet, .jsonl, .jsonl.zst, .jsonl.gz, .txt: documents, bytes, languages)."""
    d = describe(Path(artifact))
    if as_json:
        click.echo(json.dumps(d, indent=1, ensure_ascii=False))
        return
    if d.get("kind") == "dwstok workdir":
        from .info_more import workdir_lines

        for line in workdir_lines(d):
            click.echo(line)
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
        from .info_more import is_workdir, workdir

        if is_workdir(p):
            return workdir(p)
        raise InputError(f"{p} is a folder without a {MANIFEST}: not a finished stage output")
    name = p.name
    from stages.corpus import kind_of

    if kind_of(p) is not None:
        from .info_more import corpus_file

        return corpus_file(p)
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
            export_file = _export_json(p, obj)  # tiktoken.json, tokenizer_config.json, index.json
            if export_file is not None:
                return export_file
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
    if m.built_with.get("config"):
        d["config"] = m.built_with["config"]
    d["counts"] = {k: v for k, v in m.counts.items() if not isinstance(v, (dict, list))}
    asked = m.info.get("vocab_size_requested")
    if asked is not None and asked != m.counts.get("vocab_size"):
        d["vocab_size_requested"] = asked  # the corpus ran out of pairs (train.allow_smaller)
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
    asked = (md.get("config") or {}).get("vocab_size")
    if isinstance(asked, int) and asked != tok.n_vocab:
        d["vocab_size_requested"] = asked  # the corpus ran out of pairs (train.allow_smaller)
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


# -- the export and encode-shards JSON files (docs/formats.md, docs/exports.md) ------------


def _export_json(p: Path, obj: dict[str, Any]) -> dict[str, Any] | None:
    """``tiktoken.json``, ``tokenizer_config.json`` (with its roles and export settings) and
    ``encode-shards/index.json`` (bytes/token per language); None for anything else."""
    from dwstok.tiktoken_compat import TIKTOKEN_FILE

    if {"pat_str", "special_tokens", "file", "sha256"} <= obj.keys():
        ranks = p.parent / obj["file"]
        return {
            "kind": "tiktoken.json",
            "path": str(p),
            "name": obj.get("name"),
            "version": obj.get("version"),
            "n_vocab": obj.get("n_vocab"),
            "special_tokens": len(obj["special_tokens"]),
            "ranks_file": obj["file"] + ("" if ranks.is_file() else " (missing)"),
            "ranks_sha256": obj["sha256"],
            "model_sha256": obj.get("model_sha256"),
            "load": f"dwstok.load_tiktoken({str(p.parent)!r})" if obj["file"] == TIKTOKEN_FILE else None,
        }
    if "tokenizer_class" in obj and "added_tokens_decoder" in obj:
        roles = {k: obj[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token", "mask_token", "sep_token") if k in obj}
        return {
            "kind": "HF tokenizer_config.json",
            "path": str(p),
            "tokenizer_class": obj["tokenizer_class"],
            "version": (obj.get("dwstok") or {}).get("version"),
            "roles": roles,
            "split_special_tokens": obj.get("split_special_tokens"),
            "add_bos_token": obj.get("add_bos_token", False),
            "add_eos_token": obj.get("add_eos_token", False),
            "model_max_length": obj.get("model_max_length"),
            "chat_template": "yes" if obj.get("chat_template") else "no",
            "additional_special_tokens": len(obj.get("additional_special_tokens") or []),
        }
    if str(obj.get("format", "")).startswith("dwstok-shard") and "by_lang" in obj:
        return {
            "kind": "token shards index",
            "path": str(p),
            "version": obj.get("version"),
            "model_sha256": obj.get("model_sha256"),
            "dtype": obj.get("dtype"),
            "shards": len(obj.get("shards") or []),
            "docs": obj.get("docs"),
            "tokens": obj.get("tokens"),
            "bytes": obj.get("bytes"),
            "bytes_per_token": obj.get("bytes_per_token"),
            "bytes_per_token_by_lang": {g: v.get("bytes_per_token") for g, v in obj["by_lang"].items()},
        }
    return None
