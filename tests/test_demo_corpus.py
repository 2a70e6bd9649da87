"""scripts/demo_corpus.py: PO parsing, document assembly, output; the real build is slow."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "demo_corpus.py"
sys.path.insert(0, str(ROOT / "scripts"))

from demo_corpus import extract, output  # noqa: E402
from demo_corpus.extract import Doc  # noqa: E402
from demo_corpus.po import PoSyntaxError, catalog_document, header, parse_po, translations, unescape  # noqa: E402
from demo_corpus.sources import PACKAGES, Package  # noqa: E402

SAMPLE_PO = r'''# German translation.
# Translators:
# Jannis Leidel <jannis@example.org>, 2011
msgid ""
msgstr ""
"Project-Id-Version: django\n"
"Language: de\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

#: contrib/admin/actions.py:17
#, python-format
msgid "Delete selected %(verbose_name_plural)s"
msgstr "Ausgewählte %(verbose_name_plural)s löschen"

#: contrib/admin/options.py:99
msgid ""
"Please enter the correct %(username)s and password for a staff account. "
"Note that both fields may be case-sensitive."
msgstr ""
"Bitte %(username)s und Passwort für einen Staff-Account eingeben. Beide "
"Felder berücksichtigen die Groß-/Kleinschreibung."

#, fuzzy
msgid "Add"
msgstr "Hinzufügen?"

msgctxt "month name"
msgid "May"
msgstr "Mai"

msgid "%(count)s item"
msgid_plural "%(count)s items"
msgstr[0] "%(count)s Eintrag"
msgstr[1] "%(count)s Einträge"

msgid "Say \"hi\"\tthen\\leave\n"
msgstr "Sag \"hallo\"\tdann\\geh\n"

msgid "Untranslated"
msgstr ""

msgid "Email"
msgstr "Email"

msgid "Mai"
msgstr "Mai"

#, fuzzy
#~ msgid "Old"
#~ msgstr "Alt"

msgid "Next"
msgstr "Weiter"
'''


# --- PO parsing -----------------------------------------------------------------------

def test_unescape_po_escapes():
    assert unescape(r'\"q\" \\ \n \t \r \a \b \f \v') == '"q" \\ \n \t \r \a \b \f \v'
    assert unescape(r"\101\x42\303") == "AB\u00c3"
    assert unescape("no escapes") == "no escapes"
    assert unescape(r"\q") == r"\q"  # unknown escape kept as written


def test_parse_po_entries():
    entries = parse_po(SAMPLE_PO)
    by_id = {e.msgid: e for e in entries}
    assert entries[0].msgid == "" and header(entries)["Language"] == "de"
    assert by_id["Delete selected %(verbose_name_plural)s"].msgstr == ("Ausgewählte %(verbose_name_plural)s löschen",)
    long = by_id["Please enter the correct %(username)s and password for a staff account. "
                 "Note that both fields may be case-sensitive."]
    assert long.msgstr == ("Bitte %(username)s und Passwort für einen Staff-Account eingeben. Beide "
                           "Felder berücksichtigen die Groß-/Kleinschreibung.",)
    assert by_id["Add"].fuzzy and not by_id["Next"].fuzzy
    assert by_id["May"].msgctxt == "month name"
    plural = by_id["%(count)s item"]
    assert plural.msgid_plural == "%(count)s items"
    assert plural.msgstr == ("%(count)s Eintrag", "%(count)s Einträge")
    assert by_id['Say "hi"\tthen\\leave\n'].msgstr == ('Sag "hallo"\tdann\\geh\n',)
    assert "Old" not in by_id  # obsolete entries are not entries
    assert not by_id["Next"].fuzzy  # the obsolete entry's fuzzy flag does not leak


def test_translations_keep_only_human_msgstr():
    got = translations(parse_po(SAMPLE_PO))
    assert got == [
        "Ausgewählte %(verbose_name_plural)s löschen",
        "Bitte %(username)s und Passwort für einen Staff-Account eingeben. Beide "
        "Felder berücksichtigen die Groß-/Kleinschreibung.",
        "Mai",  # the second "Mai" (msgid == msgstr) is dropped; so is the duplicate
        "%(count)s Eintrag",
        "%(count)s Einträge",
        'Sag "hallo"\tdann\\geh',  # stripped
        "Weiter",
    ]
    doc = catalog_document(parse_po(SAMPLE_PO))
    assert doc == "\n".join(got)
    for english in ("Delete selected", "Please enter", "Hinzufügen", "Email", "Alt", "Language:"):
        assert english not in doc


def test_parse_po_entries_without_blank_lines_and_crlf():
    po = 'msgid "a"\r\nmsgstr "A"\r\nmsgid "b"\r\nmsgstr ""\r\n"B1"\r\n"B2"\r\n'
    assert [(e.msgid, e.msgstr) for e in parse_po(po)] == [("a", ("A",)), ("b", ("B1B2",))]


def test_parse_po_rejects_garbage_naming_the_line():
    with pytest.raises(PoSyntaxError, match="line 3"):
        parse_po('msgid "a"\nmsgstr "A"\nthis is not po\n')


def test_decode_po_uses_declared_charset():
    po = 'msgid ""\nmsgstr "Content-Type: text/plain; charset=BIG5\\n"\n\nmsgid "x"\nmsgstr "中文"\n'
    assert "中文" in extract.decode_po(po.encode("big5"))
    assert extract.decode_po('msgid "x"\nmsgstr "ü"\n'.encode()) == 'msgid "x"\nmsgstr "ü"\n'


@pytest.mark.parametrize("locale, lang", [
    ("de", "de"), ("pt_BR", "pt"), ("zh_Hans", "zh"), ("zh_TW.Big5", "zh"), ("sr_Latn", "sr"),
    ("nb_NO", "nb"), ("ja", "ja"), ("ast", None), ("ckb", None), ("ca@valencia", None),
])
def test_locale_lang(locale, lang):
    assert extract.locale_lang(locale) == lang


# --- extraction from a wheel -------------------------------------------------------------

def _wheel(tmp_path: Path, files: dict[str, str]) -> zipfile.ZipFile:
    path = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return zipfile.ZipFile(path)


def test_po_docs_one_document_per_catalog(tmp_path):
    ja = 'msgid "Save"\nmsgstr "保存"\n\nmsgid "Delete"\nmsgstr "削除"\n'
    whl = _wheel(tmp_path, {
        "pkg/locale/de/LC_MESSAGES/django.po": SAMPLE_PO,
        "pkg/locale/ja/LC_MESSAGES/django.po": ja,
        "pkg/contrib/admin/locale/ja/LC_MESSAGES/djangojs.po": 'msgid "Now"\nmsgstr "現在"\n',
        "pkg/locale/en_GB/LC_MESSAGES/django.po": 'msgid "Color"\nmsgstr "Colour"\n',
        "pkg/locale/ast/LC_MESSAGES/django.po": 'msgid "Save"\nmsgstr "Guardar"\n',
        "pkg/locale/fr/LC_MESSAGES/django.po": 'msgid "Save"\nmsgstr ""\n',  # nothing translated
        "pkg/locale/de/LC_MESSAGES/django.mo": "binary",
    })
    pkg = Package("pkg", "1.0", "pkg-1.0-py3-none-any.whl", "0" * 64, ("po",), "")
    docs = list(extract.po_docs(whl, pkg))
    assert docs == [
        Doc("現在", "ja", "pkg==1.0:pkg/contrib/admin/locale/ja/LC_MESSAGES/djangojs.po"),
        Doc(catalog_document(parse_po(SAMPLE_PO)), "de", "pkg==1.0:pkg/locale/de/LC_MESSAGES/django.po"),
        Doc("保存\n削除", "ja", "pkg==1.0:pkg/locale/ja/LC_MESSAGES/django.po"),
    ]


def test_code_budget_and_generated_files(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n" * 10)
    (tmp_path / "b.py").write_text("y = 2\n" * 10)
    (tmp_path / "gen.py").write_text("# Auto-generated by a tool, DO NOT EDIT\nz = 3\n")
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "t.py").write_text("assert True\n")
    docs = list(extract.stdlib_code_docs(tmp_path, budget=100))
    assert len(docs) == 1 and docs[0].lang == "code"  # 60 + 60 > 100: only one fits
    assert docs[0].source.endswith(("Lib/a.py", "Lib/b.py"))
    assert len(list(extract.stdlib_code_docs(tmp_path, budget=1000))) == 2


def test_pydoc_topics_are_english_reference_text():
    docs = list(extract.pydoc_topic_docs())
    assert len(docs) > 50 and {d.lang for d in docs} == {"en"}
    assert any("assignment statement" in d.text.lower() for d in docs)


# --- assembly and output --------------------------------------------------------------------

def test_assemble_dedupes_and_order_is_independent_of_input_order():
    docs = [Doc(f"text {i}", "de" if i % 2 else "ja", f"p==1:{i}") for i in range(20)]
    docs += [Doc("text 3", "fr", "p==1:dup"), Doc("  \n", "fr", "p==1:blank")]
    a = output.assemble(docs)
    assert len(a) == 20 and {d.source for d in a} == {f"p==1:{i}" for i in range(20)}
    assert output.assemble(reversed(docs[:20])) == a
    assert a != docs[:20]  # mixed, not in input order


@pytest.mark.parametrize("sizes, n", [([1] * 10, 3), ([100, 1, 1, 1], 3), ([5], 6), ([], 6), ([3, 3], 6)])
def test_row_group_bounds_cover_everything_in_order(sizes, n):
    bounds = output.row_group_bounds(sizes, n)
    assert len(bounds) <= n
    flat = [i for a, b in bounds for i in range(a, b)]
    assert flat == list(range(len(sizes)))
    assert all(b > a for a, b in bounds)


def test_write_parquet_schema_zstd_row_groups(tmp_path):
    docs = [Doc(f"документ {i} 文書", ["ru", "ja", "code"][i % 3], f"p==1:{i}") for i in range(30)]
    info = output.write_parquet(docs, tmp_path / "part-00000.parquet", row_groups=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-00000.parquet"]  # no temp left
    f = pq.ParquetFile(tmp_path / "part-00000.parquet")
    assert f.metadata.num_row_groups == info["row_groups"] == 4
    assert str(f.schema_arrow) == "text: string\nlang: string\nsource: string"
    assert f.metadata.row_group(0).column(0).compression == "ZSTD"
    t = f.read()
    assert t.column("text").to_pylist() == [d.text for d in docs]
    assert t.column("lang").to_pylist() == [d.lang for d in docs]
    assert info["rows"] == 30 and info["bytes"] == (tmp_path / "part-00000.parquet").stat().st_size


def test_summary_lines_one_per_language():
    docs = [Doc("ab", "de", "x==1:a"), Doc("字字", "zh", "y==2:b"), Doc("c", "de", "y==2:c")]
    table = output.language_table(docs)
    assert list(table) == ["zh", "de"]  # by bytes: 字字 is 6
    assert table["de"] == {"docs": 2, "bytes": 3, "sources": ["x==1", "y==2"]}
    lines = output.summary_lines(table)
    assert len(lines) == 2 and lines[1].split()[:2] == ["de", "2"]


def test_pins_are_exact():
    for p in PACKAGES:
        assert p.filename.startswith(f"{p.name}-{p.version}-") and p.filename.endswith(".whl")
        assert len(p.sha256) == 64 and int(p.sha256, 16) >= 0


# --- the real thing ---------------------------------------------------------------------------

@pytest.mark.slow
def test_real_build_then_up_to_date(tmp_path):
    """Downloads the pinned wheels (cached in work/.demo-cache) and builds the corpus."""
    out = tmp_path / "demo-corpus"
    cache = ROOT / "work" / ".demo-cache"
    cmd = [sys.executable, str(SCRIPT), "--out", str(out), "--cache", str(cache)]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    assert "demo corpus built" in first.stdout

    manifest = json.loads((out / "sources.json").read_text())
    langs = manifest["languages"]
    assert len([lang for lang in langs if lang != "code"]) >= 10
    assert {"zh", "ja", "ko", "ru", "el", "ar", "hi", "en"} <= set(langs)
    assert langs["code"]["bytes"] >= 1_000_000
    total = sum(r["bytes"] for r in langs.values())
    assert 5e6 <= total <= 20e6
    for s in manifest["sources"]:
        assert s["licence"] and s["docs"] > 0

    t = pq.read_table(out / "part-00000.parquet")
    assert t.num_rows == sum(r["docs"] for r in langs.values())
    assert pq.ParquetFile(out / "part-00000.parquet").metadata.num_row_groups > 1
    assert set(t.column("lang").to_pylist()) == set(langs)
    texts = t.column("text").to_pylist()
    assert len(set(texts)) == len(texts)
    ja = "".join(x for x, lang in zip(texts, t.column("lang").to_pylist()) if lang == "ja")
    assert any("\u3040" <= c <= "\u30ff" for c in ja) and any("\u4e00" <= c <= "\u9fff" for c in ja)
    assert "README.md" in {p.name for p in out.iterdir()}

    before = (out / "part-00000.parquet").stat().st_mtime_ns
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and "up to date" in second.stdout
    assert (out / "part-00000.parquet").stat().st_mtime_ns == before
    assert len(second.stdout.splitlines()) == len(langs) + 1


# --- fetching and the whole script, offline ---------------------------------------------------

def _fake_pkg(tmp_path: Path, files: dict[str, str]) -> tuple[Package, bytes]:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    whl = _wheel(src, {"pkg-1.0.dist-info/METADATA": "Name: pkg\nLicense-Expression: MIT\n", **files})
    data = Path(whl.filename).read_bytes()
    import hashlib

    pkg = Package("pkg", "1.0", "pkg-1.0-py3-none-any.whl", hashlib.sha256(data).hexdigest(), ("po",), "")
    return pkg, data


def test_fetch_uses_cache_replaces_bad_files_and_checks_pins(tmp_path, monkeypatch):
    from demo_corpus import fetch as fetch_mod

    pkg, data = _fake_pkg(tmp_path, {})
    cache = tmp_path / "cache"
    calls = []

    def fake_pip(cmd, **kw):
        calls.append(cmd)
        dest = Path(cmd[cmd.index("--dest") + 1])
        if not (dest / pkg.filename).exists():  # pip keeps a file it finds
            (dest / pkg.filename).write_bytes(payload)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(fetch_mod.subprocess, "run", fake_pip)
    payload = data
    assert fetch_mod.fetch(pkg, cache).read_bytes() == data and len(calls) == 1
    assert "pkg==1.0" in calls[0] and "--no-deps" in calls[0]
    fetch_mod.fetch(pkg, cache)
    assert len(calls) == 1  # cached: pip not asked again

    (cache / pkg.filename).write_bytes(b"truncated")
    assert fetch_mod.fetch(pkg, cache).read_bytes() == data and len(calls) == 2

    (cache / pkg.filename).unlink()
    payload = b"not the pinned wheel"
    with pytest.raises(fetch_mod.FetchError, match="pinned"):
        fetch_mod.fetch(pkg, cache)

    monkeypatch.setattr(fetch_mod.subprocess, "run",
                        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution"))
    (cache / pkg.filename).unlink()
    with pytest.raises(fetch_mod.FetchError, match="No matching distribution"):
        fetch_mod.fetch(pkg, cache)


def _script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo_corpus_script", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_script_builds_then_is_up_to_date_offline(tmp_path, monkeypatch, capsys):
    script = _script()
    pkg, data = _fake_pkg(tmp_path, {
        "pkg/locale/de/LC_MESSAGES/django.po": SAMPLE_PO,
        "pkg/locale/ja/LC_MESSAGES/django.po": 'msgid "Save"\nmsgstr "保存する"\n',
    })
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / pkg.filename).write_bytes(data)  # cached: no pip
    monkeypatch.setattr(script, "PACKAGES", (pkg,))
    monkeypatch.setattr(script.extract, "stdlib_code_docs", lambda: iter([Doc("x = 1\n", "code", "py:a.py")]))
    monkeypatch.setattr(script.extract, "pydoc_topic_docs", lambda: iter([Doc("Prose.", "en", "py:t")]))
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-00007.parquet").write_bytes(b"stale")

    assert script.main(["--out", str(out), "--cache", str(cache)]) == 0
    first = capsys.readouterr().out
    assert "demo corpus built" in first and "MB of text in 4 language groups" in first
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "part-00000.parquet", "sources.json"]
    manifest = json.loads((out / "sources.json").read_text())
    assert [s["licence"] for s in manifest["sources"]] == ["MIT", "PSF-2.0", "PSF-2.0"]
    assert manifest["sources"][0]["languages"] == ["de", "ja"]
    t = pq.read_table(out / "part-00000.parquet")
    assert sorted(t.column("lang").to_pylist()) == ["code", "de", "en", "ja"]

    mtime = (out / "part-00000.parquet").stat().st_mtime_ns
    assert script.main(["--out", str(out), "--cache", str(cache)]) == 0
    second = capsys.readouterr().out
    assert "up to date" in second and (out / "part-00000.parquet").stat().st_mtime_ns == mtime
    assert second.splitlines()[:-1] == first.splitlines()[-5:-1]  # the same per-language lines

    # A changed pin (or a damaged file) means a rebuild.
    (out / "part-00000.parquet").write_bytes(b"damaged")
    assert script.main(["--out", str(out), "--cache", str(cache)]) == 0
    assert "built" in capsys.readouterr().out
    assert pq.read_table(out / "part-00000.parquet").num_rows == 4


def test_script_reports_fetch_errors_in_one_line(tmp_path, monkeypatch, capsys):
    script = _script()
    pkg, _ = _fake_pkg(tmp_path, {})

    def no_network(p, cache):
        raise script.FetchError(f"pip could not download {p.spec}: ERROR: network unreachable")

    monkeypatch.setattr(script, "PACKAGES", (pkg,))
    monkeypatch.setattr(script, "fetch", no_network)
    assert script.main(["--out", str(tmp_path / "out"), "--cache", str(tmp_path / "c")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("Error: pip could not download pkg==1.0")
    assert not (tmp_path / "out" / "sources.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["django", "sphinx", "wagtail"])
def test_parse_po_agrees_with_the_shipped_mo_files(name):
    """Every catalog against the .mo its maintainers compiled (read by the stdlib's gettext).

    msgfmt leaves out fuzzy and empty entries; Sphinx's compiler also fills untranslated
    plural forms with the English, which the comparison drops on both sides.
    """
    import gettext
    import io

    from demo_corpus.fetch import fetch

    pkg = next(p for p in PACKAGES if p.name == name)
    whl = zipfile.ZipFile(fetch(pkg, ROOT / "work" / ".demo-cache"))
    names = set(whl.namelist())
    pairs = sorted(n for n in names if n.endswith(".po") and n[:-3] + ".mo" in names)
    assert len(pairs) > 50
    for po_name in pairs:
        entries = parse_po(extract.decode_po(whl.read(po_name)))
        english = {e.msgid for e in entries} | {e.msgid_plural for e in entries}
        mine = {}
        for e in entries:
            if e.msgid == "" or e.fuzzy:
                continue
            key = e.msgid if e.msgctxt is None else f"{e.msgctxt}\x04{e.msgid}"
            forms = {key: e.msgstr[0]} if e.msgid_plural is None else {(key, i): s for i, s in enumerate(e.msgstr)}
            mine.update({k: s for k, s in forms.items() if s and s not in english})
        mo = gettext.GNUTranslations(io.BytesIO(whl.read(po_name[:-3] + ".mo")))
        ref = {k: v for k, v in mo._catalog.items()
               if v and v not in english and k != "" and not (isinstance(k, tuple) and k[0] == "")}
        assert mine == ref, po_name
