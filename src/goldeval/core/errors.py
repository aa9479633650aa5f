"""Error types a user can act on, and the map of every exception goldeval raises.

Every user mistake (a broken row, a missing fixture, a tampered baseline) is raised as one of
these, never as a bare ``ValueError``: the plugin turns them into collection or usage errors
that name the file, line and field without a traceback from our code.

The exception tree (like httpx's ``_exceptions.py``, the whole tree is listed here; a class
lives with the layer that raises it, so the store's errors stay out of core, and
tests/unit/test_exception_tree.py checks that this list and the code agree)::

    GoldevalError                       a problem the user fixes; exit_kind → the exit code
    ├── DatasetError                    a dataset, manifest, fixture or pack file is invalid
    │   ├── DatasetErrors               several of them in one file, reported together
    │   └── InputFileTooLarge           (core.safe_files) also a LimitExceeded
    ├── ConfigError                     an option, ini value or environment variable
    ├── BaselineError                   not comparable: truncated, tampered, other protocol (65)
    │   └── BaselineMissing             the file named is not there: a usage error (4)
    ├── LimitExceeded                   (core.limits) an input over one of the LIMITS
    │   └── InputFileTooLarge
    ├── ArtifactError                   (results.run_folder) a path that must not be written
    └── FinalisationError               (results.finalise) a non-file step of finishing failed
    ProviderError                       infrastructure: the attempt is ERROR, never FAIL;
                                        ``kind`` is an ErrorKind (retryable or not)
    StoreError                          (store.errors) the run store cannot be used
    └── RunConflictError                a run key already holds another run
    GraderTimeout                       (graders.budget) a row's pattern ran over its budget
    TemplateProblem                     (dataset.templates) a template that does not render
    ProtocolMismatch                    (pytest_plugin.recording) a resumed key's protocol (65)
    Problem                             (server.problems) an HTTP problem+json answer
    KeyConfigError                      (server.auth) a ValueError: unusable API key settings
    HugeInteger                         (core.json_numbers) a ValueError: an integer past a float

Internal signals that never leave their module: ``_DuplicateKey`` (dataset.row_parser) and
``Drop`` (testing.llm_server, the fake server's dropped connection).
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


class ErrorKind(str, enum.Enum):
    """Every kind an ERROR attempt can have: the one list (issue 31/34).

    A ``str`` enum: records, run.json and the store keep the plain name (``"TIMEOUT"``), and a
    member compares equal to it. ``retryable`` is False for the kinds no retry can fix (the
    model, the configuration or the row must change): the HTTP providers never retry them, and
    a run whose errors include one exits 4, not 75 (goldeval.verdict.exit_codes).
    """

    def __new__(cls, value: str, retryable: bool, meaning: str) -> ErrorKind:
        member = str.__new__(cls, value)
        member._value_ = value
        member.retryable = retryable
        member.meaning = meaning
        return member

    retryable: bool
    meaning: str

    # The reference's kinds (java-ai-golden-semantics): infrastructure, retry the run.
    MODEL_UNAVAILABLE = ("MODEL_UNAVAILABLE", True, "the server cannot be reached or is down")
    HTTP_ERROR = ("HTTP_ERROR", True, "5xx or an unexpected status")
    RATE_LIMIT = ("RATE_LIMIT", True, "429: too many requests")
    TIMEOUT = ("TIMEOUT", True, "no answer within the call's time bound")
    EMPTY_RESPONSE = ("EMPTY_RESPONSE", True, "the answer had no text and no tool call")
    PROVIDER_ERROR = ("PROVIDER_ERROR", True, "the provider failed otherwise (an app's error)")
    JUDGE_ERROR = ("JUDGE_ERROR", True, "the judge call failed (soft signal, never a gate)")
    RETRIEVER_MISS = ("RETRIEVER_MISS", True, "the retriever found nothing")
    TRUNCATED_STREAM = ("TRUNCATED_STREAM", True, "a stream ended without a finish reason")
    EMBEDDING_ERROR = ("EMBEDDING_ERROR", True, "the embeddings call of a grader failed")
    WORKER_CRASH = ("WORKER_CRASH", True, "the item's xdist worker died; no report arrived")
    TEST_ERROR = ("TEST_ERROR", True, "the golden test itself raised (a plugin, a fixture)")
    SETUP_ERROR = ("SETUP_ERROR", True, "the golden item's setup raised")
    GRADER_ERROR = ("GRADER_ERROR", True, "a grader raised an exception")
    RERUN = ("RERUN", True, "a rerun plugin ran the attempt a second time")
    PROVIDER_RAISED = ("PROVIDER_RAISED", True, "the provider (or judge) called pytest.fail")
    RETRIEVER_ERROR = ("RETRIEVER_ERROR", True, "the retriever raised or called pytest.fail")
    # No retry can fix these: exit 4 ("configuration error").
    CONTEXT_LENGTH = ("CONTEXT_LENGTH", False, "the prompt does not fit the context window")
    MODEL_NOT_FOUND = ("MODEL_NOT_FOUND", False, "the model is not on the server")
    NOT_FOUND = ("NOT_FOUND", False, "404 without a model named: wrong base URL or path")
    BAD_REQUEST = ("BAD_REQUEST", False, "400/422 and other 4xx: the request as built")
    AUTH_FAILED = ("AUTH_FAILED", False, "401/403: wrong credentials or no permission")
    CONFIG_ERROR = ("CONFIG_ERROR", False, "the provider cannot call as configured")
    GRADER_TIMEOUT = ("GRADER_TIMEOUT", False, "a grader (a row's regex) ran over its budget")
    TEMPLATE_ERROR = ("TEMPLATE_ERROR", False, "the prompt template does not render for a row")
    PARSER_ERROR = (
        "PARSER_ERROR",
        False,
        "the body cannot be read as an answer (not JSON, nested past json_depth, ...)",
    )
    RESPONSE_TOO_LARGE = ("RESPONSE_TOO_LARGE", False, "the body is over response_bytes")
    SECRET_IN_ANSWER = ("SECRET_IN_ANSWER", False, "record mode: the answer echoed a secret")


#: ERROR kinds that a retry cannot fix (:attr:`ErrorKind.retryable` False).
NON_RETRYABLE_KINDS = frozenset(kind.value for kind in ErrorKind if not kind.retryable)
#: Record mode refused an answer that held a secret the run knows (goldeval.core.secrets).
SECRET_IN_ANSWER = ErrorKind.SECRET_IN_ANSWER.value


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


#: What to do instead of a rerun plugin (``--reruns``, ``--count``).
RERUN_HINT = (
    "a golden attempt must run once: repeat attempts with --golden-attempts=N, which records "
    "every try"
)
