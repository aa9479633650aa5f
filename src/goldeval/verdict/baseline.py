"""Baselines: committed, diffable run snapshots; loaded only after an integrity check."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from goldeval.core.errors import BaselineError, BaselineMissing, DatasetError
from goldeval.core.limits import LimitExceeded, loads_json
from goldeval.core.rates import RATE_NAMES
from goldeval.core.safe_files import read_regular_file
from goldeval.results.documents import RunDocument, validate_run_document
from goldeval.results.metrics import compute_metrics
from goldeval.results.run_folder import (
    ArtifactError,
    append_line,
    atomic_write,
    dumps,
    refuse_link,
)
from goldeval.verdict.comparison import ComparisonResult, compare, rate_of

#: Keys that change on every run without changing what the run measured (``projectRoot`` and
#: ``goldenRoot`` say where the run was made, not what it measured).
VOLATILE_KEYS = (
    "durationMs",
    "environment",
    "exitDecision",
    "comparison",
    "baselinePath",
    "notes",
    "projectRoot",
    "goldenRoot",
)


def check_shape(doc: Any, path: Path) -> RunDocument:
    """Refuse a run document whose known fields have the wrong type (BaselineError, field named).

    The shape is the typed :class:`~goldeval.results.documents.RunDocument`, which is returned.
    """
    return validate_run_document(doc, path)


#: The counters a baseline must carry, as (attribute, JSON name).
_CASE_COUNTERS = (
    ("cases_passed", "casesPassed"),
    ("cases_failed", "casesFailed"),
    ("cases_skipped", "casesSkipped"),
    ("cases_error", "casesError"),
)
_ATTEMPT_COUNTERS = (
    ("attempts_passed", "attemptsPassed"),
    ("attempts_failed", "attemptsFailed"),
    ("attempts_skipped", "attemptsSkipped"),
    ("attempts_error", "attemptsError"),
)


def _check_counters(run: RunDocument, path: Path) -> None:
    def num(attribute: str, key: str) -> int:
        value = getattr(run, attribute)
        if value is None or value < 0:
            raise BaselineError(
                "missing or not a count",
                path=path,
                field=key,
                hint="the file is truncated or hand-edited; re-save it",
            )
        return int(value)

    if "cases" not in run.model_fields_set:
        raise BaselineError("missing", path=path, field="cases", hint="not a run or baseline file")
    counted = sum(num(a, k) for a, k in _CASE_COUNTERS)
    cases_total = num("cases_total", "casesTotal")
    if counted != cases_total:
        raise BaselineError(
            "case counters do not add up to casesTotal",
            path=path,
            field="casesTotal",
            hint="tampered or hand-edited; re-save it",
        )
    counted = sum(num(a, k) for a, k in _ATTEMPT_COUNTERS)
    attempts_total = num("attempts_total", "attemptsTotal")
    if counted != attempts_total:
        raise BaselineError(
            "attempt counters do not add up to attemptsTotal",
            path=path,
            field="attemptsTotal",
            hint="tampered or hand-edited; re-save it",
        )
    if len(run.cases) != cases_total:
        raise BaselineError(
            f"{len(run.cases)} cases listed but casesTotal is {cases_total}",
            path=path,
            field="cases",
            hint="tampered or hand-edited; re-save it",
        )
    attempts = sum(len(c.attempts) for c in run.cases if "attempts" in c.model_fields_set)
    if attempts != attempts_total:
        raise BaselineError(
            f"{attempts} attempts listed but attemptsTotal is {attempts_total}",
            path=path,
            field="attemptsTotal",
            hint="tampered or hand-edited; re-save it",
        )


def _recomputed(run: RunDocument, cases: list[Any], path: Path) -> dict[str, Any]:
    """The rates recomputed from the cases (``cases``: the same cases as read, JSON)."""
    for n, case in enumerate(run.cases):
        ok = "attempts" in case.model_fields_set and all(
            a.status in ("PASS", "FAIL", "SKIPPED", "ERROR") for a in case.attempts
        )
        if not ok:
            raise BaselineError(
                f"case #{n + 1} is malformed",
                path=path,
                field="cases",
                hint="tampered or truncated; re-save it",
            )
    try:
        return compute_metrics(cases)
    except (TypeError, AttributeError, KeyError, ValueError, OverflowError) as exc:
        raise BaselineError(
            f"a case record is malformed ({type(exc).__name__})",
            path=path,
            field="cases",
            hint="tampered or truncated; re-save it",
        ) from None


def check_integrity(doc: Any, path: Path) -> RunDocument:
    """The typed document of a baseline or saved run, after its counters and stored rates
    were checked against its cases (BaselineError naming the field otherwise)."""
    if not isinstance(doc, dict):
        raise BaselineError("a baseline must be a JSON object", path=path)
    run = check_shape(doc, path)
    _check_counters(run, path)
    if run.metrics is None:
        raise BaselineError("missing", path=path, field="metrics")
    fresh = _recomputed(run, doc["cases"], path)
    for name in RATE_NAMES:
        stored = rate_of(run, name)
        if stored is None:
            if name == "overallPassRate":
                raise BaselineError("missing", path=path, field=f"metrics.{name}")
            continue
        got = (stored.hits, stored.total)
        want = (fresh[name]["hits"], fresh[name]["total"])
        if got != want:
            raise BaselineError(
                f"stored {got[0]}/{got[1]} but the attempts give {want[0]}/{want[1]}",
                path=path,
                field=f"metrics.{name}",
                hint="the metric was hand-edited or the cases were changed; re-save the baseline",
            )
    return run


def _read_document(path: Path) -> bytes:
    """A baseline's or saved run's bytes: a regular file (a FIFO does not hang the gate),
    its size checked (``file_bytes``) with fstat before it is read."""
    if not (path.exists() or path.is_symlink()):
        raise BaselineMissing(
            "baseline file not found", path=path, hint="save one with --golden-save-baseline"
        )
    try:
        return read_regular_file(path)
    except DatasetError as exc:  # too large, not a regular file, unreadable
        unreadable = exc.message.startswith("cannot read")
        error = BaselineMissing if unreadable else BaselineError
        raise error(exc.message, path=path, hint=exc.hint) from None


@dataclass(frozen=True)
class LoadedRun:
    """A baseline or saved run file: its JSON as read (what reports render) and the typed
    document (what the verdict reads), validated once."""

    raw: dict[str, Any]
    typed: RunDocument


def load_baseline(path: Path) -> RunDocument:
    """The typed document of a baseline or saved run, after its integrity check."""
    return load_run_file(path).typed


def load_run_file(path: Path) -> LoadedRun:
    """A baseline or saved run file read, integrity-checked and typed (BaselineError)."""
    raw = _read_document(path)
    try:
        doc = loads_json(raw.decode("utf-8-sig"), what="the document")
    except LimitExceeded as exc:
        raise BaselineError(f"invalid JSON: {exc.message}", path=path) from None
    except UnicodeDecodeError:
        raise BaselineError("not valid UTF-8", path=path) from None
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"invalid JSON: {exc.msg}",
            path=path,
            line=exc.lineno,
            hint="truncated or hand-edited; re-save it",
        ) from None
    except RecursionError:
        raise BaselineError("invalid JSON: nested too deeply", path=path) from None
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        raise BaselineError(f"invalid JSON: {str(exc)[:120]}", path=path) from None
    typed = check_integrity(doc, path)
    return LoadedRun(doc, typed)


def baseline_document(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A run without raw text and per-run noise: what a committed baseline holds.

    ``raw`` is run.json's JSON object as read: the baseline keeps its keys in their order, so
    a baseline stays a diffable copy of the run (the typed model would reorder them).
    """
    return {k: v for k, v in raw.items() if k not in VOLATILE_KEYS and k != "qualityGate"}


def save_baseline(run: LoadedRun, path: Path, *, force: bool) -> None:
    """Save a finished run (its run.json as read and typed) as a committed baseline."""
    typed = run.typed
    if path.exists() and not force:
        raise BaselineError(
            "already exists", path=path, hint="pass --golden-force-save-baseline to overwrite it"
        )
    errors = typed.attempts_error or 0
    if errors:
        raise BaselineError(
            f"not saved: the run has {errors} ERROR attempt(s), so it is not a quality snapshot",
            path=path,
            hint="rerun when the provider is healthy (or with --golden-rerun-errors), then save",
        )
    if typed.status not in (None, "COMPLETED"):
        raise BaselineError(
            f"not saved: the run is {typed.status}",
            path=path,
            hint="a baseline must come from a complete run",
        )
    history = path.parent / "history.jsonl"
    try:
        # Checked before the baseline is written: a refused history must not leave a saved
        # baseline behind a "not saved" message.
        refuse_link(history, "baselines/history.jsonl")
    except ArtifactError as exc:
        raise BaselineError(str(exc)) from None
    atomic_write(path, dumps(baseline_document(run.raw)))
    overall = typed.metrics.overall_pass_rate if typed.metrics is not None else None
    line = {
        "timestamp": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
        "runId": typed.run_id,
        "gitCommit": typed.git_commit,
        "datasetVersion": typed.dataset_version,
        "datasetHash": typed.dataset_hash,
        "mode": typed.protocol.mode if typed.protocol is not None else None,
        "model": typed.model,
        "overallHits": overall.hits if overall is not None else None,
        "overallTotal": overall.total if overall is not None else None,
        "overallPassRate": overall.rate if overall is not None else None,
        "baseline": path.name,
    }
    try:
        append_line(
            history,
            json.dumps({k: v for k, v in line.items() if v is not None}, ensure_ascii=False),
            "baselines/history.jsonl",
        )
    except ArtifactError as exc:  # a link or a non-file in its place: never written through
        raise BaselineError(str(exc)) from None


def default_candidates(baselines_dir: Path, dataset_id: str, live: bool) -> list[Path]:
    """Default lookup order: the mode's own file first, then other files for this dataset."""
    stem = f"live-{dataset_id}" if live else dataset_id
    primary = baselines_dir / f"{stem}.json"
    others = sorted(baselines_dir.glob(f"{stem}-*.json")) if baselines_dir.is_dir() else []
    ordered = [primary] + [p for p in others if p != primary]
    # Every entry of the name, not only regular files: a FIFO or a device there was skipped
    # in silence (a GATE PASS with no comparison); loading it says what it is instead.
    found = [p for p in ordered if p.is_symlink() or p.exists()]
    for path in found:
        refuse_out_of_project(path, baselines_dir.parent)
    return found


def refuse_out_of_project(path: Path, project: Path) -> None:
    """BaselineError when ``path``, a baseline the project's own lookup found (``baselines/``,
    or the path a run recorded), leads out of ``project`` through a link. The project's folder
    is resolved: a ``baselines/`` that is itself a link out of the project resolves there too,
    and everything under it would look "inside". A baseline the user names is the user's."""
    if not path.resolve().is_relative_to(project.resolve()):
        raise BaselineError(
            "a link out of the project: the default lookup reads only files inside it",
            path=path,
            hint="copy the baseline into baselines/, or name it with --golden-baseline",
        )


def first_comparable(
    candidates: list[Path],
    run: RunDocument,
    load: Callable[[Path], RunDocument] | None = None,
) -> tuple[Path, RunDocument, ComparisonResult] | None:
    """The first candidate baseline comparable with ``run``, else the first one (so the caller
    reports why it is not comparable), else None. Each candidate passes ``load_baseline``
    (``load``: where the caller already loaded them)."""

    first: tuple[Path, RunDocument, ComparisonResult] | None = None
    for path in candidates:
        doc = (load or load_baseline)(path)
        result = compare(doc, run)
        if result.valid:
            return path, doc, result
        if first is None:
            first = (path, doc, result)
    return first
