"""Stage ``export``: the trained model as files other libraries load.

Writes into ``<workdir>/export/``:

- ``tokenizer.json``: an HF ``tokenizers`` BPE model. Merges in rank order with
  ``ignore_merges: false`` (so HF applies them exactly as dwstok does), no byte fallback,
  no normalizer; pre-tokenizer = ``Split(pattern, isolated)`` then ``ByteLevel`` without
  its own regex; ``ByteLevel`` decoder; the specials as ``added_tokens`` (special=true).
  Token strings are the GPT-2 byte-to-unicode spelling of each token's bytes.
- ``tokenizer_config.json``: for ``transformers.AutoTokenizer.from_pretrained(dir)``;
  by default ``split_special_tokens: true``, so text that spells ``<bos>`` stays ordinary
  text. (A bare ``tokenizers.Tokenizer.from_file`` matches specials in raw text unless
  ``tok.encode_special_tokens = True``: a runtime switch tokenizer.json cannot store.)
  The ``export:`` section of the config sets ``model_max_length``,
  ``split_special_tokens``, a ``chat_template`` and ``add_bos``/``add_eos`` (a
  ``TemplateProcessing`` post-processor); docs/exports.md says what each does.
- ``tokenizer.tiktoken``: base64 token and rank per line, ranks = dwstok ids (bytes at
  32 + b, merges from 288), and ``tiktoken.json`` with the pattern and specials, for
  ``tiktoken.Encoding(name, pat_str=..., mergeable_ranks=load_tiktoken_bpe(path),
  special_tokens=...)`` (:func:`dwstok.load_tiktoken` does exactly that).

>>> files = export_tokenizer(tok, "work/32.3/export")  # doctest: +SKIP
>>> sorted(files)  # doctest: +SKIP
['tiktoken.json', 'tokenizer.json', 'tokenizer.tiktoken', 'tokenizer_config.json']
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dwstok.errors import ModelFileError
from dwstok.export_files import HF_CONFIG_FILE, HF_FILE, byte_level, bytes_to_unicode, hf_pattern  # noqa: F401
from dwstok.patterns import resolve
from dwstok.tiktoken_compat import TIKTOKEN_FILE, TIKTOKEN_META_FILE, ranks_bytes
from dwstok.tiktoken_compat import load_tiktoken as load_tiktoken

from . import manifest as mf
from .config import Config, ExportConfig
from .executors import Executor
from .inputs import Inputs
from .lineage import built_with
from .train import CONFIG_KEYS as MODEL_KEYS

STAGE = "export"
UPSTREAM = "train"
# The model must have been trained with this config's model sections (its corpus reading
# options only chose the text it saw, like the corpus paths).
UPSTREAM_KEYS = MODEL_KEYS
CONFIG_KEYS = ("version", "pattern", "special_tokens", "export")
MODEL_FILE = "model.json"  # in the train stage's folder

# transformers' role names -> our special names (used when the model has them)
_ROLES = {
    "bos_token": "<bos>",
    "eos_token": "<eos>",
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "mask_token": "<mask>",
    "sep_token": "<sep>",
}


def _check_layout(tok) -> tuple[dict[int, bytes], set[int]]:
    vocab = tok.vocab
    specials = set(tok.special_tokens.values())
    seen: dict[bytes, int] = {}
    for i, b in vocab.items():
        if i in specials:
            continue
        if b in seen:
            raise ModelFileError(f"tokens {seen[b]} and {i} have the same bytes {b!r}; cannot export")
        seen[b] = i
    for a, b in tok.merges:
        if a + b not in seen:
            raise ModelFileError(f"merge {a!r} + {b!r} has no token; the model is inconsistent")
    return vocab, specials


def post_processor(tok, settings: ExportConfig) -> dict[str, Any] | None:
    """A ``TemplateProcessing`` that adds ``<bos>``/``<eos>`` (``export.add_bos/add_eos``),
    or None: then ``encode(text)`` gives the model's ids and nothing else."""
    if not (settings.add_bos or settings.add_eos):
        return None
    sp = tok.special_tokens
    names = [n for flag, n in ((settings.add_bos, "<bos>"), (settings.add_eos, "<eos>")) if flag]
    for n in names:
        if n not in sp:
            raise ModelFileError(f"export.add_bos/add_eos need {n!r}, which this model has no special for")
    bos = [{"SpecialToken": {"id": "<bos>", "type_id": 0}}] if settings.add_bos else []
    eos = [{"SpecialToken": {"id": "<eos>", "type_id": 0}}] if settings.add_eos else []

    def seq(name: str, type_id: int) -> list[dict]:
        return [{"Sequence": {"id": name, "type_id": type_id}}]

    return {
        "type": "TemplateProcessing",
        "single": bos + seq("A", 0) + eos,
        # a pair: each sequence gets its own <bos>/<eos> (as Llama's tokenizers do)
        "pair": bos + seq("A", 0) + eos + bos + seq("B", 1) + eos,
        "special_tokens": {n: {"id": n, "ids": [sp[n]], "tokens": [n]} for n in names},
    }


def hf_tokenizer_json(tok, settings: ExportConfig = ExportConfig()) -> dict[str, Any]:
    """The ``tokenizer.json`` document for HF tokenizers."""
    vocab, specials = _check_layout(tok)
    _, pattern = resolve(tok.pattern)
    model_vocab = {byte_level(vocab[i]): i for i in sorted(vocab) if i not in specials}
    # The specials must be in the model's vocab too: tokenizers gives an added token
    # that the model lacks a fresh id after the vocab, whatever id tokenizer.json says.
    for name, i in sorted(tok.special_tokens.items(), key=lambda kv: kv[1]):
        if name in model_vocab:
            raise ModelFileError(
                f"special {name!r} is spelled like token {model_vocab[name]}; cannot export"
            )
        model_vocab[name] = i
    model_vocab = dict(sorted(model_vocab.items(), key=lambda kv: kv[1]))
    # Byte-level strings never contain a space (0x20 maps to 'Ġ'), so the classic
    # "left right" merge form is unambiguous and loads in every tokenizers version.
    merges = [f"{byte_level(a)} {byte_level(b)}" for a, b in tok.merges]
    added = [
        {
            "id": i,
            "content": name,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for name, i in sorted(tok.special_tokens.items(), key=lambda kv: kv[1])
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": hf_pattern(pattern)},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                 "use_regex": False},
            ],
        },
        "post_processor": post_processor(tok, settings),
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": model_vocab,
            "merges": merges,
        },
    }


def hf_tokenizer_config(tok, settings: ExportConfig = ExportConfig()) -> dict[str, Any]:
    """The ``tokenizer_config.json`` for ``transformers.AutoTokenizer``."""
    sp = tok.special_tokens
    cfg: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        # by default never turn "<bos>" typed in text into the control token (DESIGN §1)
        "split_special_tokens": settings.split_special_tokens,
        "model_max_length": settings.model_max_length,
        "clean_up_tokenization_spaces": False,
        "add_prefix_space": False,
        # what the post-processor in tokenizer.json does, for transformers' own checks
        "add_bos_token": settings.add_bos,
        "add_eos_token": settings.add_eos,
    }
    if settings.chat_template is not None:
        cfg["chat_template"] = settings.chat_template
    for role, name in _ROLES.items():
        if name in sp:
            cfg[role] = name
    roles = set(_ROLES.values())
    extra = [n for n, _ in sorted(sp.items(), key=lambda kv: kv[1]) if n not in roles]
    if extra:
        cfg["additional_special_tokens"] = extra
    cfg["added_tokens_decoder"] = {
        str(i): {
            "content": name,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for name, i in sorted(sp.items(), key=lambda kv: kv[1])
    }
    info = {"version": tok.version, "model_sha256": tok.sha256}
    cfg["dwstok"] = {k: v for k, v in info.items() if v is not None}
    return cfg


def tiktoken_ranks(tok) -> bytes:
    """The ``.tiktoken`` rank file: ``base64(token) rank`` per line, in rank order."""
    vocab, specials = _check_layout(tok)
    return ranks_bytes((vocab[i], i) for i in sorted(vocab) if i not in specials)


def tiktoken_meta(tok, ranks_sha256: str, *, name: str | None = None) -> dict[str, Any]:
    """Sidecar of the rank file: everything ``tiktoken.Encoding`` needs besides the ranks.

    ``sha256`` pins the rank file: tiktoken caches files by *path*, so without the hash a
    re-export to the same folder could be served stale from tiktoken's cache.
    """
    _, pattern = resolve(tok.pattern)
    return {
        "name": name or f"dwslmtok-{tok.version or 'unversioned'}",
        "file": TIKTOKEN_FILE,
        "sha256": ranks_sha256,
        "pat_str": pattern,
        "special_tokens": dict(sorted(tok.special_tokens.items(), key=lambda kv: kv[1])),
        "n_vocab": tok.n_vocab,
        "version": tok.version,
        "model_sha256": tok.sha256,
    }


def export_tokenizer(
    tok, out_dir: str | Path, settings: ExportConfig = ExportConfig()
) -> dict[str, mf.FileInfo]:
    """Write the four export files into ``out_dir`` (atomically); return name -> FileInfo."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    hf = json.dumps(hf_tokenizer_json(tok, settings), ensure_ascii=False, indent=None)
    files = {
        HF_FILE: mf.write_bytes(out / HF_FILE, (hf + "\n").encode("utf-8")),
        HF_CONFIG_FILE: mf.write_json(out / HF_CONFIG_FILE, hf_tokenizer_config(tok, settings)),
        TIKTOKEN_FILE: mf.write_bytes(out / TIKTOKEN_FILE, tiktoken_ranks(tok)),
    }
    meta = tiktoken_meta(tok, files[TIKTOKEN_FILE].sha256, name=settings.tiktoken_name)
    files[TIKTOKEN_META_FILE] = mf.write_json(out / TIKTOKEN_META_FILE, meta)
    return files


def load_hf(export_dir: str | Path, *, encode_special_tokens: bool = True):
    """A ``tokenizers.Tokenizer`` from an export folder, specials not matched in text."""
    from tokenizers import Tokenizer as HFTokenizer

    t = HFTokenizer.from_file(str(Path(export_dir) / HF_FILE))
    t.encode_special_tokens = encode_special_tokens
    return t


# Spot check run after every export: scripts, digit runs, whitespace runs, special names.
_SELF_CHECK = (
    "Hello world! The year 2026 has 1234567 seconds.\n\n  Indented   text\r\n"
    "Der schnelle braune Fuchs, Straße 12. Привет, мир! 统计语言模型的中文文本。日本語のテキスト"
    " 🎉👍🏽 é e\u0301 don't I'M <bos> <|endoftext|> x\t\t\n   \n"
)


def self_check(tok, out_dir: str | Path, text: str = _SELF_CHECK) -> list[str]:
    """Encode ``text`` with BPE from its definition (dwstok.reference: plain Python, so a
    first export compiles no kernel), the model and each exported file; names of those
    that differ."""
    from dwstok import reference

    want = reference.encode(tok, text)
    bad = [] if tok.encode(text) == want else ["dwstok's encoder"]
    if load_hf(out_dir).encode(text, add_special_tokens=False).ids != want:
        bad.append(HF_FILE)
    try:
        enc = load_tiktoken(out_dir)
    except ImportError:  # tiktoken is optional
        enc = None
    if enc is not None and enc.encode_ordinary(text) != want:
        bad.append(TIKTOKEN_FILE)
    return bad


def chat_template_trap(settings: ExportConfig, special_tokens) -> str | None:
    """A warning when the chat template spells specials that transformers will read as text."""
    if not settings.chat_template or not settings.split_special_tokens:
        return None
    spelled = [n for n in special_tokens if n in settings.chat_template]
    if not spelled:
        return None
    return (
        f"note: the chat template writes {', '.join(spelled[:3])}, which split_special_tokens: true"
        " tokenizes as text; call apply_chat_template(..., tokenizer_kwargs={'split_special_tokens': False})"
        " or set export.split_special_tokens: false (docs/exports.md)"
    )


def run(config: Config, inputs: Inputs, out_dir: str | Path, executor: Executor) -> mf.Manifest:
    """Export ``train/model.json`` for HF tokenizers/transformers and tiktoken."""
    from dwstok.tokenizer import Tokenizer

    out_dir = Path(out_dir)
    # refuses a model trained under other config sections (PatternMismatchError)
    up_dir, up = inputs.upstream(UPSTREAM, config=config, keys=UPSTREAM_KEYS)
    config_hash = config.hash_of(*CONFIG_KEYS)
    inputs_hash = up.output_hash
    done = mf.up_to_date(out_dir, STAGE, config_hash, inputs_hash)
    if done:
        return done
    with mf.Timer() as t_load:
        # refuses a model of another version or pattern (PatternMismatchError)
        tok = Tokenizer.load(
            up_dir / MODEL_FILE, expect_pattern=config.pattern, expect_version=config.version
        )
    staging = mf.Staging(out_dir, STAGE, config_hash)  # old result kept until commit
    with mf.Timer() as t_write:
        outputs = export_tokenizer(tok, staging.dir, config.export)
    with mf.Timer() as t_check:
        bad = self_check(tok, staging.dir)
    if bad:
        raise ModelFileError(
            f"{', '.join(bad)} encode a check text differently from the model's merges applied"
            " by their definition (dwstok.reference); this is a bug in dwstok, please report it"
        )
    executor.progress.note(f"{STAGE}: wrote {', '.join(sorted(outputs))} to {out_dir}")
    trap = chat_template_trap(config.export, tok.special_tokens)
    if trap:
        executor.progress.note(f"{STAGE}: {trap}")
    m = mf.Manifest(
        stage=STAGE,
        config_hash=config_hash,
        inputs_hash=inputs_hash,
        outputs=outputs,
        counts={
            "n_vocab": tok.n_vocab,
            "merges": len(tok.merges),
            "special_tokens": len(tok.special_tokens),
        },
        timings={"load_s": t_load.seconds, "write_s": t_write.seconds, "check_s": t_check.seconds},
        info={
            "version": tok.version,
            "pattern": tok.pattern,
            "pattern_name": tok.pattern_name,
            "model_sha256": tok.sha256,
            "model_max_length": config.export.model_max_length,
        },
        inputs={UPSTREAM: {"dir": str(up_dir), "output_hash": up.output_hash}},
        built_with=built_with(config, CONFIG_KEYS, up.built_with),
    )
    return staging.commit(m)
