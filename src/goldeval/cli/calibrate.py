"""``goldeval calibrate``: the judge's agreement with human labels over calibration.jsonl,
from canned outputs or re-judged by a live judge model (``--live``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from goldeval.cli.project import load_builtin_dataset, project_root, refuse_write_target
from goldeval.core.errors import DatasetError, GoldevalError
from goldeval.core.safe_files import contained_file, read_regular_file
from goldeval.core.settings import provider_from_env
from goldeval.core.textsafe import one_line
from goldeval.dataset.case import GoldenCase
from goldeval.dataset.discovery import check_golden_root, resolve_dataset
from goldeval.dataset.manifest import find_manifest, read_manifest
from goldeval.dataset.rows import Dataset
from goldeval.judge.calibration import calibrate, judge_calibration, load_calibration
from goldeval.judge.calibration_rows import (
    CalibrationRow,
    refuse_rows_outside,
    refuse_same_judge_input,
)
from goldeval.judge.parse import build_judge_messages, parse_judge_output
from goldeval.judge.runner import DEFAULT_RUBRIC
from goldeval.providers.base import ProviderRequest
from goldeval.providers.http import make_http_provider
from goldeval.verdict import exit_codes
from goldeval.verdict.calibration import calibration_exit


def cmd_calibrate(args: argparse.Namespace) -> int:
    root = project_root(args.root)
    # As in pytest: an explicit --golden-root is relative to the working directory, the default
    # golden/ and .goldeval/ are the project's.
    golden_root = Path(args.golden_root) if args.golden_root else root / "golden"
    check_golden_root(golden_root, root)  # never a dataset read through a link out
    folder = resolve_dataset(args.golden, golden_root, Path.cwd())
    path = folder / "calibration.jsonl"
    if not (path.exists() or path.is_symlink()):
        raise GoldevalError("no calibration.jsonl in the dataset folder", path=folder)
    # A link out of the dataset folder or a FIFO is refused before anything is opened.
    rows = load_calibration(contained_file(path, folder, what="calibration corpus"))
    policy = _calibration_policy(folder)
    # Every label must be about a case of this dataset: a corpus of another dataset (or a
    # typo'd id) would measure the judge on answers the gate never judges.
    dataset = _dataset(folder, args.root)
    cases = {c.id: c for c in dataset.cases}
    refuse_rows_outside(path, rows, set(cases), dataset.id)
    if args.live:
        predict = _live_judge(args, folder, path, rows, cases)
        report = calibrate(rows, predict, live=True)
    else:
        report = calibrate(rows)
    verdict = judge_calibration(report, policy)
    decision = calibration_exit(verdict)
    out = (Path(args.out) if args.out else root / ".goldeval") / "calibration"
    option = "--out" if args.out else "the calibration folder"
    out = refuse_write_target(out, root, "folder", option)
    out.mkdir(parents=True, exist_ok=True)
    report_json = refuse_write_target(out / "report.json", root, "file", option)
    report_md = refuse_write_target(out / "report.md", root, "file", option)
    document = {
        "dataset": {"id": dataset.id, "hash": dataset.hash},
        **report.to_json(),
        "verdict": verdict.to_json(),
    }
    document["exitDecision"] = {"code": decision.code, "reason": decision.reason}
    report_json.write_text(
        json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    markdown = report.to_markdown() + verdict.to_markdown()
    report_md.write_text(markdown, encoding="utf-8")
    print(markdown)
    print(f"written to {out}")
    if decision.code == exit_codes.GATE_FAILED:
        for d in report.disagreements:
            line = f"disagreement {d.row_id} ({d.case_id}): human {d.human.value}, judge "
            print("  " + one_line(line + d.predicted.value))
    print(f"goldeval decision: exit {decision.code} — {one_line(decision.reason)}")
    return decision.code


def _calibration_policy(folder: Path) -> Any:
    """The dataset manifest's ``calibration:`` bar (None: the documented defaults)."""
    manifest_path = find_manifest(folder)
    return read_manifest(manifest_path).calibration if manifest_path is not None else None


def _dataset(folder: Path, root: str | None = None) -> Dataset:
    """The dataset, read by the same loader pytest uses (built-in graders' keys)."""
    return load_builtin_dataset(folder, project_root(root))


def _live_judge(
    args: argparse.Namespace,
    folder: Path,
    path: Path,
    rows: list[CalibrationRow],
    cases: dict[str, GoldenCase],
) -> Any:
    # Every row has something to judge before the first judge call: a row without a
    # candidate is judged on the case's recorded answer, and one without either is refused
    # (it was judged on an empty text, a measurement of nothing).
    candidates = {row.id: _candidate(row, folder, path) for row in rows}
    refuse_same_judge_input(path, rows, candidates)
    settings = provider_from_env(args.provider, args.judge_model, args.base_url)
    provider = make_http_provider(settings)
    rubric_path = folder / "rubric.md"
    rubric = (
        read_regular_file(rubric_path).decode("utf-8") if rubric_path.is_file() else DEFAULT_RUBRIC
    )

    def predict(row: Any) -> Any:
        case = cases[row.case_id]
        system, user = build_judge_messages(
            rubric, case.id, case.prompt, case.expect, list(case.must_not), [], candidates[row.id]
        )
        answer = provider.complete(
            ProviderRequest(
                case=case, attempt=1, system=system, user=user, model=settings.model, retrieved=[]
            )
        )
        return parse_judge_output(answer.text)

    return predict


def _candidate(row: CalibrationRow, folder: Path, path: Path) -> str:
    """The answer a live judge grades: the row's ``candidate``, else the case's fixture."""
    if row.candidate is not None:
        return row.candidate
    fixture = folder / "fixtures" / f"{row.case_id}.out.md"
    if not (fixture.exists() or fixture.is_symlink()):
        raise DatasetError(
            f"row {row.id!r} has no candidate and case {row.case_id!r} has no recorded answer"
            " (fixtures/" + f"{row.case_id}.out.md)",
            path=path,
            line=row.line or None,
            field="candidate",
            hint="give the row the answer the human labelled as 'candidate'",
        )
    fixture = contained_file(fixture, folder, what="fixture")
    return read_regular_file(fixture, limit="fixture_bytes").decode("utf-8", "replace")
