"""Judge calibration: compare judge decisions with human labels (semantics 6.4).

Calibration answers "how far can this judge be trusted?" on a small human-labelled corpus. It
never affects production eval scores or the quality gate. In canned mode each row's recorded
``judgeOutput`` is parsed; in live mode a caller-supplied function re-judges the row.

ACCEPT is the positive class. A row counts towards ``n`` only when both the human label and the
prediction are ACCEPT or REJECT: rows with a missing or PENDING label, or a PENDING prediction,
are counted in ``skipped_pending``; rows whose prediction raised are counted in ``errors``.
Neither is ever scored as an accept or a reject.

:func:`judge_calibration` decides whether a report clears the dataset's bar (the manifest's
``calibration:`` block, :class:`~goldeval.dataset.manifest.CalibrationPolicy`): enough rows
scored, and the lower end of the agreement's 95% interval at or above the threshold.
``goldeval calibrate`` asks it and exits with the code ``goldeval.verdict.exit_codes`` gives
the outcome. The labelled rows are read in :mod:`goldeval.judge.calibration_rows`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from goldeval.core.errors import ProviderError
from goldeval.core.stats import cohen_kappa, cohen_kappa_interval, wilson
from goldeval.dataset.manifest import CalibrationPolicy
from goldeval.judge.calibration_rows import CalibrationRow, canned_predict, load_calibration
from goldeval.judge.parse import JudgeDecision, JudgeResult

__all__ = [
    "CANNED_SOURCE",
    "LIVE_SOURCE",
    "CalibrationOutcome",
    "CalibrationReport",
    "CalibrationRow",
    "CalibrationVerdict",
    "CategoryCounts",
    "Confusion",
    "Disagreement",
    "calibrate",
    "canned_predict",
    "escape_markdown_cell",
    "judge_calibration",
    "load_calibration",
]

CANNED_SOURCE = "canned judgeOutput"
LIVE_SOURCE = "live judge"
SMALL_N = 30
NO_CATEGORY = "(none)"


@dataclass(frozen=True)
class Confusion:
    """Counts with ACCEPT as the positive class."""

    true_accept: int = 0
    false_accept: int = 0
    false_reject: int = 0
    true_reject: int = 0

    @property
    def n(self) -> int:
        return self.true_accept + self.false_accept + self.false_reject + self.true_reject


@dataclass(frozen=True)
class Disagreement:
    row_id: str
    case_id: str
    category: str | None
    human: JudgeDecision
    predicted: JudgeDecision


@dataclass
class CategoryCounts:
    n: int = 0
    agree: int = 0
    disagree: int = 0
    skipped_pending: int = 0
    errors: int = 0


def _ratio(hits: int, total: int) -> float | None:
    return hits / total if total else None


def _rate_text(hits: int, total: int) -> str:
    """``85.0% (17 / 20) 95% CI [64.0%, 94.8%]``, or ``n/a`` when undefined."""
    interval = wilson(hits, total)
    if interval is None:
        return "n/a"
    lower, upper = interval
    return (
        f"{100.0 * hits / total:.1f}% ({hits} / {total}) 95% CI "
        f"[{100.0 * lower:.1f}%, {100.0 * upper:.1f}%]"
    )


def _fixed3(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def escape_markdown_cell(value: object) -> str:
    """Make untrusted text safe inside one Markdown table cell.

    Backslash, pipe, backtick and emphasis/link punctuation are backslash-escaped; ``&``, ``<``
    and ``>`` become entities (no raw HTML); line breaks become spaces.
    """
    text = "" if value is None else str(value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out: list[str] = []
    for ch in text:
        if ch in "\\|`*_[]":
            out.append("\\" + ch)
        elif ch in "\r\n\x0b\x0c\x85\u2028\u2029":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


@dataclass(frozen=True)
class CalibrationReport:
    """Figures of one calibration run; ``to_json`` and ``to_markdown`` render it."""

    confusion: Confusion
    skipped_pending: int
    errors: int
    live: bool
    source: str
    disagreements: tuple[Disagreement, ...] = ()
    by_category: dict[str, CategoryCounts] = field(default_factory=dict)
    #: Rows without a human ACCEPT/REJECT (part of ``skipped_pending``).
    unlabeled: int = 0
    #: Failed judge calls (part of ``errors``) that another try may fix (provider down, 5xx).
    retryable_errors: int = 0

    @property
    def rows(self) -> int:
        return self.n + self.skipped_pending + self.errors

    @property
    def n(self) -> int:
        return self.confusion.n

    @property
    def accuracy(self) -> float | None:
        c = self.confusion
        return _ratio(c.true_accept + c.true_reject, c.n)

    @property
    def precision(self) -> float | None:
        c = self.confusion
        return _ratio(c.true_accept, c.true_accept + c.false_accept)

    @property
    def recall(self) -> float | None:
        c = self.confusion
        return _ratio(c.true_accept, c.true_accept + c.false_reject)

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        if p is None or r is None or p + r <= 0:
            return None
        return 2.0 * p * r / (p + r)

    @property
    def kappa(self) -> float | None:
        """Cohen's kappa between human and judge; None when undefined (n 0 or chance 1)."""
        c = self.confusion
        return cohen_kappa(c.true_accept, c.false_accept, c.false_reject, c.true_reject)

    @property
    def caveat(self) -> str:
        size = f"n={self.n} (skipped PENDING={self.skipped_pending})"
        if self.n < SMALL_N:
            size += " is too small for a published judge-accuracy claim"
        return f"{size}; source={self.source}; does not affect production eval or the quality gate"

    def to_json(self) -> dict[str, Any]:
        """JSON-plain dict (camelCase keys, as the project's other artifacts)."""
        c = self.confusion
        return {
            "live": self.live,
            "source": self.source,
            "n": self.n,
            "skippedPending": self.skipped_pending,
            "errors": self.errors,
            "accuracy": self.accuracy,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "kappa": self.kappa,
            "confusion": {
                "trueAccept": c.true_accept,
                "falseAccept": c.false_accept,
                "falseReject": c.false_reject,
                "trueReject": c.true_reject,
            },
            "caveat": self.caveat,
            "disagreements": [
                {
                    "id": d.row_id,
                    "caseId": d.case_id,
                    "category": d.category,
                    "human": d.human.value,
                    "predicted": d.predicted.value,
                }
                for d in self.disagreements
            ],
            "byCategory": {
                name: {
                    "n": counts.n,
                    "agree": counts.agree,
                    "disagree": counts.disagree,
                    "skippedPending": counts.skipped_pending,
                    "errors": counts.errors,
                }
                for name, counts in sorted(self.by_category.items())
            },
        }

    def to_markdown(self) -> str:
        """Markdown report; every table cell is escaped, since candidates are untrusted."""
        c = self.confusion
        lines = [
            "# Judge calibration",
            "",
            f"- Live: {'true' if self.live else 'false'}",
            f"- n: {self.n}",
            f"- Accuracy: {_rate_text(c.true_accept + c.true_reject, c.n)}",
            "- Precision (ACCEPT=positive): "
            + _rate_text(c.true_accept, c.true_accept + c.false_accept),
            f"- Recall: {_rate_text(c.true_accept, c.true_accept + c.false_reject)}",
            f"- F1: {_fixed3(self.f1)}",
            f"- Kappa: {_fixed3(self.kappa)}",
            f"- Confusion TA/FA/FR/TR: "
            f"{c.true_accept}/{c.false_accept}/{c.false_reject}/{c.true_reject}",
            f"- Skipped PENDING: {self.skipped_pending}",
            f"- Errors: {self.errors}",
            f"- Caveat: {self.caveat}",
            "",
            "## Disagreements",
            "",
        ]
        if self.disagreements:
            lines += ["| id | case | category | human | judge |", "|---|---|---|---|---|"]
            for d in self.disagreements:
                row = (d.row_id, d.case_id, d.category or "", d.human.value, d.predicted.value)
                lines.append("| " + " | ".join(escape_markdown_cell(x) for x in row) + " |")
        else:
            lines.append("None.")
        if self.by_category:
            lines += [
                "",
                "## By category",
                "",
                "| category | n | agree | disagree | skipped PENDING | errors |",
                "|---|---|---|---|---|---|",
            ]
            for name, k in sorted(self.by_category.items()):
                cells = (name, k.n, k.agree, k.disagree, k.skipped_pending, k.errors)
                lines.append("| " + " | ".join(escape_markdown_cell(x) for x in cells) + " |")
        return "\n".join(lines) + "\n"


Prediction: TypeAlias = "JudgeResult | Exception"


def calibrate(
    rows: Iterable[CalibrationRow],
    predict: Callable[[CalibrationRow], Prediction] = canned_predict,
    *,
    live: bool | None = None,
) -> CalibrationReport:
    """Score the judge against the human labels.

    ``predict`` returns the judge's result for a row, or an exception (raising works too):
    canned mode (the default) parses the recorded ``judge_output``; live mode passes a function
    that calls the real judge. ``live`` defaults to "``predict`` is not the canned one".
    """
    is_live = (predict is not canned_predict) if live is None else live
    ta = fa = fr = tr = skipped = errors = unlabeled = retryable = 0
    disagreements: list[Disagreement] = []
    by_category: dict[str, CategoryCounts] = {}
    for row in rows:
        counts = by_category.setdefault(row.category or NO_CATEGORY, CategoryCounts())
        try:
            outcome: Prediction = predict(row)
        except Exception as exc:  # a failed judge call is an error, never a decision
            outcome = exc
        if not isinstance(outcome, JudgeResult):
            errors += 1
            counts.errors += 1
            # Only a provider's infrastructure fault is worth retrying; a bug is not.
            retryable += isinstance(outcome, ProviderError) and outcome.retryable
            continue
        human, predicted = row.human_label, outcome.decision
        if human is None or human is JudgeDecision.PENDING or predicted is JudgeDecision.PENDING:
            skipped += 1
            unlabeled += human is None or human is JudgeDecision.PENDING
            counts.skipped_pending += 1
            continue
        counts.n += 1
        human_accept = human is JudgeDecision.ACCEPT
        judge_accept = predicted is JudgeDecision.ACCEPT
        if human_accept and judge_accept:
            ta += 1
        elif judge_accept:
            fa += 1
        elif human_accept:
            fr += 1
        else:
            tr += 1
        if human_accept == judge_accept:
            counts.agree += 1
        else:
            counts.disagree += 1
            disagreements.append(Disagreement(row.id, row.case_id, row.category, human, predicted))
    return CalibrationReport(
        confusion=Confusion(ta, fa, fr, tr),
        skipped_pending=skipped,
        errors=errors,
        live=is_live,
        source=LIVE_SOURCE if is_live else CANNED_SOURCE,
        disagreements=tuple(disagreements),
        by_category=by_category,
        unlabeled=unlabeled,
        retryable_errors=retryable,
    )


# -- the verdict ----------------------------------------------------------------------------


class CalibrationOutcome(enum.Enum):
    """What a calibration came to (exit codes: ``verdict.exit_codes.calibration_exit``)."""

    #: Enough rows scored and the agreement's lower bound clears the bar.
    PASSED = "PASSED"
    #: Measured, but too few rows or too little agreement: the judge is not trusted.
    BELOW_BAR = "BELOW_BAR"
    #: Nothing measured: no row has both a human label and a parseable judge decision.
    NOTHING_MEASURED = "NOTHING_MEASURED"
    #: Judge calls failed (live): the figures are not the whole corpus's.
    JUDGE_FAILED = "JUDGE_FAILED"


@dataclass(frozen=True)
class CalibrationVerdict:
    outcome: CalibrationOutcome
    reason: str
    policy: CalibrationPolicy
    #: The lower end of the agreement's 95% interval (None: not measured or undefined).
    lower_bound: float | None = None
    #: For JUDGE_FAILED: every failed call is one another try may fix.
    retryable: bool = False

    def to_markdown(self) -> str:
        """The report's closing section (the disagreements are listed above it)."""
        # The reason is our own text (figures and thresholds), not the corpus's: not escaped.
        return f"\n## Verdict\n\n- {self.outcome.value}: {self.reason}\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "reason": self.reason,
            "lowerBound": self.lower_bound,
            "policy": self.policy.model_dump(by_alias=True),
        }


def _lower_bound(report: CalibrationReport, agreement: str) -> float | None:
    c = report.confusion
    if agreement == "accuracy":
        interval = wilson(c.true_accept + c.true_reject, c.n)
    else:
        interval = cohen_kappa_interval(
            c.true_accept, c.false_accept, c.false_reject, c.true_reject
        )
    return interval[0] if interval is not None else None


def _nothing_measured(report: CalibrationReport) -> str:
    if report.unlabeled == report.rows:
        return f"no row has a human label (ACCEPT or REJECT): 0 of {report.rows} rows scored"
    return (
        f"the judge produced nothing parseable: 0 of {report.rows} rows scored "
        f"({report.skipped_pending} PENDING)"
    )


def judge_calibration(
    report: CalibrationReport, policy: CalibrationPolicy | None = None
) -> CalibrationVerdict:
    """Whether ``report`` clears ``policy`` (None: the defaults of CalibrationPolicy).

    In order: failed judge calls (a part of the corpus was not judged), nothing scored, fewer
    rows than ``minN``, then the lower bound of the agreement's interval against
    ``minLowerBound``. A kappa that is undefined (every label and decision of one class) is
    below any bar: it measured no agreement beyond chance.
    """
    bar = policy or CalibrationPolicy()
    if report.errors:
        every = report.retryable_errors == report.errors
        return CalibrationVerdict(
            CalibrationOutcome.JUDGE_FAILED,
            f"{report.errors} of {report.rows} judge calls failed"
            + ("; retry" if every else "; check the judge model and its settings"),
            bar,
            retryable=every,
        )
    if report.n == 0:
        return CalibrationVerdict(
            CalibrationOutcome.NOTHING_MEASURED, _nothing_measured(report), bar
        )
    lower = _lower_bound(report, bar.agreement)
    shown = "undefined" if lower is None else f"{lower:.3f}"
    figure = f"{bar.agreement} lower bound {shown} (95% interval, n={report.n})"
    if report.n < bar.min_n:
        return CalibrationVerdict(
            CalibrationOutcome.BELOW_BAR,
            f"n={report.n} rows scored, fewer than minN {bar.min_n}; {figure}",
            bar,
            lower,
        )
    if lower is None or lower < bar.min_lower_bound:
        return CalibrationVerdict(
            CalibrationOutcome.BELOW_BAR,
            f"{figure} below minLowerBound {bar.min_lower_bound:g}; "
            f"{len(report.disagreements)} disagreement(s)",
            bar,
            lower,
        )
    return CalibrationVerdict(
        CalibrationOutcome.PASSED,
        f"{figure} >= minLowerBound {bar.min_lower_bound:g}, n={report.n} >= minN {bar.min_n}",
        bar,
        lower,
    )
