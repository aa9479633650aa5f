"""Writing a run folder: run.json, summary.json, report.md, per-case files, LATEST, history."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from goldeval.models import CaseRecord, Status


def dumps(doc: Any) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def atomic_write(path: Path, text: str) -> None:
    """Write via a temp file + rename, so a crash never leaves a half-written artifact."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def safe_child(root: Path, *parts: str) -> Path:
    """``root/parts`` that is guaranteed to stay inside ``root`` (ids are untrusted)."""
    target = root.joinpath(*parts).resolve()
    if not target.is_relative_to(root.resolve()):
        raise ValueError(f"path {'/'.join(parts)!r} escapes {root}")
    return target


SUMMARY_KEYS = (
    "runId", "timestamp", "status", "model", "judgeModel", "datasetVersion", "datasetHash",
    "packDatasetVersion", "packHash", "gitCommit", "experimentId", "configFingerprint",
    "casesTotal", "casesPassed", "casesFailed", "casesSkipped", "casesError", "attemptsTotal",
    "attemptsPassed", "attemptsFailed", "attemptsSkipped", "attemptsError", "durationMs",
    "qualityGate", "exitDecision",
)


def summary(run: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: run[k] for k in SUMMARY_KEYS if k in run}
    m = run.get("metrics", {})
    out["metrics"] = {
        k: v for k, v in m.items() if isinstance(v, dict) and "hits" in v
    }
    out["slices"] = m.get("slices", {})
    out["graders"] = m.get("graders", {})
    out["weightedScore"] = m.get("weightedScore")
    out["latency"] = m.get("latency")
    out["tokens"] = m.get("tokens")
    return out


def write_case_artifacts(run_dir: Path, cases: Iterable[CaseRecord], mode: str) -> list[Path]:
    written: list[Path] = []
    if mode == "never":
        return written
    for case in cases:
        if mode == "failure" and case.status not in (Status.FAIL, Status.ERROR):
            continue
        case_dir = safe_child(run_dir, "cases", case.case_id)
        atomic_write(case_dir / "result.json", dumps(case.dump()))
        written.append(case_dir / "result.json")
        last = next(
            (a for a in reversed(case.attempts) if a.output is not None or a.status is Status.ERROR),
            None,
        )
        if last is not None:
            atomic_write(case_dir / "output.md", last.output or f"{last.error_kind}: {last.error_message}\n")
            written.append(case_dir / "output.md")
            if last.judge_output:
                atomic_write(case_dir / "judge.md", last.judge_output)
                written.append(case_dir / "judge.md")
        if len(case.attempts) > 1:
            for a in case.attempts:
                adir = case_dir / "attempts" / str(a.index)
                atomic_write(adir / "result.json", dumps(a.dump()))
                written.append(adir / "result.json")
                if a.output is not None:
                    atomic_write(adir / "output.md", a.output)
                    written.append(adir / "output.md")
                if a.judge_output:
                    atomic_write(adir / "judge.md", a.judge_output)
                    written.append(adir / "judge.md")
    return written


def append_history(out_dir: Path, run: Mapping[str, Any]) -> None:
    overall = run.get("metrics", {}).get("overallPassRate", {})
    gate = run.get("qualityGate") or {}
    line = {
        "timestamp": run.get("timestamp"),
        "runId": run.get("runId"),
        "gitCommit": run.get("gitCommit"),
        "experiment": run.get("experimentId"),
        "model": run.get("model"),
        "judgeModel": run.get("judgeModel"),
        "datasetVersion": run.get("datasetVersion"),
        "datasetHash": run.get("datasetHash"),
        "configFingerprint": run.get("configFingerprint"),
        "overallHits": overall.get("hits"),
        "overallTotal": overall.get("total"),
        "overallPassRate": overall.get("rate"),
        "qualityGate": gate.get("verdict", "NOT_APPLIED"),
        "status": run.get("status"),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "history.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({k: v for k, v in line.items() if v is not None}, ensure_ascii=False) + "\n")
