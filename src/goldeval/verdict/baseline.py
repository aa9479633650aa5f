"""Baselines: committed, diffable run snapshots; loaded only after an integrity check."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from goldeval.core.errors import BaselineError, BaselineMissing, DatasetError
from goldeval.core.limits import LimitExceeded, loads_json
from goldeval.core.rates import RATE_NAMES
from goldeval.core.safe_files import read_regular_file
from goldeval.results.documents import validate_run_document
from goldeval.results.metrics import compute_metrics
from goldeval.results.run_folder import (
    ArtifactError,
    append_line,
    atomic_write,
    dumps,
    refuse_link,
)
from goldeval.verdict.comparison import compare

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


def check_shape(doc: Any, path: Path) -> None:
    """Refuse a run document whose known fields have the wrong type (BaselineError, field named).

    The shape is the typed :class:`~goldeval.results.documents.RunDocument`.
    """
    validate_run_document(doc, path)


def _check_counters(doc: Mapping[str, Any], path: Path) -> None:
    def num(key: str) -> int:
        value = doc.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BaselineError(
                "missing or not a count",
                path=path,
                field=key,
                hint="the file is truncated or hand-edited; re-save it",
            )
        return value

    cases = doc.get("cases")
    if not isinstance(cases, list):
        raise BaselineError("missing", path=path, field="cases", hint="not a run or baseline file")
    if num("casesPassed") + num("casesFailed") + num("casesSkipped") + num("casesError") != num(
        "casesTotal"
    ):
        raise BaselineError(
            "case counters do not add up to casesTotal",
            path=path,
            field="casesTotal",
            hint="tampered or hand-edited; re-save it",
        )
    if num("attemptsPassed") + num("attemptsFailed") + num("attemptsSkipped") + num(
        "attemptsError"
    ) != num("attemptsTotal"):
        raise BaselineError(
            "attempt counters do not add up to attemptsTotal",
            path=path,
            field="attemptsTotal",
            hint="tampered or hand-edited; re-save it",
        )
    if len(cases) != doc["casesTotal"]:
        raise BaselineError(
            f"{len(cases)} cases listed but casesTotal is {doc['casesTotal']}",
            path=path,
            field="cases",
            hint="tampered or hand-edited; re-save it",
        )
    attempts = sum(
        len(c["attempts"])
        for c in cases
        if isinstance(c, dict) and isinstance(c.get("attempts"), list)
    )
    if attempts != doc["attemptsTotal"]:
        raise BaselineError(
            f"{attempts} attempts listed but attemptsTotal is {doc['attemptsTotal']}",
            path=path,
            field="attemptsTotal",
            hint="tampered or hand-edited; re-save it",
        )


def _recomputed(doc: Mapping[str, Any], path: Path) -> dict[str, Any]:
    for n, case in enumerate(doc["cases"]):
        ok = (
            isinstance(case, dict)
            and isinstance(case.get("attempts"), list)
            and all(
                isinstance(a, dict) and a.get("status") in ("PASS", "FAIL", "SKIPPED", "ERROR")
                for a in case["attempts"]
            )
        )
        if not ok:
            raise BaselineError(
                f"case #{n + 1} is malformed",
                path=path,
                field="cases",
                hint="tampered or truncated; re-save it",
            )
    try:
        return compute_metrics(doc["cases"])
    except (TypeError, AttributeError, KeyError, ValueError, OverflowError) as exc:
        raise BaselineError(
            f"a case record is malformed ({type(exc).__name__})",
            path=path,
            field="cases",
            hint="tampered or truncated; re-save it",
        ) from None


def check_integrity(doc: Any, path: Path) -> None:
    if not isinstance(doc, dict):
        raise BaselineError("a baseline must be a JSON object", path=path)
    check_shape(doc, path)
    _check_counters(doc, path)
    metrics = doc.get("metrics")
    if not isinstance(metrics, dict):
        raise BaselineError("missing", path=path, field="metrics")
    fresh = _recomputed(doc, path)
    for name in RATE_NAMES:
        stored = metrics.get(name)
        if stored is None:
            if name == "overallPassRate":
                raise BaselineError("missing", path=path, field=f"metrics.{name}")
            continue
        if not isinstance(stored, dict):
            raise BaselineError("not a rate", path=path, field=f"metrics.{name}")
        got = (stored.get("hits"), stored.get("total"))
        want = (fresh[name]["hits"], fresh[name]["total"])
        if got != want:
            raise BaselineError(
                f"stored {got[0]}/{got[1]} but the attempts give {want[0]}/{want[1]}",
                path=path,
                field=f"metrics.{name}",
                hint="the metric was hand-edited or the cases were changed; re-save the baseline",
            )


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


def load_baseline(path: Path) -> dict[str, Any]:
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
    check_integrity(doc, path)
    return doc  # type: ignore[no-any-return]


def baseline_document(run: Mapping[str, Any]) -> dict[str, Any]:
    """A run without raw text and per-run noise: what a committed baseline holds."""
    return {k: v for k, v in run.items() if k not in VOLATILE_KEYS and k != "qualityGate"}


def save_baseline(run: Mapping[str, Any], path: Path, *, force: bool) -> None:

    if path.exists() and not force:
        raise BaselineError(
            "already exists", path=path, hint="pass --golden-force-save-baseline to overwrite it"
        )
    errors = int(run.get("attemptsError") or 0)
    if errors:
        raise BaselineError(
            f"not saved: the run has {errors} ERROR attempt(s), so it is not a quality snapshot",
            path=path,
            hint="rerun when the provider is healthy (or with --golden-rerun-errors), then save",
        )
    if run.get("status") not in (None, "COMPLETED"):
        raise BaselineError(
            f"not saved: the run is {run.get('status')}",
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
    atomic_write(path, dumps(baseline_document(run)))
    overall = (run.get("metrics") or {}).get("overallPassRate") or {}
    line = {
        "timestamp": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
        "runId": run.get("runId"),
        "gitCommit": run.get("gitCommit"),
        "datasetVersion": run.get("datasetVersion"),
        "datasetHash": run.get("datasetHash"),
        "mode": (run.get("protocol") or {}).get("mode"),
        "model": run.get("model"),
        "overallHits": overall.get("hits"),
        "overallTotal": overall.get("total"),
        "overallPassRate": overall.get("rate"),
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
    return [p for p in ordered if p.is_file()]


def first_comparable(
    candidates: list[Path], run: Mapping[str, Any]
) -> tuple[Path, dict[str, Any], Any] | None:
    """The first candidate baseline comparable with ``run``, else the first one (so the caller
    reports why it is not comparable), else None. Each candidate passes ``load_baseline``."""

    first: tuple[Path, dict[str, Any], Any] | None = None
    for path in candidates:
        doc = load_baseline(path)
        result = compare(doc, run)
        if result.valid:
            return path, doc, result
        if first is None:
            first = (path, doc, result)
    return first
