"""Collection: the dataset file becomes a module whose one test is parametrised by row."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from goldeval.errors import GoldevalError
from goldeval.models import AttemptRecord, Status
from goldeval.session import PAYLOAD_ATTR, RECORD_KEY, GoldenSession, payload_for, state_of


class GoldenModule(pytest.Module):
    """A dataset rows file collected as if it were a test module.

    Its object is :mod:`goldeval.golden_test`, so items are ordinary ``pytest.Function``
    nodes: fixtures, overrides in a conftest, markers and ``-k`` work as usual.
    """

    def _getobj(self) -> ModuleType:
        from goldeval import golden_test

        return golden_test

    def collect(self) -> Any:
        state = state_of(self.config)
        state.load()  # raises GoldevalError: reported as a clean collection error
        for tag in sorted(state.tag_markers()):
            self.config.addinivalue_line("markers", f"{tag}: golden rows tagged {tag!r}")
        return super().collect()

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        if isinstance(excinfo.value, GoldevalError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


def parametrize(metafunc: pytest.Metafunc, state: GoldenSession) -> None:
    # One MarkDecorator per marker name, shared by every item that carries it.
    cache: dict[str, Any] = {}

    def mark(name: str) -> Any:
        decorator = cache.get(name)
        if decorator is None:
            decorator = cache[name] = getattr(pytest.mark, name)
        return decorator

    params = []
    for p in state.params():
        names = (("red",) if p.case.red else ()) + p.case.tags
        params.append(pytest.param(p, marks=[mark(n) for n in names], id=p.id))
    # indirect: one real fixture serves every item; direct parametrisation would make pytest
    # build a pseudo fixture definition per item, which dominated per-item cost at scale.
    metafunc.parametrize("golden_param", params, indirect=True)


def _record_without_grading(
    item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
) -> AttemptRecord | None:
    """A record for an item that never reached grading: skipped or broken before the call.

    Every selected item must appear in the run exactly once, or a skip would silently shrink
    the denominator; a fixture that crashed is infrastructure (ERROR), never a FAIL.
    """
    if call.when == "teardown" or (call.when == "setup" and report.passed):
        return None
    param = item.callspec.params["golden_param"]  # type: ignore[attr-defined]
    base = {"case_id": param.case.id, "index": param.attempt, "model": param.model}
    message = _short_reason(report)
    if report.skipped:
        return AttemptRecord(
            **base, status=Status.SKIPPED, skip_reason=message, error_message=message
        )
    if report.failed:
        return AttemptRecord(
            **base,
            status=Status.ERROR,
            error_kind="SETUP_ERROR" if call.when == "setup" else "TEST_ERROR",
            error_message=message,
        )
    return None


def _short_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    text = str(getattr(report, "longreprtext", "") or longrepr or "")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else "unknown")[:500]


def attach_record(
    item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
) -> None:
    """Put the attempt's plain-data record on the report that decides its outcome."""
    record = item.stash.get(RECORD_KEY, None)
    if record is None:
        record = _record_without_grading(item, call, report)
        if record is None:
            return
        item.stash[RECORD_KEY] = record
    if call.when == "call" or (call.when == "setup" and (report.failed or report.skipped)):
        if getattr(report, PAYLOAD_ATTR, None) is None:
            payload = payload_for(item, record)
            setattr(report, PAYLOAD_ATTR, payload)
            # The record now travels on the report; keeping it on the item too would hold
            # every attempt in memory for the whole session.
            del item.stash[RECORD_KEY]
            if item.config.getini("golden_junit_properties"):
                a = payload["attempt"]
                props = [
                    ("golden.case", a["caseId"]),
                    ("golden.attempt", str(a["index"])),
                    ("golden.status", a["status"]),
                    ("golden.durationMs", str(a.get("durationMs", 0))),
                ]
                if a.get("contract") is not None:
                    props.append(("golden.contract", "PASS" if a["contract"]["passed"] else "FAIL"))
                if a.get("retrieval") is not None:
                    props.append(
                        ("golden.retrieval", ",".join(a["retrieval"].get("retrieved", [])))
                    )
                if a.get("judge") is not None:
                    props.append(("golden.judge", a["judge"]["decision"]))
                tokens = a.get("tokens") or {}
                if tokens.get("totalTokens") is not None:
                    props.append(("golden.tokens", str(tokens["totalTokens"])))
                item.user_properties.extend(props)


def deselect_graded(config: pytest.Config, state: GoldenSession, items: list[pytest.Item]) -> None:
    """``--golden-run-key``: attempts graded in an earlier session of the run are not rerun."""
    from goldeval.storage import already_graded

    graded = already_graded(state)
    if not graded:
        return
    keep: list[pytest.Item] = []
    done: list[pytest.Item] = []
    default_model = (
        state.settings.provider.model if state.settings.mode.value != "fixture" else None
    )
    for item in items:
        callspec = getattr(item, "callspec", None)
        param = callspec.params.get("golden_param") if callspec is not None else None
        key = None
        if param is not None:
            key = (param.case.id, param.attempt, param.model or default_model or "")
        (done if key in graded else keep).append(item)
    if done:
        config.hook.pytest_deselected(items=done)
        items[:] = keep
