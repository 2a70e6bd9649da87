"""GNU gettext ``.po`` catalogs → the translated strings, then → one document per catalog.

Only what a translator wrote is kept: ``msgstr`` (every plural form), never the English
``msgid``. Fuzzy entries (a machine guess awaiting review), obsolete ``#~`` entries, the
header, empty strings and strings left identical to their ``msgid`` are dropped.

>>> po = 'msgid "Save"\\nmsgstr "Speichern"\\n\\n#, fuzzy\\nmsgid "Open"\\nmsgstr "Offen"\\n'
>>> [e.msgstr for e in parse_po(po)]
[('Speichern',), ('Offen',)]
>>> catalog_document(parse_po(po))
'Speichern'
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["PoEntry", "PoSyntaxError", "unescape", "parse_po", "translations", "catalog_document"]


class PoSyntaxError(ValueError):
    """A line of a .po file that is neither a comment, a keyword nor a string."""


class PoEntry(NamedTuple):
    msgid: str
    msgstr: tuple[str, ...]  # one string, or one per plural form
    msgctxt: str | None = None
    msgid_plural: str | None = None
    fuzzy: bool = False


# The escapes GNU gettext writes (po-lex.c): C's single-letter ones plus octal and hex.
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
            "\\": "\\", '"': '"', "'": "'", "?": "?"}
_ESCAPE_RE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]+)|(.))", re.S)


def unescape(s: str) -> str:
    r"""Undo PO string escapes.

    >>> unescape(r'a\"b\\c\nd\te\101')
    'a"b\\c\nd\teA'
    """

    def sub(m: re.Match) -> str:
        octal, hexa, char = m.groups()
        if octal is not None:
            return chr(int(octal, 8))
        if hexa is not None:
            return chr(int(hexa, 16))
        # An unknown escape keeps its backslash, as msgfmt would warn and keep it.
        return _ESCAPES.get(char, "\\" + char)

    return _ESCAPE_RE.sub(sub, s) if "\\" in s else s


_KEYWORD_RE = re.compile(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)\s*"(.*)"\s*$')
_STRING_RE = re.compile(r'^"(.*)"\s*$')


def parse_po(text: str) -> list[PoEntry]:
    """All entries of a catalog, in file order (the header, ``msgid ""``, included).

    Obsolete entries (``#~``) are not returned. Raises ``PoSyntaxError`` naming the line
    for anything that is not PO syntax.
    """
    entries: list[PoEntry] = []
    cur: dict = {}
    key: tuple | None = None  # which field continuation strings append to
    fuzzy = False

    def flush() -> None:
        nonlocal cur, key, fuzzy
        if "msgid" in cur:
            forms = cur.get("msgstr", {})
            entries.append(PoEntry(
                msgid=cur["msgid"],
                msgstr=tuple(forms[i] for i in sorted(forms)),
                msgctxt=cur.get("msgctxt"),
                msgid_plural=cur.get("msgid_plural"),
                fuzzy=fuzzy,
            ))
        cur, key, fuzzy = {}, None, False

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            # Comments come before their entry, so one after a msgstr ends the entry.
            if "msgstr" in cur:
                flush()
            if line.startswith("#,"):
                fuzzy = fuzzy or "fuzzy" in (f.strip() for f in line[2:].split(","))
            elif line.startswith("#~"):
                fuzzy = False  # msgmerge writes "#, fuzzy" before obsolete entries too
            continue
        m = _KEYWORD_RE.match(line)
        if m:
            word, index, value = m.group(1), m.group(2), unescape(m.group(3))
            if word in ("msgctxt", "msgid") and "msgstr" in cur:
                flush()  # a keyword straight after a msgstr: no flags for the new entry
            if word.startswith("msgstr"):
                i = int(index) if index is not None else 0
                cur.setdefault("msgstr", {})[i] = value
                key = ("msgstr", i)
            else:
                cur[word] = value
                key = (word,)
            continue
        m = _STRING_RE.match(line)
        if m and key is not None:
            value = unescape(m.group(1))
            if key[0] == "msgstr":
                cur["msgstr"][key[1]] += value
            else:
                cur[key[0]] += value
            continue
        raise PoSyntaxError(f"line {lineno}: not PO syntax: {raw[:80]!r}")
    flush()
    return entries


def translations(entries: list[PoEntry]) -> list[str]:
    """The human translations of a catalog, deduplicated, in file order.

    Skips the header, fuzzy entries, empty forms and forms equal to the English source
    (an untranslated copy is English text, not the catalog's language).
    """
    seen: set[str] = set()
    out: list[str] = []
    for e in entries:
        if e.msgid == "" or e.fuzzy:
            continue
        sources = {e.msgid, e.msgid_plural}
        for s in e.msgstr:
            s = s.strip()
            if s and s not in sources and s not in seen:
                seen.add(s)
                out.append(s)
    return out


def catalog_document(entries: list[PoEntry]) -> str:
    """One document: a catalog's translations, one message per line."""
    return "\n".join(translations(entries))


def header(entries: list[PoEntry]) -> dict[str, str]:
    """The catalog's header fields (``Language``, ``Plural-Forms``, …) as a dict.

    >>> header(parse_po('msgid ""\\nmsgstr "Language: de\\\\n"\\n'))
    {'Language': 'de'}
    """
    for e in entries:
        if e.msgid == "" and e.msgctxt is None and e.msgstr:
            fields = {}
            for line in e.msgstr[0].split("\n"):
                name, sep, value = line.partition(":")
                if sep:
                    fields[name.strip()] = value.strip()
            return fields
    return {}
