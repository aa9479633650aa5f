"""How a session ended, as facts for the one verdict (``goldeval.verdict``), and the exit status.

The controller gathers what happened (early stop, signal, reruns, the store, a resumed key)
into keyword facts of :class:`~goldeval.verdict.outcome.RunOutcome`; ``verdict`` decides the
code and reason; :func:`apply_exit` is the one place a finished session's exit status is set
(tests/unit/test_exit_policy.py keeps it so). Nothing here chooses an exit code.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.core.errors import GoldevalError
from goldeval.core.settings import mask_secrets, redact_url
from goldeval.results.documents import typed_run
from goldeval.results.run_json import RunJson
from goldeval.verdict.exit_codes import ExitDecision
from goldeval.verdict.outcome import RunOutcome, StoppedEarly
from goldeval.verdict.run_status import run_status

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession


@dataclass
class SessionEnding:
    """What ended the session, known before the run document is built."""

    #: pytest's status, a stop that was not Ctrl-C turned back into 1 (failures) or 0.
    pytest_status: int
    #: Ctrl-C or SIGTERM, as opposed to a run loop stopped on purpose (-x, --maxfail).
    interrupted: bool
    stopped_early: StoppedEarly | None = None
    duplicates: tuple[str, ...] = ()
    signal: str | None = None
    rerun_command: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    def outcome_facts(self) -> dict[str, Any]:
        """Keyword facts for ``RunOutcome`` / ``verdict.decide``."""
        return {
            "stopped_early": self.stopped_early,
            "duplicates": self.duplicates,
            "signal": self.signal,
            "rerun_command": self.rerun_command,
            **self.facts,
        }


def ended_by_user(status: int, state: GoldenSession, interrupt: BaseException | None) -> bool:
    """A real interruption (Ctrl-C, SIGTERM), as opposed to a run loop stopped on purpose.

    pytest turns ``session.shouldstop`` (``--sw``, a plugin) into ``Session.Interrupted`` and
    xdist turns ``-x``/``--maxfail`` into its own ``Interrupted``; both subclass
    KeyboardInterrupt and give pytest's status 2, but nobody pressed Ctrl-C: those runs are
    stopped early (INCOMPLETE), not INTERRUPTED. A SIGTERM/SIGINT is turned into such a
    ``shouldstop`` too (``stopping.StopRequest``), told apart by ``state.stopped_by``.
    """
    if status != pytest.ExitCode.INTERRUPTED:
        return False
    if state.stopped_by is not None or interrupt is None:
        return True
    if isinstance(interrupt, pytest.Session.Interrupted):
        return False
    if type(interrupt).__module__.startswith("xdist"):
        return "keyboard-interrupt" in str(interrupt)  # a worker got Ctrl-C
    return type(interrupt) is KeyboardInterrupt


def stop_reason(session: pytest.Session, interrupt: BaseException | None) -> str:
    for why in (session.shouldfail, session.shouldstop, interrupt):
        text = str(why or "").strip()
        if text and text != "True":
            return text
    return "the session stopped before running every selected item"


def rerun_command(state: GoldenSession) -> str:
    """The command that retries this run (stored in run.json, named by the exit decision)."""
    return "rerun: " + shlex.join(["pytest", *rerun_args(state)])


def rerun_args(state: GoldenSession) -> list[str]:
    """The arguments that retry this run: the same arguments, the run key kept. One list for
    run.json's ``rerunCommand`` and the terminal's retry hint (goldeval.pytest_plugin.retry).

    Every secret the session knows is masked (also percent-encoded forms, and a password
    holding a space or a quote, which no URL pattern spans), then URLs lose their userinfo
    and credential parameters.
    """
    s = state.settings
    mask = session_mask(state)
    # A path typed on the command line is relative to where pytest was started; an ini value
    # given with -o (golden_root=..., golden_out=...) to the project root.
    here, root = Path(state.config.invocation_params.dir), Path(state.config.rootpath)
    args: list[str] = []
    for raw in state.config.invocation_params.args:
        arg = str(raw)
        ini = (args[-1:] == ["-o"] or args[-1:] == ["--override-ini"]) and "=" in arg
        if arg.startswith("--override-ini="):
            arg = "--override-ini=" + _relative_arg(arg.partition("=")[2], root)
        else:
            arg = _relative_arg(arg, root if ini else here)
        args.append(_URL.sub(lambda m: redact_url(m.group(0)), mask(arg)))
    if s.run_key and not any(a.startswith("--golden-run-key") for a in args):
        args.append(f"--golden-run-key={s.run_key}")
    return args


def session_mask(state: GoldenSession) -> Callable[[str], str]:
    """The session's masker (every secret the run knows); when the dataset does not load (a
    collection error) the settings' own key and password."""
    try:
        return state.masker.mask_message
    except GoldevalError:
        provider = state.settings.provider
        secrets = [v for v in (provider.api_key, provider.password) if v]
        return lambda text: mask_secrets(text, secrets)


def _relative_arg(arg: str, here: Path) -> str:
    """``arg`` with an absolute path of this machine (the whole argument, or the value of
    ``--option=PATH`` / ``-o key=PATH``) made relative to ``here``, where pytest was started:
    the command is stored in run.json, which is downloaded and served, and is run again from
    the same folder (issue 33). Only a path whose folder exists is rewritten, so no other
    value is mistaken for one."""
    name, eq, value = ("", "", arg) if os.path.isabs(arg) else arg.partition("=")
    local = value.split("::", 1)[0]  # a node id: path::test
    if not os.path.isabs(local) or not os.path.exists(os.path.dirname(local) or local):
        return arg
    try:
        relative = os.path.relpath(value, here)
    except ValueError:  # another drive (Windows): kept as given
        return arg
    return f"{name}{eq}{Path(relative).as_posix()}"


#: A URL inside a command-line argument (``--golden-base-url=http://u:p@host``).
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")


def session_ending(
    state: GoldenSession,
    session: pytest.Session,
    *,
    interrupt: BaseException | None,
    expected: int | None,
    duplicates: list[str],
    selected: list[str] | None = None,
) -> SessionEnding:
    """The facts of how ``session`` ended (before earlier sessions of a run key are merged)."""
    status = int(session.exitstatus)
    interrupted = ended_by_user(status, state, interrupt)
    # auto:MAX: the attempts its rule left out were never meant to run.
    left_out = state.adaptive.not_needed if state.adaptive is not None else 0
    not_run = max(0, expected - left_out - len(state.collector)) if expected is not None else 0
    early = not interrupted and (
        not_run > 0 or (expected is None and (bool(session.shouldstop) or bool(session.shouldfail)))
    )
    if status == pytest.ExitCode.INTERRUPTED and not interrupted:
        # Not Ctrl-C: decide as pytest would have without the stop (failures give 1).
        status = pytest.ExitCode.TESTS_FAILED if session.testsfailed else pytest.ExitCode.OK
    return SessionEnding(
        pytest_status=int(status),
        interrupted=interrupted,
        stopped_early=StoppedEarly(
            stop_reason(session, interrupt),
            not_run,
            tuple(sorted(set(selected or ()) - set(state.collector.case_ids(None)))),
        )
        if early
        else None,
        duplicates=tuple(duplicates),
        signal=state.signal_received if interrupted else None,
        rerun_command=rerun_command(state),
    )


def record_ending(run: RunJson, ending: SessionEnding, decision: ExitDecision) -> None:
    """Write how the session ended and its decision into the run document.

    An unfinished run is never COMPLETED: reruns and early stops make it INCOMPLETE, a signal
    INTERRUPTED; the fields are what ``RunOutcome.from_run`` reads back, so ``goldeval gate``
    on the saved run decides the same, and the status is the one
    :func:`~goldeval.verdict.run_status.run_status` gives that outcome (the store records the
    same: ``store.recorder``).
    """
    notes = run.setdefault("notes", [])
    if ending.duplicates:
        run["duplicateAttempts"] = list(ending.duplicates[:50])
    if ending.stopped_early is not None:
        stop = ending.stopped_early
        run["incomplete"] = True
        run["stoppedEarly"] = {"reason": stop.reason, "attemptsNotRun": stop.attempts_not_run}
        if stop.cases_not_run:
            run["stoppedEarly"]["casesNotRun"] = list(stop.cases_not_run)
        notes.append(stop.describe())
    if ending.signal:
        run["incomplete"] = True
        run["interruptedBy"] = ending.signal
    store_error = ending.facts.get("store_error")
    if store_error:
        run["storeError"] = store_error
    conflict = ending.facts.get("store_conflict")
    if conflict:
        run["storeConflict"] = conflict
    if (ending.duplicates or ending.signal or store_error or conflict) and decision.reason not in (
        notes
    ):
        notes.append(decision.reason)
    # What the session weighed beyond the document, so a later `goldeval gate` decides the same.
    run["pytestStatus"] = ending.pytest_status
    run["status"] = run_status(RunOutcome.from_run(typed_run(run)))
    if ending.rerun_command:
        run["rerunCommand"] = ending.rerun_command
    run["exitDecision"] = {"code": decision.code, "reason": decision.reason}


#: The finished session's exit decision (``exit_guard`` keeps a later hook from undoing it).
DECIDED_EXIT = pytest.StashKey[ExitDecision]()


def apply_exit(session: pytest.Session, decision: ExitDecision) -> None:
    """Set the finished session's exit status: the only place it is set (after the run)."""
    session.exitstatus = decision.code
    session.config.stash[DECIDED_EXIT] = decision


def selection_left_out(state: GoldenSession, ending: SessionEnding) -> None:
    """A resumed run key whose earlier session stopped before grading some of its selected
    cases (``stoppedEarly.casesNotRun``), which this one did not grade either (``-k``,
    ``-m``, node ids left them out): the run is not whole, whatever this session graded.
    Weighed as an early stop (INCOMPLETE, exit 1), never a COMPLETED run of the narrower
    selection (a run stopped early, then resumed with ``-k`` on its graded cases, was
    COMPLETED and passed its gate)."""
    recorder = state.recorder
    if recorder is None or ending.stopped_early is not None or ending.interrupted:
        return
    earlier = recorder.cases_not_run()
    missing = sorted(set(earlier) - set(state.collector.case_ids(None)))
    if not missing:
        return
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    per_case = state.settings.attempts if isinstance(state.settings.attempts, int) else 1
    ending.stopped_early = StoppedEarly(
        f"--golden-run-key={state.settings.run_key}: {len(missing)} case(s) its run selected "
        f"are still not graded ({shown}); resume it with the whole selection (no -k, -m or "
        "node ids narrowing it)",
        len(missing) * max(1, per_case),
        tuple(missing),
    )
