"""Collection: the dataset file becomes a module whose one test is parametrised by row."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from goldeval.errors import GoldevalError
from goldeval.item_fixtures import PARAM_ARG, param_of
from goldeval.models import AttemptRecord, Status
from goldeval.session import PAYLOAD_ATTR, GoldenSession, payload_for, state_of


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
    # Indirect, on golden_case: the param reaches the fixture that serves it without a
    # fixture of its own in every item's chain (see goldeval.item_fixtures).
    metafunc.parametrize(PARAM_ARG, params, indirect=True)


def _record_without_grading(
    item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
) -> AttemptRecord | None:
    """A record for an item that never reached grading: skipped or broken before the call.

    Every selected item must appear in the run exactly once, or a skip would silently shrink
    the denominator; a fixture that crashed is infrastructure (ERROR), never a FAIL.
    """
    if call.when == "teardown" or (call.when == "setup" and report.passed):
        return None
    param = param_of(item)
    assert param is not None
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
    state = state_of(item.config)
    record = state.records.get(item)
    if record is None:
        record = _record_without_grading(item, call, report)
        if record is None:
            return
        state.records[item] = record
    if call.when == "call" or (call.when == "setup" and (report.failed or report.skipped)):
        if getattr(report, PAYLOAD_ATTR, None) is None:
            payload = payload_for(state, record)
            setattr(report, PAYLOAD_ATTR, payload)
            # The record now travels on the report; keeping it here too would hold every
            # attempt in memory for the whole session.
            del state.records[item]
            if item.config.getini("golden_junit_properties"):
                item.user_properties.extend(junit_properties(record))


def junit_properties(record: AttemptRecord) -> list[tuple[str, str]]:
    """The ``golden.*`` testcase properties of one attempt (``golden_junit_properties``)."""
    props = [
        ("golden.case", record.case_id),
        ("golden.attempt", str(record.index)),
        ("golden.status", record.status.value),
        ("golden.durationMs", str(record.duration_ms or 0)),
    ]
    if record.contract is not None:
        props.append(("golden.contract", "PASS" if record.contract.passed else "FAIL"))
    if record.retrieval is not None:
        props.append(("golden.retrieval", ",".join(record.retrieval.retrieved)))
    if record.judge is not None:
        props.append(("golden.judge", str(record.judge.decision)))
    tokens = record.tokens
    if tokens is not None and tokens.total_tokens is not None:
        props.append(("golden.tokens", str(tokens.total_tokens)))
    return props


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
        param = param_of(item)
        key = None
        if param is not None:
            key = (param.case.id, param.attempt, param.model or default_model or "")
        (done if key in graded else keep).append(item)
    if done:
        config.hook.pytest_deselected(items=done)
        items[:] = keep
