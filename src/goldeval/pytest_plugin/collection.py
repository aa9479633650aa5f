"""Collection: the dataset file becomes a module whose one test is parametrised by row."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

# `import a.b.c as x`, not `from a.b import c`: the package goldeval.pytest_plugin outlives
# pytester's in-process runs (the entry point lives in it) and its attribute would hand a later
# run the first run's module, bound to the first run's classes (see hooks._submodule).
import goldeval.pytest_plugin.golden_test as golden_test
from goldeval.core.errors import DatasetError, GoldevalError
from goldeval.core.models import AttemptRecord, Mode, Status
from goldeval.core.textsafe import cut, one_line, safe_text
from goldeval.dataset.rows import fixture_problems
from goldeval.pytest_plugin.adaptive import left_out
from goldeval.pytest_plugin.attempts import attempt_model
from goldeval.pytest_plugin.config_keys import (
    RESUME_DESELECTED,
    RESUME_DESELECTED_OUTPUT,
    TAG_MARKER_DESCRIPTION,
)
from goldeval.pytest_plugin.outcomes import error_kind_of
from goldeval.pytest_plugin.params import PARAM_ARG, param_of
from goldeval.pytest_plugin.recording import already_graded
from goldeval.pytest_plugin.state import PAYLOAD_ATTR, GoldenSession, payload_for, state_of


class GoldenModule(pytest.Module):
    """A dataset rows file collected as if it were a test module.

    Its object is :mod:`goldeval.pytest_plugin.golden_test`, so items are ordinary
    ``pytest.Function``
    nodes: fixtures, overrides in a conftest, markers and ``-k`` work as usual.
    """

    def _getobj(self) -> ModuleType:

        return golden_test

    def collect(self) -> Any:
        state = state_of(self.config)
        state.load()  # raises GoldevalError: reported as a clean collection error
        for tag in sorted(state.tag_markers()):
            self.config.addinivalue_line("markers", f"{tag}: {TAG_MARKER_DESCRIPTION} {tag!r}")
        return super().collect()

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        if isinstance(excinfo.value, GoldevalError):
            return safe_text(excinfo.value)  # may quote a row or manifest value
        return super().repr_failure(excinfo)


def parametrize(metafunc: pytest.Metafunc, state: GoldenSession) -> None:
    # One MarkDecorator per marker name, shared by every item that carries it.
    cache: dict[str, Any] = {}

    def mark(name: str) -> Any:
        decorator = cache.get(name)
        if decorator is None:
            decorator = cache[name] = getattr(pytest.mark, name)
        return decorator

    golden = state.params()
    if not golden:
        # pytest would make one "empty parameter set" item, whose param is no golden one.
        rows = state.load().rows_path
        shown = (
            rows.relative_to(state.project_root)
            if rows.is_relative_to(state.project_root)
            else rows
        )
        raise DatasetError(
            "the rows file has no rows: nothing to evaluate",
            path=shown,
            hint="add one JSON object per line",
        )
    params = []
    for p in golden:
        names = (("red",) if p.case.red else ()) + p.case.tags
        params.append(pytest.param(p, marks=[mark(n) for n in names], id=p.id))
    # Indirect, on golden_answer: the param reaches the one fixture an item sets up, without a
    # fixture of its own in every item's chain (see goldeval.pytest_plugin.fixtures).
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
    state = state_of(item.config)
    param = param_of(item)
    assert param is not None
    # The run's model identity, as a graded attempt carries it: an attempt without it would
    # be folded as another model (two runs "side by side" out of one session).
    base = {"case_id": param.case.id, "index": param.attempt, "model": attempt_model(state, param)}
    if report.skipped:
        message = shown_message(state, _short_reason(report))
        return AttemptRecord(
            **base, status=Status.SKIPPED, skip_reason=message, error_message=message
        )
    if report.failed:
        message = shown_message(state, crash_message(report))
        phase = "SETUP_ERROR" if call.when == "setup" else "TEST_ERROR"
        return AttemptRecord(
            **base,
            status=Status.ERROR,
            error_kind=error_kind_of(message, phase),
            error_message=message,
        )
    return None


def shown_message(state: GoldenSession, text: str) -> str:
    """``text`` (from a report this hook reads before the masking wrapper has masked it) with
    the run's secrets masked, cut keys too: a fixture raising with the key put it whole in
    run.json, the case files and the store."""
    try:
        return state.masker.mask_message(text)
    except GoldevalError:  # the dataset does not load: nothing ran
        return text


def _short_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return cut(one_line(str(longrepr[2]).removeprefix("Skipped: ")), 500)
    return crash_message(report)


def crash_message(report: pytest.TestReport) -> str:
    """Why an item failed, in one line: pytest's crash message, not a traceback's last line.

    The last line of a long report is a location (``conftest.py:6: Failed``), which tells an
    ERROR attempt's reader nothing; the crash message is the exception's own text
    (``Timeout (>2.0s) from pytest-timeout.``, ``KeyError: 'x'``). pytest's ``Failed: ``
    prefix of ``pytest.fail`` is dropped. Shown in reports: control characters escaped.
    """
    crash = getattr(report.longrepr, "reprcrash", None)
    text = str(getattr(crash, "message", "") or "").strip()
    if text:
        text = text.removeprefix("Failed: ")
    else:
        full = str(getattr(report, "longreprtext", "") or report.longrepr or "")
        lines = [ln.strip() for ln in full.splitlines() if ln.strip()]
        # "E   ..." lines hold the exception in a traceback; a plain text report (an xdist
        # crash, a plugin's own text) says it all in its first line.
        errors = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
        crashed = [ln for ln in lines if "crash" in ln.lower()]
        text = (errors or crashed or lines or ["unknown"])[0]
    return cut(one_line(text), 500)


def thread_timeout_hint(config: pytest.Config) -> str:
    """A note for a lost item when pytest-timeout runs with its thread method.

    That method ends the whole process on a timeout (``os._exit``), so under xdist the only
    trace is "worker crashed": the reader is told a timeout is a likely cause. Serially the
    process ends before anything can be written (docs/reliability.md, section 11).
    """
    if not config.pluginmanager.hasplugin("timeout"):
        return ""
    try:
        from pytest_timeout import get_env_settings  # type: ignore[import-untyped,import-not-found,unused-ignore]

        settings = get_env_settings(config)
    except Exception:  # an unknown pytest-timeout version: no hint rather than no run
        return ""
    if not settings.timeout or settings.method != "thread":
        return ""
    return (
        f" (pytest-timeout's thread method ends the process when an item runs over "
        f"{settings.timeout}s: this may be a timeout)"
    )


def attach_record(
    item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
) -> None:
    """Put the attempt's plain-data record on the report that decides its outcome."""
    state = state_of(item.config)
    if left_out(state, item):
        return  # --golden-attempts=auto:MAX left this attempt out: it is no attempt
    record = state.records.get(item)
    if record is None:
        record = _record_without_grading(item, call, report)
        if record is None:
            return
        state.records[item] = record
    elif call.when == "call" and report.failed and record.status is Status.PASS:
        # Graded PASS, yet the call failed after grading (pytest-timeout fired in a hook, a
        # pytest_goldeval_attempt_graded hook raised): pytest reports a failure, so the
        # attempt must not count as a pass. Infrastructure, not a quality verdict.
        message = shown_message(state, crash_message(report))
        record = record.model_copy(
            update={
                "status": Status.ERROR,
                "error_kind": error_kind_of(message, "TEST_ERROR"),
                "error_message": message,
            }
        )
        state.records[item] = record
    if call.when == "call" or (call.when == "setup" and (report.failed or report.skipped)):
        if getattr(report, PAYLOAD_ATTR, None) is None:
            param = param_of(item)
            payload = payload_for(state, record, param.variant if param is not None else None)
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
    # Chunk ids come from the team's retriever and the judge decision from a model reply.
    return [(name, one_line(value)) for name, value in props]


def deselect_graded(config: pytest.Config, state: GoldenSession, items: list[pytest.Item]) -> None:
    """``--golden-run-key``: attempts graded in an earlier session of the run are not rerun."""

    graded = already_graded(state)
    if not graded:
        return
    keep: list[pytest.Item] = []
    done: list[pytest.Item] = []
    for item in items:
        param = param_of(item)
        key = None
        if param is not None:
            # The store keys a variant's attempts by the variant's name (its model column).
            model = param.variant or attempt_model(state, param)
            key = (param.case.id, param.attempt, model or "")
        (done if key in graded else keep).append(item)
    config.stash[RESUME_DESELECTED] = len(done)
    output = getattr(config, "workeroutput", None)
    if output is not None:  # an xdist worker: the controller decides the exit status
        output[RESUME_DESELECTED_OUTPUT] = len(done)
    if done:
        config.hook.pytest_deselected(items=done)
        items[:] = keep


def check_selected_fixtures(
    session: pytest.Session, state: GoldenSession, items: list[pytest.Item]
) -> None:
    """Fixture mode: every *selected* row needs a readable recorded answer.

    Run after deselection (``-k``, ``-m``, node ids, ``--golden-run-key``), so a row left out
    of the run needs no fixture. A problem is a collection error of the dataset file (exit 2,
    ``file:line: id: ...``, nothing runs), exactly like a broken row; the affected items are
    removed, so that nothing is graded and not even ``--continue-on-collection-errors`` reads
    a bad file.
    """
    if state.settings.mode is not Mode.FIXTURE:
        return
    # The selected case ids per variant (None: the dataset's own fixtures/).
    golden: dict[str | None, set[str]] = {}
    module: pytest.Collector | None = None
    for item in items:
        param = param_of(item)
        if param is not None:
            golden.setdefault(param.variant, set()).add(param.case.id)
            module = module or item.parent
    if not golden or module is None:
        return

    dataset = state.load()
    problems = []
    for variant, ids in golden.items():
        cases = [c for c in dataset.cases if c.id in ids]
        problems.extend(fixture_problems(dataset, cases, variant))
    if not problems:
        return
    # Every golden item goes, not only the rows at fault: a dataset that cannot be replayed as
    # selected is not run at all (as with a broken row), also under xdist, where a worker's
    # collection error does not stop the other items from running.
    items[:] = [it for it in items if param_of(it) is None]
    shown = [str(p) for p in problems[:20]]
    if len(problems) > 20:
        shown.append(f"... and {len(problems) - 20} more")
    report = pytest.CollectReport(module.nodeid, "failed", "\n".join(shown), result=[])
    session.config.hook.pytest_collectreport(report=report)


class CollectionGuard:
    """Controller side: a collection error in the dataset stops the run, serial or xdist.

    Serially pytest already stops before the first item when a collection error was reported.
    Under xdist the controller only relays workers' collection errors and runs what was
    collected; the run would then be recorded (0 cases, or the rows that did collect) and the
    exit status would not say "collection error". So after the loop, a dataset collection
    error interrupts the session like a serial one (exit 2), and nothing is recorded.
    """

    def __init__(self, state: GoldenSession) -> None:
        self.state = state
        self.dataset_error = False

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and self._is_dataset(report.nodeid):
            self.dataset_error = True

    def _is_dataset(self, nodeid: str) -> bool:
        from pathlib import Path

        path = nodeid.split("::", 1)[0]
        if not path:
            return False
        try:
            return (Path(self.state.config.rootpath) / path).resolve() == Path(
                self.state.target
            ).resolve()
        except (OSError, RuntimeError, ValueError):
            return False

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        result = yield
        if self.dataset_error and not session.config.option.continue_on_collection_errors:
            raise session.Interrupted("collection error in the golden dataset: nothing graded")
        return result
