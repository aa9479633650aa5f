"""The pass@k curve (goldeval.reports.variant_charts) as a real headless Chromium reads it:
the standalone file pass-at-k.svg is an SVG document it renders without an error."""

from __future__ import annotations

from pathlib import Path

from goldeval.reports.variant_charts import pass_at_k_svg
from goldeval.results.documents import PassAtKCurveDoc
from tests.reports.conftest import Browser, DomIndex


def test_pass_at_k_svg_renders_in_chromium(browser: Browser, tmp_path: Path) -> None:
    curves = [
        PassAtKCurveDoc.model_validate(
            {
                "variant": name,
                "cases": 4,
                "byK": [
                    {"k": 1, "cases": 4, "passAtK": a, "passHatK": a},
                    {"k": 2, "cases": 4, "passAtK": b, "passHatK": a / 2},
                ],
            }
        )
        for name, a, b in (("control", 0.5, 0.75), ("candidate", 0.25, 0.5))
    ]
    svg = pass_at_k_svg(curves)
    assert svg is not None
    (tmp_path / "pass-at-k.svg").write_text(svg, encoding="utf-8")
    # The file as report.md links it, embedded as a page would: an <img> and inline.
    page = tmp_path / "page.html"
    inline = svg.split("?>", 1)[1]
    page.write_text(
        f'<!DOCTYPE html><html><body><img src="pass-at-k.svg">{inline}</body></html>',
        encoding="utf-8",
    )
    seen = browser.dump_dom(page)
    assert seen.console == []
    index = DomIndex(seen.dom)
    circles = [a for tag, a in index.elements if tag == "circle"]
    assert len(circles) == 4
    assert [a.get("data-variant") for tag, a in index.elements if tag == "g"] == [
        "control",
        "candidate",
    ]
    shot = browser.screenshot(tmp_path / "pass-at-k.svg", tmp_path / "shot.png", "480,300")
    assert shot.console == [] and (tmp_path / "shot.png").stat().st_size > 1000
