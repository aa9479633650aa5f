"""The run document (run.json): built once on the controller from attempt records.

Attempts arrive as JSON-plain dicts on test reports. The collector keeps each one as a compact
JSON string (about a tenth of the memory of model objects) and the builder rolls cases up one
at a time, streaming them to disk, so 100,000 attempts never sit in memory as objects.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from goldeval.metrics import MetricsAccumulator
from goldeval.rollup import Counters, roll_up, strip_raw


def git_commit(cwd: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
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


_COMPACT = (",", ":")


class RunCollector:
    """Folds attempt payloads (plain dicts from reports) into cases, in dataset order."""

    def __init__(self, keep_passing_output: bool = True) -> None:
        self.keep_passing_output = keep_passing_output
        self.infos: dict[str, dict[str, Any]] = {}
        self.attempts: dict[str, dict[tuple[str, int], str]] = {}

    def add(self, payload: dict[str, Any]) -> None:
        case = payload["case"]
        case_id = case["caseId"]
        if case_id not in self.infos:
            self.infos[case_id] = case
        attempt = payload["attempt"]
        if not self.keep_passing_output and attempt.get("status") == "PASS":
            attempt = {k: v for k, v in attempt.items() if k != "output"}
        # Keyed by (model, attempt) so a re-sent report (xdist restart) is never counted twice.
        key = (attempt.get("model") or "", int(attempt["index"]))
        self.attempts.setdefault(case_id, {})[key] = json.dumps(
            attempt, ensure_ascii=False, separators=_COMPACT
        )

    def __len__(self) -> int:
        return sum(len(v) for v in self.attempts.values())

    def models(self) -> list[str]:
        return sorted({m for per_case in self.attempts.values() for (m, _) in per_case})

    def case_ids(self, model: str | None = None) -> list[str]:
        order = sorted(self.infos.values(), key=lambda i: (i.get("line") or 0, i["caseId"]))
        return [
            i["caseId"]
            for i in order
            if model is None or any(m == model for (m, _) in self.attempts[i["caseId"]])
        ]

    def iter_cases(self, model: str | None = None) -> Iterator[dict[str, Any]]:
        """Rolled-up cases (with raw text) in dataset order; with ``model``, that model's."""
        for case_id in self.case_ids(model):
            records = [
                json.loads(text)
                for (m, _), text in self.attempts[case_id].items()
                if model is None or m == model
            ]
            yield roll_up(self.infos[case_id], records)


def light_case(case: dict[str, Any]) -> dict[str, Any]:
    """What the controller keeps in memory per case: everything for a non-passing case (the
    reports name its reasons), the statuses alone for a passing one (run.json has the rest)."""
    if case["status"] != "PASS":
        return strip_raw(case)
    return {
        "caseId": case["caseId"],
        "status": case["status"],
        "kinds": case["kinds"],
        "successRate": case["successRate"],
        "attempts": [{"index": a["index"], "status": a["status"]} for a in case["attempts"]],
        **({"retrieval": case["retrieval"]} if "retrieval" in case else {}),
    }


def build_run(
    *,
    run_id: str,
    started: datetime,
    duration_ms: int,
    cases: Iterator[dict[str, Any]],
    cases_file: Path,
    protocol: dict[str, Any],
    configuration: dict[str, Any],
    identity: dict[str, Any],
    status: str,
    weights: dict[str, float] | None = None,
    extra: dict[str, Any] | None = None,
    on_case: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Roll up and write every case (one JSON line each) to ``cases_file``; return the run
    document with light cases (see :func:`light_case`) for comparison, gate and reports."""
    counters = Counters()
    acc = MetricsAccumulator()
    light: list[dict[str, Any]] = []
    cases_file.parent.mkdir(parents=True, exist_ok=True)
    with open(cases_file, "w", encoding="utf-8") as fh:
        for case in cases:
            counters.add(case)
            acc.add(case)
            if on_case is not None:
                on_case(case)
            stripped = strip_raw(case)
            fh.write(json.dumps(stripped, ensure_ascii=False, separators=(", ", ": ")) + "\n")
            light.append(light_case(case))
    doc: dict[str, Any] = {
        "runId": run_id,
        "timestamp": started.astimezone(timezone.utc).isoformat().replace("+00:00", "Z"),
        "status": status,
        **{k: v for k, v in identity.items() if v is not None},
        "protocol": protocol,
        "configuration": configuration,
        **counters.dump(),
        "metrics": acc.result(weights),
        "cases": light,
        "durationMs": duration_ms,
        "environment": {"python": platform.python_version()},
    }
    if extra:
        doc.update(extra)
    return doc


def write_run_json(path: Path, run: dict[str, Any], cases_file: Path) -> None:
    """run.json: the document's fields pretty-printed, cases spliced in from ``cases_file``
    one per line, written to a temp file and renamed so a crash leaves no half file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as out:
        out.write("{\n")
        first = True
        for key, value in run.items():
            if not first:
                out.write(",\n")
            first = False
            name = json.dumps(key, ensure_ascii=False)
            if key == "cases":
                out.write(f"  {name}: [")
                with open(cases_file, encoding="utf-8") as fh:
                    sep = "\n"
                    for line in fh:
                        out.write(sep + "    " + line.rstrip("\n"))
                        sep = ",\n"
                out.write("\n  ]" if sep == ",\n" else "]")
            else:
                text = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
                out.write(f"  {name}: {text}")
        out.write("\n}\n")
    tmp.replace(path)


def new_run_id(out_dir: Path, now: datetime) -> str:
    base = now.strftime("%Y-%m-%dT%H-%M-%S")
    run_id, n = base, 1
    while (out_dir / run_id).exists():
        n += 1
        run_id = f"{base}-{n}"
    return run_id
