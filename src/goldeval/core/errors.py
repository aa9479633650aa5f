"""Error types a user can act on.

Every user mistake (a broken row, a missing fixture, a tampered baseline) is raised as one of
these, never as a bare ``ValueError``: the plugin turns them into collection or usage errors
that name the file, line and field without a traceback from our code.
"""

from __future__ import annotations

import enum
import os
from typing import ClassVar

from goldeval.core.textsafe import safe_text


class ExitKind(enum.Enum):
    """What a :class:`GoldevalError` means for the exit status of a command.

    The numbers live in ``goldeval.verdict.exit_codes`` (``code_for_error``), the one place exit
    codes are decided; core sits below verdict in the layers and names only the kind.
    """

    #: The command, an option or an input must change (exit 4, pytest's usage error).
    USAGE = "usage"
    #: A run or baseline document that cannot be compared: damaged, tampered, of another
    #: protocol (exit 65, "comparison invalid").
    NOT_COMPARABLE = "not-comparable"


class GoldevalError(Exception):
    """Base class: a problem the user can fix, rendered without a traceback.

    ``exit_kind`` says which exit status a command ends with when this error stops it; a
    subclass sets its own (see :class:`BaselineError`).
    """

    exit_kind: ClassVar[ExitKind] = ExitKind.USAGE

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = os.fspath(path) if path is not None else None
        self.line = line
        self.field = field
        self.hint = hint

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        field = f"{self.field}: " if self.field else ""
        hint = f" ({self.hint})" if self.hint else ""
        return f"{where}{field}{self.message}{hint}"


class DatasetError(GoldevalError):
    """A dataset, manifest, fixture or pack file is invalid."""


class ConfigError(GoldevalError):
    """An option, ini value or environment variable is invalid."""


class BaselineError(GoldevalError):
    """A baseline or saved run cannot be used (truncated, tampered, of another protocol):
    the documents are not comparable."""

    exit_kind: ClassVar[ExitKind] = ExitKind.NOT_COMPARABLE


class BaselineMissing(BaselineError):
    """The baseline or run file named is not there or cannot be read (a folder, no
    permission): the path is wrong, nothing was compared, so it is a usage error."""

    exit_kind: ClassVar[ExitKind] = ExitKind.USAGE


#: ERROR kinds that a retry cannot fix: the model, the configuration or the row must change.
#: They are never retried by the HTTP providers, and a run whose errors include one exits 4
#: ("configuration error"), not 75 ("retry the run"); see goldeval.verdict.exit_codes.
NON_RETRYABLE_KINDS = frozenset(
    {
        "CONTEXT_LENGTH",  # the prompt does not fit the model's context window
        "MODEL_NOT_FOUND",  # the model is not on the server (not pulled, misspelt, no access)
        "NOT_FOUND",  # 404 without a model named: wrong base URL or path
        "BAD_REQUEST",  # 400/422 and other 4xx: the server rejects this request as built
        "AUTH_FAILED",  # 401/403: the credentials are wrong or lack permission
        "CONFIG_ERROR",  # the provider cannot call at all as configured (no model, ...)
        "GRADER_TIMEOUT",  # a grader (a row's regex) ran over its time budget
        "TEMPLATE_ERROR",  # the manifest's prompt template does not render for this row
        # The provider's body cannot be read as an answer (not UTF-8, not JSON, nested past
        # the json_depth limit, a malformed tool call): the built-in providers never retry it
        # (issue 32: the same server answers the same bytes again).
        "PARSER_ERROR",
        "RESPONSE_TOO_LARGE",  # the body is over the response_bytes limit (issue 32)
        "SECRET_IN_ANSWER",  # record mode: the answer echoed a credential of the run
    }
)
#: Record mode refused an answer that held a secret the run knows (goldeval.core.secrets).
SECRET_IN_ANSWER = "SECRET_IN_ANSWER"


def is_retryable(kind: str | None) -> bool:
    """Whether another try (or a rerun) of an attempt that failed with ``kind`` may help."""
    return kind not in NON_RETRYABLE_KINDS


class ProviderError(Exception):
    """An infrastructure failure of a provider: the attempt is ERROR, never FAIL.

    ``kind`` is one of the reference's error kinds (MODEL_UNAVAILABLE, HTTP_ERROR, RATE_LIMIT,
    TIMEOUT, TRUNCATED_STREAM, EMPTY_RESPONSE, PROVIDER_ERROR, JUDGE_ERROR, RETRIEVER_MISS) or
    one of :data:`NON_RETRYABLE_KINDS` (PARSER_ERROR and RESPONSE_TOO_LARGE among them).
    ``message`` says what happened, without the number of tries: ``tries`` carries it, and
    whoever shows the error adds it once.
    Messages must never contain credentials: providers build them from redacted URLs.
    """

    def __init__(self, kind: str, message: str, *, tries: int = 1) -> None:
        # Messages quote untrusted text (an error body, an app's exception, an answer): its
        # control and bidi characters are escaped here, once, for every place that shows it.

        message = safe_text(message)
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.tries = tries

    @property
    def retryable(self) -> bool:
        return is_retryable(self.kind)


class DatasetErrors(DatasetError):
    """Several problems in one file, reported together so a user fixes them in one pass."""

    def __init__(self, errors: list[GoldevalError], *, limit: int = 20) -> None:
        self.errors = errors
        shown = [str(e) for e in errors[:limit]]
        if len(errors) > limit:
            shown.append(f"... and {len(errors) - limit} more")
        super().__init__("\n".join(shown))

    def __str__(self) -> str:
        return self.message
