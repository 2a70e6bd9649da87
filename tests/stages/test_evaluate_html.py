"""report.html opens in headless Chromium with no network: every chart is a drawn SVG and
the page is not blank."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from stages.evaluate.report_html import write_report
from stages.evaluate.run import evaluate

from .test_evaluate import built  # noqa: F401 - the module's builds, reused

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
CHARTS = {"id-space", "bytes-per-token", "change", "weights", "han", "digits", "parallel", "stage-times"}


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (make browser)")
def test_report_renders_in_headless_chromium(built, tmp_path):  # noqa: F811
    sync_api = pytest.importorskip("playwright.sync_api")
    import matplotlib.image

    corpus, works = built
    par = tmp_path / "par"
    par.mkdir()
    (par / "en.txt").write_text("All human beings are born free and equal in dignity.", encoding="utf-8")
    (par / "zh.txt").write_text("人人生而自由，在尊严和权利上一律平等。", encoding="utf-8")
    r = evaluate([works["e.1"], works["e.3"]], corpus=[corpus], parallel=par, threads=1)
    page_path = write_report(r, tmp_path / "out")
    requests = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            ctx = browser.new_context(offline=True, viewport={"width": 1200, "height": 900})
            page = ctx.new_page()
            page.on("request", lambda req: requests.append(req.url))
            page.goto(page_path.as_uri(), wait_until="load")
            charts = page.eval_on_selector_all(
                "figure.chart",
                """els => els.map(f => {
                    const svg = f.querySelector('svg');
                    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
                    const marks = svg ? svg.querySelectorAll('path, rect, use, text').length : 0;
                    return [f.dataset.chart, box.width, box.height, marks];
                })""",
            )
            tinted = page.eval_on_selector_all("table.han span.tok", "els => els.length")
            png = page.screenshot(full_page=True)
        finally:
            browser.close()
    assert {c[0] for c in charts} == CHARTS
    for name, w, h, marks in charts:
        assert w > 100 and h > 50 and marks > 10, name
    assert tinted >= 2 * len("研究就是在不知道自己在做什么的时候所做的事。") // 3
    assert requests == [page_path.as_uri()]  # nothing but the page itself
    img = matplotlib.image.imread(io.BytesIO(png), format="png")
    assert img.shape[0] > 900 and img[..., :3].std() > 0.05  # not one flat colour
