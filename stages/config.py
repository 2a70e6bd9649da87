"""Build configs: one YAML file pins everything that defines a tokenizer.

A config is strict: an unknown key, a key given twice, a wrong type or a bad value is a
``ConfigError`` that names the key (``han.coverage``), so a typo can never silently fall
back to a default and produce a different tokenizer. ``pattern`` must be a pattern name
(``o200k``, ``o200k-rdigits``, ``cl100k``, ``gpt2``); a custom regex is given as
``pattern_regex`` instead, so a mistyped name is an error rather than a regex.

>>> cfg = Config.from_dict({"version": "32.1", "pattern": "o200k"})
>>> cfg.vocab_size, cfg.n_merges, len(cfg.special_tokens)
(32768, 32480, 32)
>>> cfg.han.coverage is None and cfg.balance.alpha == 1.0
True

Each stage hashes only the sections it depends on (``Config.hash_of``), so changing
α re-runs ``train`` but not ``pretokenize``.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import json
import os
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dwstok.errors import ConfigError
from dwstok.limits import MAX_IDS
from dwstok.patterns import PATTERNS, resolve

NAMED_SPECIALS = (
    "<pad>",
    "<bos>",
    "<eos>",
    "<unk>",
    "<mask>",
    "<fim_prefix>",
    "<fim_middle>",
    "<fim_suffix>",
    "<sep>",
    "<code>",
    "</code>",
    "<think>",
    "</think>",
)
N_SPECIALS = 32
DEFAULT_SPECIALS = NAMED_SPECIALS + tuple(
    f"<reserved_{i}>" for i in range(len(NAMED_SPECIALS), N_SPECIALS)
)
N_BYTES = 256
ON_INVALID = ("error", "skip", "replace")


@dataclass(frozen=True)
class HanConfig:
    """Forced Han merges: off (both None), a coverage target, or a character count."""

    coverage: float | None = None
    count: int | None = None

    @property
    def enabled(self) -> bool:
        return self.coverage is not None or self.count is not None


@dataclass(frozen=True)
class BalanceConfig:
    """Language balance: pair counts of group g scaled by (q_g^α / Σ q^α) / q_g."""

    alpha: float = 1.0


@dataclass(frozen=True)
class CorpusConfig:
    """How documents are read: field names, default language, invalid UTF-8 policy."""

    text_field: str = "text"
    lang_field: str = "lang"
    default_lang: str = "und"
    on_invalid: str = "error"
    # Consecutive Parquet row groups are grouped into one shard until the group holds
    # at least this many (uncompressed) bytes.
    shard_bytes: int = 4_000_000
    # Uncompressed JSONL files above this size are split into shards of about this many
    # bytes (cut between lines), for parallelism and progress on one big file. A .txt
    # file is never split: it is one document, read whole.
    split_bytes: int = 64 << 20
    paths: tuple[str, ...] = ()
    # Files of unknown format found in a corpus folder: an error naming them, or (True)
    # a warning and skipped. Which files are read is part of the inputs hash, not config.
    skip_unknown: bool = False
    # Read only a deterministic sample of about this many bytes (whole shards; None: all).
    # The shards chosen are part of the inputs hash, not config.
    max_bytes: int | None = None


# The longest pretoken of a 200 MB multilingual corpus (and its dev split) is an 8,759-byte line of
# box-drawing characters; 64 KiB is 7.5 times that, so no real text reaches the limit.
MAX_PIECE_BYTES = 64 << 10


@dataclass(frozen=True)
class PretokenizeConfig:
    """How pieces are counted. A piece longer than ``max_piece_bytes`` (a run of one
    word or symbol with no pretoken boundary, e.g. a whole file without spaces) is counted
    as consecutive chunks of at most that many bytes, each cut on a UTF-8 character
    boundary, so one piece can never become a token the size of a file. Encoding is
    not affected: the tokenizer still encodes every piece whole."""

    max_piece_bytes: int = MAX_PIECE_BYTES


@dataclass(frozen=True)
class TrainConfig:
    """Training knobs. ``max_token_bytes`` caps a learned token's length (None: no cap).
    ``allow_smaller`` accepts a model under ``vocab_size`` tokens when the corpus runs
    out of pairs to merge (otherwise train stops with an error); it never changes a
    model, so it is left out of every hash."""

    max_token_bytes: int | None = None
    allow_smaller: bool = False


# -- export settings (``export:``) ---------------------------------------------------
@dataclass(frozen=True)
class ExportConfig:
    """What the exported files tell other runtimes (docs/exports.md says why each default).

    None of these change a token id: they only change what HF ``transformers`` /
    ``tokenizers`` and tiktoken are told about the specials and the context length.
    """

    model_max_length: int = 8192
    # transformers: text that spells "<bos>" stays text (the safe default, DESIGN §1)
    split_special_tokens: bool = True
    # a TemplateProcessing post-processor in tokenizer.json, and transformers'
    # add_bos_token / add_eos_token: "<bos>" before / "<eos>" after every sequence
    add_bos: bool = False
    add_eos: bool = False
    chat_template: str | None = None  # Jinja, as transformers' apply_chat_template reads it
    tiktoken_name: str | None = None  # the encoding's name; default "dwslmtok-<version>"


@dataclass(frozen=True)
class CountConfig:
    """How ``count`` reduces the pieces. Pruning (off by default) leaves rare pieces out
    of ``count/pieces.arrow``, so ``train`` holds fewer: ``min_count`` drops every piece
    seen fewer than N times in all (HF's ``min_frequency``); ``max_pieces`` keeps the N
    most frequent, ranked by count (descending), then by bytes (ascending), so at a tie
    on the boundary the pieces whose bytes sort first are kept. ``partitions`` only
    bounds memory (pieces are reduced in that many hash partitions; 0 = chosen from the
    input size) and never changes the output, so it is not hashed."""

    min_count: int | None = None
    max_pieces: int | None = None
    partitions: int = 0

    @property
    def prunes(self) -> bool:
        return self.min_count is not None or self.max_pieces is not None

    def pruning(self) -> dict[str, int]:
        """The pruning keys that are set (what the config hash and the model record)."""
        return {k: v for k, v in (("min_count", self.min_count), ("max_pieces", self.max_pieces)) if v is not None}


@dataclass(frozen=True)
class Config:
    """A validated build config. Build with ``load_config`` or ``Config.from_dict``."""

    version: str
    pattern: str
    vocab_size: int = 32768
    special_tokens: tuple[str, ...] = DEFAULT_SPECIALS
    han: HanConfig = field(default_factory=HanConfig)
    balance: BalanceConfig = field(default_factory=BalanceConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    pretokenize: PretokenizeConfig = field(default_factory=PretokenizeConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    count: CountConfig = field(default_factory=CountConfig)
    source: str | None = field(default=None, compare=False)

    @property
    def pattern_string(self) -> str:
        """The exact regex (``pattern`` may be a name such as ``o200k``)."""
        return resolve(self.pattern)[1]

    @property
    def n_merges(self) -> int:
        return self.vocab_size - len(self.special_tokens) - N_BYTES

    # -- hashing -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("source")
        d["special_tokens"] = list(self.special_tokens)
        d["corpus"]["paths"] = list(self.corpus.paths)
        if self.train == TrainConfig():
            d.pop("train")  # unset, the config (and its hashes) read as before the key existed
        # Only pruning defines the tokenizer, and only when it is on: a config without it
        # (every 32.x) hashes and records exactly as before the section existed.
        d.pop("count")
        if self.count.prunes:
            d["count"] = self.count.pruning()
        return d

    def hash_of(self, *keys: str) -> str:
        """sha256 of the named top-level sections (all sections when none is named).

        The pattern is hashed as its exact string, so a name and its spelled-out
        regex hash alike.
        """
        d = self.to_dict()
        d["pattern"] = self.pattern_string
        d["corpus"].pop("paths")  # where the corpus lives is an input, not config
        # which files and shards are read is hashed with the inputs (corpus_fingerprint)
        d["corpus"].pop("skip_unknown")
        d["corpus"].pop("max_bytes")
        if "train" in d:  # allow_smaller decides whether a short model is kept, not its bytes
            d["train"].pop("allow_smaller")
            if not d["train"] or d["train"] == {"max_token_bytes": None}:
                d.pop("train")
        if keys:
            d = {k: d[k] for k in keys if k in d}  # an unset optional section hashes as absent
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def hash(self) -> str:
        return self.hash_of()

    def replace(self, **changes: Any) -> Config:
        return dataclasses.replace(self, **changes)

    # -- parsing -------------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: Any, *, source: str | None = None) -> Config:
        where = f" in {source}" if source else ""
        if not isinstance(raw, dict):
            raise ConfigError(f"config{where} must be a mapping of keys to values")
        r = _Reader(raw, "", where)
        version = r.get("version", str, required=True)
        pattern = _pattern(r, where)
        vocab_size = r.get("vocab_size", int, 32768)
        specials = r.get("special_tokens", list, list(DEFAULT_SPECIALS))
        han = _han(r.section("han", allow_off=True), where)
        balance = _balance(r.section("balance"), where)
        corpus = _corpus(r.section("corpus"), where)
        pretok = _pretokenize(r.section("pretokenize"), where)
        train = _train(r.section("train"), where)
        export = _export(r.section("export"), where)
        count = _count(r.section("count"), where)
        r.done()

        _check_specials(specials, where)
        cfg = cls(
            version=version,
            pattern=pattern,
            vocab_size=vocab_size,
            special_tokens=tuple(specials),
            han=han,
            balance=balance,
            corpus=corpus,
            pretokenize=pretok,
            train=train,
            export=export,
            count=count,
            source=source,
        )
        _check_export_specials(export, cfg.special_tokens, where)
        if cfg.n_merges < 0:
            raise ConfigError(
                f"vocab_size{where} is {vocab_size}: it must be at least "
                f"{len(specials) + N_BYTES} (specials + 256 bytes)"
            )
        if vocab_size > MAX_IDS:
            raise ConfigError(f"vocab_size{where} is {vocab_size}: it must be at most {MAX_IDS}, the most ids the encoder takes")
        # Every Han character is 3 or 4 bytes of UTF-8, so forcing n characters takes at
        # least n merges plus one for the first character's 2-byte prefix. The exact
        # number needs the corpus (train checks it); a config that cannot fit fails now.
        need = 2 if han.coverage is not None else (han.count + 1 if han.count else 0)
        if need > cfg.n_merges:
            what = f"han.count {han.count}" if han.count is not None else f"han.coverage {han.coverage}"
            raise ConfigError(
                f"vocab_size{where} is {vocab_size}: it leaves {cfg.n_merges} merges, but {what} "
                f"forces at least {need} (each Han character is a merge, after its UTF-8 prefix); "
                "raise vocab_size, lower the Han target or set han: off"
            )
        return cfg


def load_config(path: str | Path, *, overrides: Sequence[str] = ()) -> Config:
    """Read and validate a YAML config: a file, or a preset's name (``32.3``).

    ``overrides`` are ``KEY=VALUE`` strings (``balance.alpha=0.5``), applied to the file's
    mapping before it is validated, so they are checked exactly like the file.
    Relative ``corpus.paths`` are resolved against the config's folder (against the
    current folder when they come from an override).

    >>> load_config("32.3", overrides=["balance.alpha=0.5"]).balance.alpha
    0.5
    """
    import yaml

    p = config_path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {p} not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read config {p}: {e}") from None
    try:
        raw = _yaml_load(text)
    except _DuplicateKey as e:
        raise ConfigError(
            f"key {e.key!r} is given twice in {p} (line {e.first} and line {e.line}); keep one"
        ) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config {p} is not valid YAML: {e}") from None
    source = str(p)
    if overrides:
        if not isinstance(raw, dict):
            raise ConfigError(f"config in {p} must be a mapping of keys to values")
        raw = apply_overrides(raw, overrides)
        source = f"{p} with --set {' --set '.join(overrides)}"
    cfg = Config.from_dict(raw, source=source)
    if cfg.corpus.paths:
        base = Path.cwd() if any(_override_key(o) == "corpus.paths" for o in overrides) else p.parent
        paths = tuple(q if "://" in q else str((base / q).resolve()) for q in cfg.corpus.paths)
        cfg = cfg.replace(corpus=dataclasses.replace(cfg.corpus, paths=paths))
    return cfg


class _DuplicateKey(Exception):
    def __init__(self, key: str, first: int, line: int):
        super().__init__(key)
        self.key, self.first, self.line = key, first, line


def _yaml_load(text: str) -> Any:
    """``yaml.safe_load``, except that a mapping key given twice raises ``_DuplicateKey``
    (PyYAML keeps the last one silently, so a config could say two things and mean one)."""
    import yaml

    fast = getattr(yaml, "CSafeLoader", None)  # libyaml's parser: the same nodes, ten times faster
    if fast is not None:
        try:
            return _load_checked(fast(text), yaml)
        except yaml.YAMLError:
            pass  # read again by PyYAML's own parser, whose message quotes the line
    return _load_checked(yaml.SafeLoader(text), yaml)


def _load_checked(loader, yaml) -> Any:
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_unique_keys(node, "", yaml)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_unique_keys(node, prefix: str, yaml) -> None:
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_unique_keys(item, f"{prefix[:-1]}[{i}].", yaml)
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict[str, int] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        key, line = f"{prefix}{key_node.value}", key_node.start_mark.line + 1
        if key in seen:
            raise _DuplicateKey(key, seen[key], line)
        seen[key] = line
        _check_unique_keys(value_node, f"{key}.", yaml)


# -- presets: the configs shipped inside the package ---------------------------------
PRESET_DIR = "configs"  # stages/configs/*.yaml, package data (``configs/`` in a checkout links here)


def presets() -> dict[str, Path]:
    """Preset name -> file, for the configs that ship with dwstok.

    >>> sorted(presets())
    ['32.1', '32.2', '32.3', 'demo']
    """
    folder = Path(__file__).resolve().parent / PRESET_DIR
    return {f.stem: f for f in sorted(folder.glob("*.yaml"))}


def config_path(name_or_path: str | Path) -> Path:
    """The file for a CONFIG argument: an existing file wins, then a preset by name
    (``32.3`` or ``32.3.yaml``); otherwise the path as given (so the error names it)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    s = str(name_or_path)
    if "/" not in s and os.sep not in s:
        found = presets().get(s.removesuffix(".yaml").removesuffix(".yml"))
        if found is not None:
            return found
    return p


# -- overrides: ``--set KEY=VALUE`` ----------------------------------------------------
def schema() -> dict[str, tuple[Any, Any]]:
    """Every config key, dotted (``han.count``), -> (type, default); sections included
    as their own keys (``han``). docs/config.md lists exactly these keys.

    >>> schema()["balance.alpha"]
    (<class 'float'>, 1.0)
    """
    out: dict[str, tuple[Any, Any]] = {}

    def walk(cls, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.name == "source":
                continue
            typ = hints[f.name]
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else None
            )
            out[prefix + f.name] = (typ, default)
            if dataclasses.is_dataclass(typ):
                walk(typ, f"{prefix}{f.name}.")

    walk(Config, "")
    # A custom regex is read from its own key into ``pattern`` (see _pattern).
    out["pattern_regex"] = (str | None, None)
    return out


def _override_key(item: str) -> str:
    return item.partition("=")[0].strip()


def parse_override(item: str) -> tuple[str, Any]:
    """``"balance.alpha=0.5"`` -> ``("balance.alpha", 0.5)``: the value is read as a YAML
    scalar (or flow list), except that a string key keeps its text as written
    (``version=32.10`` stays ``"32.10"``). ``null`` (or nothing) means the default.

    >>> parse_override("han.count=500"), parse_override("version=32.10")
    (('han.count', 500), ('version', '32.10'))
    """
    import yaml

    key, eq, text = item.partition("=")
    key = key.strip()
    if not eq or not key:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set balance.alpha=0.5")
    known = schema()
    if key not in known:
        close = difflib.get_close_matches(key, known, n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else "; see `dwstok config keys`"
        raise ConfigError(f"--set {item}: unknown key {key!r}{hint}")
    text = text.strip()
    if text in ("", "null", "~"):
        return key, None
    if known[key][0] in (str, str | None):
        return key, text
    try:
        return key, yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {item}: the value is not valid YAML ({e})") from None


def apply_overrides(raw: dict, overrides: Sequence[str]) -> dict:
    """A copy of the config mapping ``raw`` with each ``KEY=VALUE`` set (a null value
    removes the key, so its default applies)."""
    out = copy.deepcopy(raw)
    for item in overrides:
        key, value = parse_override(item)
        *sections, leaf = key.split(".")
        d = out
        for s in sections:
            if not isinstance(d.get(s), dict):  # absent, or a section set to 'off'
                d[s] = {}
            d = d[s]
        if value is None:
            d.pop(leaf, None)
        else:
            d[leaf] = value
    return out


class _Reader:
    """Pops typed keys off a mapping; whatever is left over is an unknown key."""

    def __init__(self, raw: dict, prefix: str, where: str):
        self.raw = dict(raw)
        self.prefix = prefix
        self.where = where

    def name(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def get(self, key: str, typ: type, default: Any = None, *, required: bool = False):
        if key not in self.raw:
            if required:
                raise ConfigError(f"missing key {self.name(key)!r}{self.where}")
            return default
        v = self.raw.pop(key)
        if typ is str and isinstance(v, (int, float)) and not isinstance(v, bool):
            # `version: 32.1` is read by YAML as a float; take it as written.
            if key == "version":
                v = str(v)
        if typ is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if not isinstance(v, typ) or (typ in (int, float) and isinstance(v, bool)):
            raise ConfigError(
                f"key {self.name(key)!r}{self.where} must be {_TYPE_NAMES[typ]}, "
                f"got {type(v).__name__} {v!r}"
            )
        return v

    def section(self, key: str, *, allow_off: bool = False) -> _Reader | None:
        if key not in self.raw:
            return _Reader({}, f"{self.name(key)}.", self.where)
        v = self.raw.pop(key)
        if allow_off and v in (None, False, "off"):
            return None
        if not isinstance(v, dict):
            raise ConfigError(
                f"key {self.name(key)!r}{self.where} must be a mapping"
                + (" or 'off'" if allow_off else "")
                + f", got {type(v).__name__} {v!r}"
            )
        return _Reader(v, f"{self.name(key)}.", self.where)

    def done(self) -> None:
        if self.raw:
            key = sorted(map(str, self.raw))[0]
            raise ConfigError(f"unknown key {self.name(key)!r}{self.where}")


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", list: "a list", bool: "true/false"}


def _han(r: _Reader | None, where: str) -> HanConfig:
    if r is None:
        return HanConfig()
    coverage = r.get("coverage", float)
    count = r.get("count", int)
    r.done()
    if coverage is not None and count is not None:
        raise ConfigError(f"han{where}: give either 'coverage' or 'count', not both")
    if coverage is not None and not 0.0 < coverage <= 1.0:
        raise ConfigError(f"key 'han.coverage'{where} must be in (0, 1], got {coverage}")
    if count is not None and count < 0:
        raise ConfigError(f"key 'han.count'{where} must be >= 0, got {count}")
    return HanConfig(coverage=coverage, count=count)


def _balance(r: _Reader, where: str) -> BalanceConfig:
    alpha = r.get("alpha", float, 1.0)
    r.done()
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"key 'balance.alpha'{where} must be in [0, 1], got {alpha}")
    return BalanceConfig(alpha=alpha)


def _train(r: _Reader, where: str) -> TrainConfig:
    allow_smaller = r.get("allow_smaller", bool, False)
    cap = r.get("max_token_bytes", int)
    r.done()
    if cap is not None and cap < 2:
        raise ConfigError(f"key 'train.max_token_bytes'{where} must be at least 2, got {cap}")
    return TrainConfig(allow_smaller=allow_smaller, max_token_bytes=cap)


def _corpus(r: _Reader, where: str) -> CorpusConfig:
    c = CorpusConfig(
        text_field=r.get("text_field", str, "text"),
        lang_field=r.get("lang_field", str, "lang"),
        default_lang=r.get("default_lang", str, "und"),
        on_invalid=r.get("on_invalid", str, "error"),
        shard_bytes=r.get("shard_bytes", int, 4_000_000),
        split_bytes=r.get("split_bytes", int, 64 << 20),
        paths=tuple(r.get("paths", list, [])),
        skip_unknown=r.get("skip_unknown", bool, False),
        max_bytes=r.get("max_bytes", int),
    )
    r.done()
    if c.max_bytes is not None and c.max_bytes <= 0:
        raise ConfigError(f"key 'corpus.max_bytes'{where} must be positive")
    if c.on_invalid not in ON_INVALID:
        raise ConfigError(
            f"key 'corpus.on_invalid'{where} must be one of {', '.join(ON_INVALID)}, "
            f"got {c.on_invalid!r}"
        )
    if c.shard_bytes <= 0:
        raise ConfigError(f"key 'corpus.shard_bytes'{where} must be positive")
    if c.split_bytes <= 0:
        raise ConfigError(f"key 'corpus.split_bytes'{where} must be positive")
    for i, p in enumerate(c.paths):
        if not isinstance(p, str):
            raise ConfigError(f"key 'corpus.paths[{i}]'{where} must be a string")
    return c


def _pattern(r: _Reader, where: str) -> str:
    """``pattern`` (a name) or ``pattern_regex`` (a custom regex), exactly one of them.

    A name must be one of ``dwstok.patterns.PATTERNS`` (or spell one out exactly): a
    mistyped name such as ``o200K`` would otherwise be a valid regex that matches
    almost nothing."""
    name = r.get("pattern", str)
    custom = r.get("pattern_regex", str)
    if name is not None and custom is not None:
        raise ConfigError(f"give either 'pattern' or 'pattern_regex'{where}, not both")
    if name is None and custom is None:
        raise ConfigError(
            f"missing key 'pattern'{where}: a pattern name ({', '.join(PATTERNS)}), "
            "or 'pattern_regex' for a custom regex"
        )
    if name is not None:
        if resolve(name)[0] is None:
            close = difflib.get_close_matches(name, list(PATTERNS), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"key 'pattern'{where} is {name!r}, which is not a pattern name "
                f"({', '.join(PATTERNS)}); {hint}a custom regex goes under 'pattern_regex'"
            )
        return name
    if not custom:
        raise ConfigError(f"key 'pattern_regex'{where} must not be empty")
    try:
        import regex

        regex.compile(custom)
    except regex.error as e:
        raise ConfigError(f"key 'pattern_regex'{where} is not a valid regex: {e}") from None
    return custom


def _check_specials(specials: list, where: str) -> None:
    """Specials are distinct, non-empty strings, none spelled like a byte token: a
    one-byte special (``"a"``) is the byte token itself in tiktoken, and one of the 256
    byte-level characters (``"Ġ"``) is a byte token's name in tokenizer.json."""
    from dwstok.export_files import bytes_to_unicode

    byte_names = {c: b for b, c in bytes_to_unicode().items()}
    seen: dict[str, int] = {}
    for i, s in enumerate(specials):
        if not isinstance(s, str) or not s:
            raise ConfigError(f"special_tokens[{i}]{where} must be a non-empty string")
        if s in seen:
            raise ConfigError(
                f"special_tokens[{i}]{where} is {s!r}, the same as special_tokens[{seen[s]}]: "
                "special_tokens has duplicates"
            )
        seen[s] = i
        raw = s.encode("utf-8", errors="surrogatepass")
        if len(raw) == 1 or s in byte_names:
            b = raw[0] if len(raw) == 1 else byte_names[s]
            raise ConfigError(
                f"special_tokens[{i}]{where} is {s!r}, which is spelled like the byte token "
                f"{len(specials) + b} (byte 0x{b:02x}); choose a longer name such as '<{s}>'"
            )


def _pretokenize(r: _Reader, where: str) -> PretokenizeConfig:
    c = PretokenizeConfig(max_piece_bytes=r.get("max_piece_bytes", int, MAX_PIECE_BYTES))
    r.done()
    if c.max_piece_bytes < 4:
        raise ConfigError(
            f"key 'pretokenize.max_piece_bytes'{where} must be at least 4 (one UTF-8 "
            f"character), got {c.max_piece_bytes}"
        )
    return c


def _export(r: _Reader, where: str) -> ExportConfig:
    d = ExportConfig()
    c = ExportConfig(
        model_max_length=r.get("model_max_length", int, d.model_max_length),
        split_special_tokens=r.get("split_special_tokens", bool, d.split_special_tokens),
        add_bos=r.get("add_bos", bool, d.add_bos),
        add_eos=r.get("add_eos", bool, d.add_eos),
        chat_template=_optional_str(r, "chat_template"),
        tiktoken_name=_optional_str(r, "tiktoken_name"),
    )
    r.done()
    if c.model_max_length <= 0:
        raise ConfigError(f"key 'export.model_max_length'{where} must be positive")
    if c.tiktoken_name is not None and (not c.tiktoken_name or c.tiktoken_name.split() != [c.tiktoken_name]):
        raise ConfigError(f"key 'export.tiktoken_name'{where} must be a non-empty name without spaces")
    return c


def _optional_str(r: _Reader, key: str) -> str | None:
    if r.raw.get(key, "") is None:  # written as `key: null`
        r.raw.pop(key)
        return None
    return r.get(key, str)


def _check_export_specials(export: ExportConfig, specials: Sequence[str], where: str) -> None:
    for flag, name in (("add_bos", "<bos>"), ("add_eos", "<eos>")):
        if getattr(export, flag) and name not in specials:
            raise ConfigError(
                f"key 'export.{flag}'{where} needs the special token {name!r}, which special_tokens lacks"
            )


def _count(r: _Reader, where: str) -> CountConfig:
    c = CountConfig(
        min_count=r.get("min_count", int),
        max_pieces=r.get("max_pieces", int),
        partitions=r.get("partitions", int, 0),
    )
    r.done()
    if c.min_count is not None and c.min_count < 1:
        raise ConfigError(f"key 'count.min_count'{where} must be at least 1, got {c.min_count}")
    if c.max_pieces is not None and c.max_pieces < 1:
        raise ConfigError(f"key 'count.max_pieces'{where} must be at least 1, got {c.max_pieces}")
    if c.partitions < 0:
        raise ConfigError(f"key 'count.partitions'{where} must be >= 0 (0 = automatic), got {c.partitions}")
    return c
