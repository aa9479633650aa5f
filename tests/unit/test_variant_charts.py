"""goldeval.reports.variant_charts: the pass@k curve of a variant session (issue 35)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from goldeval.reports.variant_charts import pass_at_k_chart, pass_at_k_svg
from goldeval.results.documents import PassAtKCurveDoc

SVG = "{http://www.w3.org/2000/svg}"


def _curve(name: str, at: list[float], hat: list[float], ci: bool = True) -> PassAtKCurveDoc:
    rows = [
        {
            "k": k,
            "cases": 10,
            "passAtK": a,
            "passHatK": h,
            **(
                {
                    "passAtKCi95": {
                        "lower": max(0, a - 0.1),
                        "upper": min(1, a + 0.1),
                        "method": "bootstrap-percentile",
                    }
                }
                if ci
                else {}
            ),
        }
        for k, (a, h) in enumerate(zip(at, hat, strict=True), start=1)
    ]
    return PassAtKCurveDoc.model_validate({"variant": name, "cases": 10, "byK": rows})


def test_no_curve_without_repeated_attempts() -> None:
    assert pass_at_k_chart(None) is None and pass_at_k_chart([]) is None
    assert pass_at_k_svg(None) is None


def test_points_sit_on_the_axis_of_their_k_and_value() -> None:
    chart = pass_at_k_chart([_curve("A", [0.5, 0.75, 1.0], [0.5, 0.25, 0.0])])
    assert chart is not None
    ticks = {t["label"]: float(t["y"]) for t in chart["ticks"]}
    xs = [float(k["x"]) for k in chart["ks"]]
    assert [k["label"] for k in chart["ks"]] == ["k=1", "k=2", "k=3"]
    assert xs[0] == chart["left"] and xs[-1] == chart["plot_right"]
    (series,) = chart["series"]
    points = [(float(p["x"]), float(p["y"])) for p in series["points"]]
    assert points == [(xs[0], ticks["50%"]), (xs[1], ticks["75%"]), (xs[2], ticks["100%"])]
    hat = [tuple(map(float, pair.split(","))) for pair in series["hat_k"].split()]
    assert hat == [(xs[0], ticks["50%"]), (xs[1], ticks["25%"]), (xs[2], ticks["0%"])]
    assert series["band"] is not None  # every k has its interval
    assert "A: pass@2 75.0%, pass^2 25.0% (10 cases)" == series["points"][1]["tip"]
    no_band = pass_at_k_chart([_curve("A", [0.5, 1.0], [0.5, 0.2], ci=False)])
    assert no_band is not None and no_band["series"][0]["band"] is None


def test_the_legend_wraps_and_the_chart_grows() -> None:
    two = pass_at_k_chart([_curve(f"v{i}", [0.5, 0.6], [0.5, 0.4]) for i in range(2)])
    seven = pass_at_k_chart([_curve(f"v{i}", [0.5, 0.6], [0.5, 0.4]) for i in range(7)])
    assert two is not None and seven is not None
    assert seven["height"] > two["height"]
    rows = {s["legend_y"] for s in seven["series"]}
    assert len(rows) == 3  # three legend entries a row at 420 pixels
    assert all(s["legend_x"] + 110 <= seven["width"] for s in seven["series"])


def test_the_svg_file_is_well_formed_and_escapes_names() -> None:
    text = pass_at_k_svg(
        [_curve("<b>&", [0.5, 1.0], [0.5, 0.2]), _curve("B", [0.1, 0.2], [0.1, 0])]
    )
    assert text is not None and text.startswith("<?xml")
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == f"{SVG}svg"
    groups = root.findall(f"{SVG}g")
    assert [g.get("data-variant") for g in groups] == ["<b>&", "B"]
    assert len(groups[0].findall(f"{SVG}circle")) == 2
    assert "<b>" not in text
