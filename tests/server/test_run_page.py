"""The run page (the history site served live from the store), in a real headless Chromium."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.reports.conftest import Browser, DomIndex, browser  # noqa: F401
from tests.server.conftest import KEYS, Service

PAYLOAD = "<script>document.title='PWNED'</script><img src=x onerror=\"console.log('XSS-RAN')\">"


def _dump(browser: Browser, url: str) -> tuple[str, list[str]]:  # noqa: F811
    proc = browser._run(["--virtual-time-budget=3000", "--dump-dom"], url)
    assert proc.returncode == 0, proc.stderr[-3000:]
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return proc.stdout, console


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_run_page_lists_runs_shows_one_and_compares_in_chromium(
    service_factory: Any,
    browser: Browser,  # noqa: F811
) -> None:
    svc: Service = service_factory()
    rows = svc.root / "golden" / "demo" / "demo.jsonl"
    hostile = {"id": "hostile", "prompt": f"Say welcome {PAYLOAD}", "expect": {"regex": "Welcome"}}
    rows.write_text(rows.read_text() + json.dumps(hostile) + "\n")
    (svc.root / "golden" / "demo" / "fixtures" / "hostile.out.md").write_text(f"Welcome {PAYLOAD}")
    svc.serve()
    with svc.client("EVAL") as client:
        first = client.post("/api/eval/runs", json={"dataset": "demo-v1"}).json()["id"]
        svc.wait_status(first)
        second = client.post("/api/eval/runs", json={"dataset": "demo-v1", "idempotencyKey": "2"})
        second_id = second.json()["id"]
        run = svc.wait_status(second_id)
    assert run["status"] == "COMPLETED"
    base = svc.server.base_url  # type: ignore[union-attr]
    authed = base.replace("http://", f"http://viewer:{KEYS['EVAL']}@")

    index, console = _dump(browser, f"{authed}/ui/")
    dom = DomIndex(index)
    assert dom.title == "Golden evaluation history"
    assert "2 runs." in index
    links = [a.get("href") for t, a in dom.elements if t == "a"]
    assert f"runs/{first}.html" in links and f"runs/{second_id}.html" in links
    # Per-case results are on each run's page: the paged index reads summaries only.
    assert "runs a page, newest first" in index
    assert console == [], console

    page, console = _dump(browser, f"{authed}/ui/runs/{second_id}.html?compare={first}")
    dom = DomIndex(page)
    assert dom.title.startswith("Run ")
    assert run["storeRunId"] in page
    assert "UNCHANGED_PASS" in page  # the comparison with the first run, per case
    assert "greeting" in page and "order-number" in page and "hostile" in page
    assert "PWNED" not in dom.title and not dom.with_attr("onerror")
    assert not [s for s in dom.scripts if "PWNED" in s]
    assert console == [], console

    # Without a key the browser gets the Basic challenge, not the page.
    anonymous = httpx.get(f"{base}/ui/")
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Basic")
    monitor = httpx.get(f"{base}/ui/", auth=("m", KEYS["MONITOR"]))
    assert monitor.status_code == 403
    page_headers = httpx.get(f"{base}/ui/", auth=("v", KEYS["EVAL"])).headers
    assert "default-src 'none'" in page_headers["content-security-policy"]
