"""The pinned sources of the demo corpus: exact files from PyPI, checked by sha256.

Changing anything here changes the corpus fingerprint, so the next run rebuilds.
Chosen for text that people wrote: translators' catalogs (Django, Sphinx, Wagtail), Korean
law and bill texts (KoNLPy), the Python reference manual (``pydoc_data`` in the
standard library) and source code. ``chatterbot-corpus`` was left out on purpose:
several of its non-English files read as machine-translated, and recent English
files look generated.
"""

from __future__ import annotations

from typing import NamedTuple


class Package(NamedTuple):
    name: str
    version: str
    filename: str  # the exact file pip must return (a pure-Python wheel)
    sha256: str
    parts: tuple[str, ...]  # which extractors in extract.py read it
    homepage: str

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}"


PACKAGES: tuple[Package, ...] = (
    Package(
        name="django",
        version="5.2.19",
        filename="django-5.2.19-py3-none-any.whl",
        sha256="5965d974a5218a2b68a11dd1276434707f23886525c23f0598eccedaf4f4ca00",
        parts=("po", "code"),
        homepage="https://www.djangoproject.com/",
    ),
    Package(
        name="sphinx",
        version="8.2.3",
        filename="sphinx-8.2.3-py3-none-any.whl",
        sha256="4405915165f13521d875a8c29c8970800a0141c14cc5416a38feca4ea5d9b9c3",
        parts=("po",),
        homepage="https://www.sphinx-doc.org/",
    ),
    Package(
        name="wagtail",
        version="7.0.1",
        filename="wagtail-7.0.1-py3-none-any.whl",
        sha256="92439c50a919826a4ce8c85bdaf3ed0e436d29598bb2954b4fca5f312b969666",
        parts=("po",),
        homepage="https://wagtail.org/",
    ),
    Package(
        name="konlpy",
        version="0.6.0",
        filename="konlpy-0.6.0-py2.py3-none-any.whl",
        sha256="0b7928059e20eb1c72f6fe65a3d12c104fae9e68173904e16beef869cf0ea590",
        parts=("konlpy",),
        homepage="https://konlpy.org/",
    ),
)

# Byte budgets for code, so that it is a real share of the corpus but does not swamp it.
CODE_BUDGET = {"django": 1_500_000, "stdlib": 1_500_000}

# Locale directories whose language has an ISO 639-1 code but that add only a variant
# spelling of English (en_GB, en_AU, …) are skipped, as are locales with no ISO 639-1
# code (ast, ckb, dsb, hsb, kab, udm, cak, yue) and @-variants (ca@valencia repeats ca).
SKIP_LANGS = {"en"}
