"""The run document (run.json): built once on the controller from attempt records."""

from __future__ import annotations

import hashlib
import platform
import subprocess
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from goldeval.metrics import compute_metrics
from goldeval.models import AttemptRecord, CaseInfo, CaseRecord
from goldeval.rollup import count, roll_up

RAW_FIELDS = {"output", "judgeOutput"}


def git_commit(cwd: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=cwd, capture_output=True, text=True,
            timeout=5, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def config_fingerprint(values: dict[str, Any]) -> str:
    """SHA-256 of sorted ``key=value`` lines (reference 5.1); None → empty string."""
    lines = []
    for key in sorted(values):
        value = values[key]
        if value is None:
            text = ""
        elif isinstance(value, bool):
            text = "true" if value else "false"
        else:
            text = str(value)
        lines.append(f"{key}={text}")
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


class RunCollector:
    """Folds attempt payloads (plain dicts from reports) into cases, in dataset order."""

    def __init__(self) -> None:
        self.infos: dict[str, CaseInfo] = {}
        self.attempts: dict[str, dict[tuple[str, int], AttemptRecord]] = {}

    def add(self, payload: dict[str, Any]) -> None:
        info = CaseInfo.model_validate(payload["case"])
        record = AttemptRecord.model_validate(payload["attempt"])
        self.infos.setdefault(info.case_id, info)
        # Keyed by (model, attempt) so a re-sent report (xdist restart) is never counted twice.
        key = (record.model or "", record.index)
        self.attempts.setdefault(record.case_id, {})[key] = record

    def __len__(self) -> int:
        return sum(len(v) for v in self.attempts.values())

    def models(self) -> list[str]:
        return sorted({m for per_case in self.attempts.values() for (m, _) in per_case})

    def cases(self, model: str | None = None) -> list[CaseRecord]:
        """Rolled-up cases in dataset order; with ``model``, only that model's attempts."""
        order = sorted(self.infos.values(), key=lambda i: (i.line or 0, i.case_id))
        out = []
        for info in order:
            records = [
                r for (m, _), r in self.attempts[info.case_id].items()
                if model is None or m == model
            ]
            if records:
                out.append(roll_up(info, records))
        return out


def strip_raw(case: dict[str, Any]) -> dict[str, Any]:
    out = dict(case)
    out["attempts"] = [{k: v for k, v in a.items() if k not in RAW_FIELDS} for a in case["attempts"]]
    return out


def build_run(
    *,
    run_id: str,
    started: datetime,
    duration_ms: int,
    cases: Iterable[CaseRecord],
    protocol: dict[str, Any],
    configuration: dict[str, Any],
    identity: dict[str, Any],
    status: str,
    weights: dict[str, float] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    case_list = list(cases)
    counters = count(case_list)
    metrics = compute_metrics(case_list, weights)
    doc: dict[str, Any] = {
        "runId": run_id,
        "timestamp": started.astimezone(timezone.utc).isoformat().replace("+00:00", "Z"),
        "status": status,
        **{k: v for k, v in identity.items() if v is not None},
        "protocol": protocol,
        "configuration": configuration,
        **counters.dump(),
        "metrics": metrics,
        "cases": [strip_raw(c.dump()) for c in case_list],
        "durationMs": duration_ms,
        "environment": {"python": platform.python_version()},
    }
    if extra:
        doc.update(extra)
    return doc


def new_run_id(out_dir: Path, now: datetime) -> str:
    base = now.strftime("%Y-%m-%dT%H-%M-%S")
    run_id, n = base, 1
    while (out_dir / run_id).exists():
        n += 1
        run_id = f"{base}-{n}"
    return run_id
