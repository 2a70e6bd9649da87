"""`dwstok page` in a real browser: headless Chromium loads the generated site from
file:// and ``window.dwstokEncode`` must give dwstok's ids for every model, tiktoken's
for GPT-2 and o200k and sentencepiece's for Mistral.

Skipped when /usr/bin/chromium or playwright is missing (Debian: apt-get install chromium).
The timings (page ready, re-tokenizing 10 KB) are printed, not asserted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dwstok_cli.main import cli
from tests.stages.bpe_models import corpus_merges, dwslm_model

CHROMIUM = "/usr/bin/chromium"
MODELS = {"32.1": "o200k", "32.3": "o200k-rdigits"}
N_DEV_DEFAULT = 60  # documents in the default suite; all 300 under -m slow


def hostile(specials) -> list[str]:
    return [
        "",
        " " * 2000,
        "1" * 2000,
        "x" + " " * 700 + "y\n\n\n   \t\n",
        "12345678901234567890 1,234,567.89 ٠١٢٣٤٥٦٧٨٩ ４５６",
        "\u0301",
        "\u0301\u0302\u0303 a\u0301 \u05b7",
        "👨‍👩‍👧‍👦 🏳️‍🌈 👩🏾‍🔬 \u200d\u200d",
        "\x00",
        "a\x00b\x00\x00",
        "He'S I'LL it'ſ WE'VE",
        "\ufeff x\x85y\u3000z\u2028",
        "─" * 900,
        "研究就是在不知道自己在做什么的时候所做的事。",
        "<s></s><unk>",
        *specials,
        " ".join(specials),
    ]


@pytest.fixture(scope="module")
def models(corpus_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    out = {}
    for version, pattern in MODELS.items():
        tok = dwslm_model(corpus_merges(str(corpus_dir / "dev.parquet"), pattern, 1500), pattern=pattern, version=version)
        tok.save(d / f"{version}.json")
        out[version] = tok
    return d, out


@pytest.fixture(scope="module")
def site(models, reftok, tmp_path_factory):
    from click.testing import CliRunner

    d, _ = models
    out = tmp_path_factory.mktemp("site")
    r = CliRunner().invoke(
        cli, ["page", str(d / "32.1.json"), str(d / "32.3.json"), "--out", str(out), "--reference-dir", str(reftok)]
    )
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture(scope="module")
def references(reftok, tiktoken_cache):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    sentencepiece = pytest.importorskip("sentencepiece")
    enc = json.loads((reftok / "encodings.json").read_text())["encodings"]

    def tt(key):
        e = enc[key]
        return tiktoken.Encoding(
            key, pat_str=e["pat_str"], mergeable_ranks=load_tiktoken_bpe(str(reftok / e["file"])), special_tokens=e["special_tokens"]
        )

    sp = sentencepiece.SentencePieceProcessor(model_file=str(reftok / "mistral7b_v0.1.tokenizer.model"))
    return {"gpt2": tt("r50k_base").encode_ordinary, "o200k": tt("o200k_base").encode_ordinary, "mistral": sp.encode}


@pytest.fixture(scope="module")
def page(site):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        pg = browser.new_page(viewport={"width": 1300, "height": 1000})
        errors = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.route("http*://**", lambda route: route.abort())  # no network: a request fails the test
        pg.goto((site / "index.html").as_uri())
        pg.wait_for_function("document.body.dataset.ready === '1'", timeout=30_000)
        assert not errors, errors
        pg.errors = errors
        yield pg
        browser.close()


def browser_ids(page, name, texts):
    return page.evaluate("([n, ts]) => Promise.all(ts.map((t) => window.dwstokEncode(n, t)))", [name, texts])


def expected(name, texts, models, references):
    if name in references:
        return [references[name](t) for t in texts]
    return [models[1][name].encode(t) for t in texts]


NAMES = ["32.1", "32.3", "gpt2", "o200k", "mistral"]


@pytest.mark.parametrize("name", NAMES)
def test_hostile_parity(page, models, references, name):
    specials = sorted(set(models[1]["32.3"].special_tokens) | {"<|endoftext|>", "<|endofprompt|>"})
    texts = hostile(specials)
    want = expected(name, texts, models, references)
    got = browser_ids(page, name, texts)
    bad = [t[:40] for t, a, b in zip(texts, got, want) if a != b]
    assert not bad, f"{name}: {len(bad)} of {len(texts)} differ: {bad[:3]}"


def dev_texts(corpus_dir, n):
    return pq.read_table(corpus_dir / "dev.parquet", columns=["text"]).column("text").to_pylist()[:n]


def check_dev(page, models, references, corpus_dir, n):
    texts = dev_texts(corpus_dir, n)
    for name in NAMES:
        want = expected(name, texts, models, references)
        got = browser_ids(page, name, texts)
        bad = [k for k, (a, b) in enumerate(zip(got, want)) if a != b]
        assert not bad, f"{name}: documents {bad[:10]} of {n} differ"
        print(f"parity {name}: {n}/{n} documents identical, {sum(map(len, want)):,} tokens")


def test_dev_parity(page, models, references, corpus_dir):
    check_dev(page, models, references, corpus_dir, N_DEV_DEFAULT)


@pytest.mark.slow
def test_dev_parity_300(page, models, references, corpus_dir):
    check_dev(page, models, references, corpus_dir, 300)


def test_unknown_name_rejects(page):
    msg = page.evaluate("window.dwstokEncode('nope', 'x').then(() => 'resolved', (e) => e.message)")
    assert msg.startswith("no tokenizer nope; this page has 32.1, 32.3, gpt2, mistral, o200k")


@pytest.mark.parametrize("mode", ["tokens", "characters", "bytes"])
def test_modes_draw_tokens(page, mode, tmp_path):
    page.evaluate("document.querySelector('#examples button:nth-of-type(3)').click()")  # the Han sentence
    page.evaluate(f"window.dwstokSetMode('{mode}')")
    shot = tmp_path / f"{mode}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    counts = page.evaluate(
        "[...document.querySelectorAll('.panel')].map((p) => [p.dataset.name, p.querySelectorAll('.tok').length,"
        " p.querySelectorAll('sup.n').length, p.querySelectorAll('sub.m').length])"
    )
    assert sorted(c[0] for c in counts) == sorted(NAMES)
    assert all(c[1] > 0 for c in counts)
    by = {c[0]: c for c in counts}
    assert by["gpt2"][2] > 0  # GPT-2 splits Han characters across tokens: marked
    assert all((c[3] > 0) == (mode != "tokens") for c in counts)
    rows = page.evaluate("[...document.querySelectorAll('#table tbody tr')].map((r) => r.cells[0].textContent)")
    assert len(rows) == 5
    assert "o200k has 200,019 ids" in page.inner_text("#vocab-note")
    first = ".panel[data-name='gpt2'] .tok >> nth=0"  # hover: the first Han character's three byte tokens
    page.hover(first)
    assert page.get_attribute(first, "title") == "id 163 · bytes e7\nid 254 · bytes a0\nid 242 · bytes 94"


def test_timings(page, corpus_dir):
    """Page ready time and re-tokenizing 10 KB per tokenizer, printed for the report."""
    text = "\n".join(dev_texts(corpus_dir, 60))[20_000:30_000]
    t = page.evaluate(
        """async (text) => {
          const out = {ready_ms: window.dwstokTimings.ready_ms, cold: {}, retype: {}};
          for (const n of ['32.1', '32.3', 'gpt2', 'o200k', 'mistral']) {
            let s = performance.now(); await window.dwstokEncode(n, text); out.cold[n] = performance.now() - s;
            const times = [];
            for (let i = 0; i < 5; i++) { s = performance.now(); await window.dwstokEncode(n, text + ' edit' + i); times.push(performance.now() - s); }
            out.retype[n] = times.sort((a, b) => a - b)[2];
          }
          const ta = document.getElementById('text'); ta.value = text;
          let s = performance.now(); ta.dispatchEvent(new Event('input'));
          await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
          out.update_all_ms = window.dwstokTimings.update_ms;
          return out;
        }""",
        text,
    )
    print("\npage timings (ms):", json.dumps({k: (round(v) if isinstance(v, (int, float)) else {a: round(b, 1) for a, b in v.items()}) for k, v in t.items()}))
    assert t["ready_ms"] > 0 and set(t["retype"]) == set(NAMES)
