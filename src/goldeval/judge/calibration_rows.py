"""The calibration corpus (``calibration.jsonl``): human-labelled rows read with the file, line
and field of every problem, and the canned judge decision of a row (its recorded
``judgeOutput``). Scored in :mod:`goldeval.judge.calibration`."""

from __future__ import annotations

import os
import unicodedata
from typing import Any

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from goldeval.core.errors import DatasetError
from goldeval.core.limits import LimitExceeded, loads_json
from goldeval.core.safe_files import InputFileTooLarge, read_regular_file
from goldeval.judge.parse import DEFAULT_TOKENS, JudgeDecision, JudgeResult, parse_judge_output


class CalibrationRow(BaseModel):
    """One human-labelled judge case; field names follow the reference's corpus."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    id: str
    case_id: str = Field(
        validation_alias=AliasChoices("caseId", "case_id"), serialization_alias="caseId"
    )
    human_label: JudgeDecision | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "humanLabel", "label", "humanExpectedDecision", "human_label"
        ),
        serialization_alias="humanLabel",
    )
    category: str | None = None
    candidate: str | None = None
    judge_output: str | None = Field(
        default=None,
        validation_alias=AliasChoices("judgeOutput", "judge_output"),
        serialization_alias="judgeOutput",
    )
    note: str | None = None
    #: The row's line in its file (0: not read from one), for errors about the row.
    _line: int = PrivateAttr(default=0)

    @property
    def line(self) -> int:
        return self._line

    @field_validator("id", "case_id")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("human_label", mode="before")
    @classmethod
    def _label_token(cls, value: Any) -> Any:
        """Accept the judge's decision words (``ПРИНЯТО``, ``rejected``...); blank means none."""
        if value is None or isinstance(value, JudgeDecision):
            return value
        if isinstance(value, str):
            if not value.strip():
                return None
            decision = DEFAULT_TOKENS.decision_for(value)
            if decision is None:
                raise ValueError(f"unknown label {value!r}: use ACCEPT, REJECT or PENDING")
            return decision
        raise ValueError("must be a string: ACCEPT, REJECT or PENDING")


def _first_error(exc: ValidationError) -> tuple[str | None, str]:
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err.get("loc", ()))
    return (loc or None), str(err.get("msg", "invalid value"))


def load_calibration(path: str | os.PathLike[str]) -> list[CalibrationRow]:
    """Read a calibration JSONL file: one object per line; blank and ``#`` lines are skipped.
    (With ``--live`` copies are found on the judged text: :func:`refuse_same_judge_input`.)

    Any problem raises :class:`goldeval.core.errors.DatasetError` naming the file, line and field.
    """
    try:
        # Bounded (file_bytes, fstat before reading) and never blocking on a FIFO.
        lines = read_regular_file(os.fspath(path)).decode("utf-8-sig").splitlines()
    except InputFileTooLarge:
        raise
    except DatasetError as exc:
        raise DatasetError(f"calibration file: {exc.message}", path=path) from None
    except UnicodeDecodeError as exc:
        raise DatasetError("calibration file is not UTF-8", path=path) from exc
    rows: list[CalibrationRow] = []
    seen: dict[str, int] = {}
    # A copy of a row under another id is no more evidence: ten copies of two agreeing rows
    # made n=20 and cleared the default bar.
    contents: dict[tuple[Any, ...], int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            data = loads_json(line, what="the row")
        except LimitExceeded as exc:
            raise DatasetError(exc.message, path=path, line=number) from None
        except ValueError as exc:
            raise DatasetError(
                f"not valid JSON: {exc}", path=path, line=number, hint="one JSON object per line"
            ) from exc
        if not isinstance(data, dict):
            raise DatasetError("a row must be a JSON object", path=path, line=number)
        try:
            row = CalibrationRow.model_validate(data)
        except ValidationError as exc:
            where, message = _first_error(exc)
            raise DatasetError(message, path=path, line=number, field=where) from exc
        if row.id in seen:
            raise DatasetError(
                f"duplicate id {row.id!r} (first on line {seen[row.id]})",
                path=path,
                line=number,
                field="id",
            )
        # Only rows that carry the judged answer can be told apart by content (the reference's
        # worked example repeats a caseId and a verdict text over distinct judgments).
        content = (
            row.case_id,
            _same_text(row.candidate),
            _same_text(row.judge_output),
            row.human_label,
        )
        if row.candidate and row.human_label is not None and content in contents:
            raise DatasetError(
                f"row {row.id!r} repeats line {contents[content]} (the same caseId, candidate, "
                "judgeOutput and humanLabel under another id, compared without case, spacing "
                "and invisible characters): a copy adds no evidence",
                path=path,
                line=number,
                field="id",
                hint="remove the copy; every row must be a judgment of its own",
            )
        contents[content] = number
        seen[row.id] = number
        row._line = number
        rows.append(row)
    return rows


def canned_predict(row: CalibrationRow) -> JudgeResult:
    """Canned mode: the decision parsed from the row's recorded judge output."""
    return parse_judge_output(row.judge_output)


def refuse_rows_outside(
    path: str | os.PathLike[str],
    rows: list[CalibrationRow],
    case_ids: set[str],
    dataset: str,
) -> None:
    """A label for a case the dataset does not have measures the judge on nothing the gate
    ever judges (a typo, or a corpus of another dataset): refused with its line, never scored.
    """
    for row in rows:
        if row.case_id not in case_ids:
            raise DatasetError(
                f"caseId {row.case_id!r} of row {row.id!r} is not a case of dataset {dataset}",
                path=path,
                line=row.line or None,
                field="caseId",
                hint="label cases of this dataset; fix the id or remove the row",
            )


def refuse_same_judge_input(
    path: str | os.PathLike[str], rows: list[CalibrationRow], judged: dict[str, str]
) -> None:
    """Live calibration: two rows whose judged text (``judged``, by row id: the candidate or
    the case's fixture) is the same for one case are one judge input; the second is refused
    (a candidate spelling out the fixture beside a candidate-less row was counted twice)."""
    first: dict[tuple[str, str | None], CalibrationRow] = {}
    for row in rows:
        if row.human_label is None:  # not scored: no evidence to count twice
            continue
        key = (row.case_id, _same_text(judged[row.id]))
        if key in first:
            raise DatasetError(
                f"row {row.id!r} is judged on the same answer as row {first[key].id!r} (it "
                f"repeats line {first[key].line}: the same caseId and candidate, or the case's "
                "recorded answer; --live re-judges it and does not read judgeOutput): a copy "
                "adds no evidence",
                path=path,
                line=row.line or None,
                field="candidate",
                hint="remove the copy; every row must be a judgment of its own",
            )
        first[key] = row


def _same_text(text: str | None) -> str | None:
    """``text`` as the duplicate check compares it: a copy with a space, a line break, a
    zero-width character or another case added is the same judgment (one trailing space
    doubled n and cleared the bar)."""
    if text is None:
        return None
    folded = unicodedata.normalize("NFKC", text).casefold()
    visible = "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")
    return " ".join(visible.split())
