"""Writing a run folder: run.json, summary.json, report.md, per-case files, LATEST, history."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from goldeval.rollup import COUNTER_KEYS


def dumps(doc: Any) -> str:
    """Pretty JSON; a top-level ``cases`` list is written one case per line.

    One line per case keeps run.json and baselines diffable (a changed case is a changed
    line) while using the C encoder for the bulk, which matters at 100,000 cases.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    parts = []
    for key, value in doc.items():
        name = json.dumps(key, ensure_ascii=False)
        if key == "cases" and value:
            body = ",\n".join(
                "    " + json.dumps(case, ensure_ascii=False, separators=(", ", ": "))
                for case in value
            )
            parts.append(f"  {name}: [\n{body}\n  ]")
        else:
            text = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
            parts.append(f"  {name}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


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
    "runId",
    "timestamp",
    "status",
    "model",
    "judgeModel",
    "datasetVersion",
    "datasetHash",
    "packDatasetVersion",
    "packHash",
    "gitCommit",
    "experimentId",
    "configFingerprint",
    *COUNTER_KEYS,
    "durationMs",
    "qualityGate",
    "exitDecision",
)


def summary(run: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: run[k] for k in SUMMARY_KEYS if k in run}
    m = run.get("metrics", {})
    out["metrics"] = {k: v for k, v in m.items() if isinstance(v, dict) and "hits" in v}
    out["slices"] = m.get("slices", {})
    out["graders"] = m.get("graders", {})
    out["weightedScore"] = m.get("weightedScore")
    out["latency"] = m.get("latency")
    out["tokens"] = m.get("tokens")
    return out


def write_case(run_dir: Path, case: Mapping[str, Any], mode: str) -> list[Path]:
    """Per-case artifacts (``--golden-artifacts``): result.json, output.md, judge.md, and
    per-attempt copies when there are several attempts."""
    written: list[Path] = []
    if mode == "never" or (mode == "failure" and case["status"] not in ("FAIL", "ERROR")):
        return written
    case_dir = safe_child(run_dir, "cases", case["caseId"])
    attempts = case["attempts"]
    atomic_write(case_dir / "result.json", dumps(dict(case)))
    written.append(case_dir / "result.json")
    last = next(
        (a for a in reversed(attempts) if a.get("output") is not None or a["status"] == "ERROR"),
        None,
    )
    if last is not None:
        text = last.get("output")
        if text is None:
            text = f"{last.get('errorKind')}: {last.get('errorMessage')}\n"
        atomic_write(case_dir / "output.md", text)
        written.append(case_dir / "output.md")
        if last.get("judgeOutput"):
            atomic_write(case_dir / "judge.md", last["judgeOutput"])
            written.append(case_dir / "judge.md")
    if len(attempts) > 1:
        for a in attempts:
            adir = case_dir / "attempts" / str(a["index"])
            atomic_write(adir / "result.json", dumps(dict(a)))
            written.append(adir / "result.json")
            if a.get("output") is not None:
                atomic_write(adir / "output.md", a["output"])
                written.append(adir / "output.md")
            if a.get("judgeOutput"):
                atomic_write(adir / "judge.md", a["judgeOutput"])
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
        "exitCode": (run.get("exitDecision") or {}).get("code"),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "history.jsonl", "a", encoding="utf-8") as fh:
        fh.write(
            json.dumps({k: v for k, v in line.items() if v is not None}, ensure_ascii=False) + "\n"
        )
