"""Variants through the evaluation service (issue 35): ``variants`` in ``POST /runs``, checked
against the dataset's manifest when the run is queued, run side by side by a worker like
``pytest --golden-variants=...``, its verdict the session's (the paired comparison included),
each attempt's variant in the results, and the run page showing the comparison's matrix.
SQLite and PostgreSQL."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.server.conftest import KEYS, Service

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "prompt-ab" / "golden" / "faq-ab"


def _with_prompt_ab(svc: Service, broken: str | None = None) -> None:
    target = svc.root / "golden" / "faq-ab"
    shutil.copytree(EXAMPLE, target)
    if broken is not None:
        (target / "fixtures" / "concise" / f"{broken}.out.md").write_text("I do not know.")


def test_variants_run_side_by_side_and_the_verdict_is_the_session_s(
    service_factory: Any,
) -> None:
    svc: Service = service_factory()
    _with_prompt_ab(svc)
    svc.serve()
    with svc.client("EVAL") as client:
        bad = client.post(
            "/api/eval/runs", json={"dataset": "faq-ab-v1", "variants": ["control", "terse"]}
        )
        assert bad.status_code == 422
        assert "no variant 'terse' (declared: control, concise)" in bad.text
        none = client.post("/api/eval/runs", json={"dataset": "demo-v1", "variants": ["a"]})
        assert none.status_code == 422 and "the manifest has no variants" in none.text
        shape = client.post("/api/eval/runs", json={"dataset": "faq-ab-v1", "variants": ["../x"]})
        assert shape.status_code == 422 and "is not a variant name" in shape.text
        # One baseline run for two variants' runs: refused now, not a worker's exit 4 later.
        both = client.post("/api/eval/runs", json={"dataset": "faq-ab-v1", "baselineRunId": "x"})
        assert both.status_code == 422 and "each against its own baseline" in both.text

        created = client.post(
            "/api/eval/runs", json={"dataset": "faq-ab-v1", "variants": ["control", "concise"]}
        )
        assert created.status_code == 202, created.text
        run = svc.wait_status(created.json()["id"])
        assert run["status"] == "COMPLETED", run
        assert run["exitCode"] == 0 and run["passed"] is True, run
        assert "concise vs control: NON_INFERIOR" in run["exitDecision"]["reason"]
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = client.get(
                f"/api/eval/runs/{created.json()['id']}/results",
                params={"limit": 50, **({"cursor": cursor} if cursor else {})},
            ).json()
            items += page["items"]
            cursor = page["nextCursor"]
            if cursor is None:
                break
        assert len(items) == 80
        assert sorted({i["variant"] for i in items}) == ["concise", "control"]
        # Its stored run holds both variants: no comparison of it as one run.
        compared = client.get(
            f"/api/eval/runs/{created.json()['id']}/compare/{created.json()['id']}"
        )
        assert compared.status_code == 409, compared.text
        assert compared.json()["type"] == "/problems/variant-session"

    base = svc.server.base_url  # type: ignore[union-attr]
    import httpx

    page = httpx.get(
        f"{base}/ui/runs/{created.json()['id']}.html", auth=("viewer", KEYS["EVAL"]), timeout=30
    )
    assert page.status_code == 200, page.text[-2000:]
    assert "NON_INFERIOR" in page.text
    assert 'class="goldeval-matrix"' in page.text


def test_one_variant_that_regressed_is_not_a_green_service_run(service_factory: Any) -> None:
    svc: Service = service_factory()
    _with_prompt_ab(svc, broken="price-a-map-of-winter")
    svc.serve()
    with svc.client("EVAL") as client:
        created = client.post("/api/eval/runs", json={"dataset": "faq-ab-v1"})
        assert created.status_code == 202, created.text
        run = svc.wait_status(created.json()["id"])
    assert run["exitCode"] == 1 and run["passed"] is False, run
    assert run["exitDecision"]["code"] == 1
