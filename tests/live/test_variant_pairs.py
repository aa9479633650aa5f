"""Every pair of a variant session (issue 35): ``gate.compare.pairs`` against the real fake
model server on 127.0.0.1, serially and under two xdist workers.

Three variants: ``control`` and ``candidate`` answer alike (m-good, m-same); ``worse``
(m-bad) answers "broken" to every row, so the pairs with it differ on all ten cases and the
pair without it on none.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from goldeval.testing.llm_server import FakeLLMServer
from tests.live.test_variants import _break, _live

THREE = """
variants:
  - {name: control, model: m-good}
  - {name: candidate, model: m-same}
  - {name: worse, model: m-bad}
"""


def _manifest(project: Path, compare: str, variants: str = THREE) -> None:
    path = project / "golden/generation/dataset.yaml"
    text = path.read_text(encoding="utf-8") + variants
    text = text.replace("\ngate:\n", "\ngate:\n  compare: " + compare + "\n", 1)
    path.write_text(text, encoding="utf-8")


def _comparison(project: Path) -> dict[str, Any]:
    runs = [json.loads(p.read_text()) for p in (project / ".goldeval/runs").glob("*/run.json")]
    assert {r["variant"] for r in runs} == {"control", "candidate", "worse"}
    (cmp,) = {json.dumps(r["variantComparison"], sort_keys=True) for r in runs}
    return json.loads(cmp)


def test_all_pairs_are_compared_with_holm_adjusted_p_values(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
    plugin_args: list[str],
) -> None:
    _manifest(
        golden_project,
        "{control: control, candidate: candidate, nonInferiority: 0.3, pairs: all}",
    )
    _break(llm_server, lambda prompt: True)
    result = pytester.runpytest(
        *_live(llm_server, "--html=report.html", "--self-contained-html", "--golden-attempts=2"),
        *plugin_args,
    )
    cmp = _comparison(golden_project)
    # Only the named pair gates: 10 identical cases are within a 30-point margin.
    assert cmp["decision"] == "NON_INFERIOR", result.stdout.str()
    pairs = cmp["pairs"]
    assert (pairs["mode"], pairs["correction"]) == ("all", "holm")
    rows = {(r["control"], r["candidate"]): r for r in pairs["rows"]}
    assert list(rows) == [("control", "candidate"), ("control", "worse"), ("candidate", "worse")]
    assert [r["gated"] for r in rows.values()] == [True, False, False]
    same = rows[("control", "candidate")]
    assert (same["controlOnly"], same["candidateOnly"], same["pValue"]) == (0, 0, None)
    assert same["adjustedPValue"] is None
    # The gated pair's row carries the same figures as the comparison itself.
    assert same["ci95"] == cmp["ci95"] and same["difference"] == cmp["difference"]
    for key in (("control", "worse"), ("candidate", "worse")):
        row = rows[key]
        assert (row["cases"], row["controlOnly"], row["candidateOnly"]) == (10, 10, 0)
        assert row["pValue"] == pytest.approx(2 / 2**10)  # exact McNemar, 10 discordant
        # Holm over 3 pairs (the pair with no discordant case counts as p = 1): 3p, then 2p,
        # kept at the running maximum 3p.
        assert row["adjustedPValue"] == pytest.approx(3 * 2 / 2**10)
        assert row["nonInferiority"] == "FAIL" and row["difference"] == -1.0
    result.stdout.fnmatch_lines(
        [
            "*variants: candidate vs control: NON_INFERIOR*",
            "*pair candidate vs control (gated) | 10 | +0.0%*within the margin",
            "*pair worse vs control | 10 | -100.0%*| 10 / 0 | 0.001953 | 0.005859 | worse beyond*",
            "*pair worse vs candidate | 10 |*",
        ]
    )
    reports = list((golden_project / ".goldeval/runs").glob("*/report.md"))
    assert len(reports) == 3
    for report in reports:
        text = report.read_text(encoding="utf-8")
        assert "Pairs (every pair; " in text
        assert "| worse vs control | 10 | -100.0% |" in text
    page = (golden_project / "report.html").read_text(encoding="utf-8")
    assert '<table class="goldeval-pairs">' in page
    assert "<td>worse vs candidate</td>" in page
    # every variant's pass@k curve, in run.json, as pass-at-k.svg beside report.md and inline
    curves = {c["variant"]: c for c in cmp["passAtK"]}
    assert list(curves) == ["control", "candidate", "worse"]
    for name, expected in (("control", 1.0), ("candidate", 1.0), ("worse", 0.0)):
        assert [(r["k"], r["passAtK"], r["passHatK"]) for r in curves[name]["byK"]] == [
            (1, expected, expected),
            (2, expected, expected),
        ]
    for report in reports:
        assert "![pass@k by variant](pass-at-k.svg)" in report.read_text(encoding="utf-8")
        svg = ET.parse(report.parent / "pass-at-k.svg").getroot()
        groups = svg.findall("{http://www.w3.org/2000/svg}g")
        assert [g.get("data-variant") for g in groups] == ["control", "candidate", "worse"]
    assert '<svg class="goldeval-passk"' in page


def test_each_against_the_control_is_the_default(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    _manifest(golden_project, "{control: candidate, candidate: worse, nonInferiority: 0.05}")
    _break(llm_server, lambda prompt: True)
    result = pytester.runpytest(*_live(llm_server))
    assert result.ret == 1  # the gated pair, worse vs candidate, is INFERIOR
    cmp = _comparison(golden_project)
    assert cmp["decision"] == "INFERIOR"
    pairs = cmp["pairs"]
    assert pairs["mode"] == "control"
    assert [(r["control"], r["candidate"], r["gated"]) for r in pairs["rows"]] == [
        ("candidate", "control", False),
        ("candidate", "worse", True),
    ]


def test_too_many_pairs_is_a_usage_error_before_any_call(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    nine = "\nvariants:\n" + "".join(f"  - {{name: v{i}, model: m{i}}}\n" for i in range(9))
    _manifest(
        golden_project, "{control: v0, candidate: v1, nonInferiority: 0.05, pairs: all}", nine
    )
    result = pytester.runpytest(*_live(llm_server))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*gate.compare.pairs: all over 9 variants makes 36 pairs, at most 28*--golden-variants*"]
    )
    assert llm_server.requests == []
    # Picking eight of them is 28 pairs: accepted.
    picked = ",".join(f"v{i}" for i in range(8))
    ok = pytester.runpytest(*_live(llm_server, f"--golden-variants={picked}", "--collect-only"))
    assert ok.ret == pytest.ExitCode.OK, ok.stderr.str()


def test_models_side_by_side_take_no_baseline_option(  # issue 35: never silently ignored
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    for option in ("--golden-baseline=baselines/x.json", "--golden-save-baseline=x.json"):
        result = pytester.runpytest(
            "--golden=generation-v1",
            "--golden-mode=live",
            f"--golden-base-url={llm_server.base_url}",
            "--golden-models=m1,m2",
            option,
        )
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*cannot be combined with --golden-models*"])
    assert not llm_server.requests
