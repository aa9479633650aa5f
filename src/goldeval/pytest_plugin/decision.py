"""Baseline lookup → comparison → gate → exit status, for one finished run (controller only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goldeval.core.errors import BaselineError, ConfigError, GoldevalError
from goldeval.dataset.manifest import check_gate_policy, find_manifest, read_manifest
from goldeval.pytest_plugin.protocol import protocol_for, variant_protocol
from goldeval.pytest_plugin.variant_baselines import baseline_variants, variant_path
from goldeval.results.documents import RunDocument, typed_run
from goldeval.results.run_document import PROJECT_ROOT_HERE, project_relative
from goldeval.results.run_json import RunJson
from goldeval.verdict.baseline import (
    LoadedRun,
    default_candidates,
    first_comparable,
    load_baseline,
    save_baseline,
)
from goldeval.verdict.comparison import (
    PROTOCOL_KEYS,
    ComparisonResult,
    compare,
    protocol_differences,
)
from goldeval.verdict.decide import (
    Verdict,
    baseline_rejected,
    capture_summary,
    policy_from_manifest,
)
from goldeval.verdict.decide import decide as decide_verdict
from goldeval.verdict.exit_codes import ExitDecision
from goldeval.verdict.gate import GatePolicy

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession


@dataclass
class Decision:
    """The verdict on the session's run, with the fields it writes into run.json."""

    verdict: Verdict
    run_fields: RunJson = field(default_factory=lambda: RunJson())
    #: The run should be saved as a baseline once run.json is on disk.
    save_baseline: bool = False

    @property
    def code(self) -> int:
        return self.verdict.code

    @property
    def reason(self) -> str:
        return self.verdict.reason

    @property
    def exit(self) -> ExitDecision:
        return self.verdict.exit_decision


def policy_for(state: GoldenSession, live: bool) -> GatePolicy | None:
    return policy_from_manifest(state.load().manifest, live)


def explicit_baseline_path(state: GoldenSession, variant: str | None = None) -> Path | None:
    """``--golden-baseline`` as a path (``{variant}`` replaced by ``variant``'s name)."""
    return typed_path(state, state.settings.baseline, variant)


def typed_path(state: GoldenSession, typed: str | None, variant: str | None) -> Path | None:
    """A baseline path typed on the command line, relative to where pytest started, with
    ``{variant}`` replaced by the variant's name (goldeval.pytest_plugin.variant_baselines)."""
    if not typed:
        return None
    path = Path(variant_path(typed, variant))
    if not path.is_absolute():
        path = Path(state.config.invocation_params.dir) / path
    return path


#: What :func:`find_baseline` gives: (path, baseline, comparison), all None when none is found.
Found = tuple[Path | None, RunDocument | None, ComparisonResult | None]


def find_baseline(
    state: GoldenSession, run: RunDocument, live: bool, variant: str | None = None
) -> Found:
    """Explicit ``--golden-baseline``, else the first comparable file of the default lookup
    (a variant's run compares only with runs of the same variant: protocol ``variant``)."""
    path = explicit_baseline_path(state, variant)
    if path is not None:
        doc = load_baseline(path)
        return path, doc, compare(doc, run)
    if variant is None:  # the first comparable file wins; a later damaged one is not read
        candidates = default_candidates(state.project_root / "baselines", state.load().id, live)
        found = first_comparable(candidates, run)
    else:  # the variant's own files, each loaded once
        loaded = dict(lookup_candidates(state, state.load().id, live, variant))
        found = first_comparable(list(loaded), run, loaded.__getitem__)
    return found if found is not None else (None, None, None)


def lookup_candidates(
    state: GoldenSession, dataset_id: str, live: bool, variant: str | None
) -> list[tuple[Path, RunDocument]]:
    """The default lookup's baselines, loaded; for a variant's run only that variant's (a
    baseline of another variant, or of no variant, is not its baseline: it is skipped, not
    reported as an incomparable one)."""
    found = [
        (path, load_baseline(path))
        for path in default_candidates(state.project_root / "baselines", dataset_id, live)
    ]
    if variant is None:
        return found
    return [(p, d) for p, d in found if d.protocol is not None and d.protocol.variant == variant]


def decide(
    state: GoldenSession,
    run: RunDocument,
    pytest_status: int,
    *,
    live: bool,
    variant: str | None = None,
    found: Found | None = None,
    **facts: Any,
) -> Decision:
    """The session's options and dataset → :func:`goldeval.verdict.decide.decide`.

    ``run``: the run pytest just built, typed once by the controller (``typed_run``).
    ``found``: the caller's :func:`find_baseline` result for it, when it already looked.

    ``facts``: how the session ended (:class:`goldeval.verdict.outcome.RunOutcome` fields).
    """
    # Where the run came from, so that `goldeval gate/compare` started anywhere find the same
    # gate policy and baselines (see docs/methodology.md, "Gating a saved run").
    # Paths relative to the project root ("." for the root itself): run.json is downloaded,
    # served and stored, and must not name the machine's folders (issue 33).
    fields: RunJson = {
        "projectRoot": PROJECT_ROOT_HERE,
        "goldenRoot": project_relative(state.golden_root, state.project_root),
    }
    # Notes already on the run (build_for's judge self-preference warning, ...) are kept:
    # fields["notes"] replaces the run's list, so it must start from it.
    notes: list[str] = list(run.notes)
    capture = state.settings.save_baseline is not None
    try:
        path, baseline, comparison = (
            (None, None, None) if capture else found or find_baseline(state, run, live, variant)
        )
    except BaselineError as exc:
        rejected = baseline_rejected(f"baseline rejected: {exc}")
        fields.update(rejected.run_fields())
        fields["notes"] = [*notes, rejected.reason]
        return Decision(rejected, fields)
    if path is not None:
        fields["baselinePath"] = project_relative(path, state.project_root)
    verdict = decide_verdict(
        run,
        baseline=baseline,
        comparison=comparison,
        policy=policy_for(state, live),
        live=live,
        gate_enabled=state.settings.gate,
        capture=capture,
        pytest_status=pytest_status,
        other_failures=bool(state.other_failures),
        **facts,
    )
    fields.update(verdict.run_fields())
    fields["notes"] = [*notes, *verdict.notes]
    return Decision(verdict, fields, save_baseline=capture and verdict.code == 0)


def save_requested_baseline(
    state: GoldenSession, run_json: Path, decision: Decision, variant: str | None = None
) -> Decision:
    """Save the just-written run.json (full cases) as the requested baseline (a variant's to
    ``--golden-save-baseline`` with ``{variant}`` replaced by its name)."""
    import json

    save_path = typed_path(state, state.settings.save_baseline, variant) or Path()
    full = json.loads(run_json.read_text(encoding="utf-8"))
    notes = list(full.get("notes") or [])
    verdict = decision.verdict
    try:
        run = LoadedRun(full, typed_run(full, run_json))
        save_baseline(run, save_path, force=state.settings.force_save_baseline)
        notes.append(f"baseline saved to {save_path}")
        verdict = verdict.with_reason(
            f"baseline captured: {capture_summary(run.typed)}, saved to {save_path}"
        )
    except BaselineError as exc:
        verdict = verdict.redecide(baseline_not_saved=str(exc))
        notes.append(verdict.reason)
    fields: RunJson = {
        "notes": notes,
        "exitDecision": {"code": verdict.code, "reason": verdict.reason},
    }
    return Decision(verdict, fields)


# ------------------------------------------------------------------------------------------
# Pre-flight: everything that does not need an answer is decided before the first model call.

#: Protocol keys known before any item runs: all of them but ``provider`` (a conftest override
#: of golden_provider names itself only once the fixture is built) and the selection (checked
#: apart, once collection is done).
PREFLIGHT_KEYS = frozenset(PROTOCOL_KEYS) - {"provider", "selectedAttempts", "selectedCaseIds"}


def preflight_baseline_file(state: GoldenSession) -> None:
    """Session start: a named ``--golden-baseline`` must exist (usage error), be intact and be
    of this dataset, mode and attempt count.

    Raises ConfigError (exit 4) for a missing file and BaselineError (exit 65) for one that
    is unreadable, tampered with or of another dataset/mode/attempts, before any item runs.
    """
    if state.settings.save_baseline is not None:
        return
    for variant in baseline_variants(state):
        _preflight_one_baseline(state, variant)


def _preflight_one_baseline(state: GoldenSession, variant: str | None) -> None:
    path = explicit_baseline_path(state, variant)
    if path is None:
        return
    if not path.is_file():
        # a FIFO, a folder or a link to a device exists: "not found" sent the user looking
        what = "is not a regular file" if path.exists() else "baseline file not found"
        raise ConfigError(
            f"--golden-baseline={state.settings.baseline}: {what} ({path})"
            + (f" for variant {variant!r}" if variant is not None else ""),
            hint="check the path, or leave the option out to use the default lookup under "
            "baselines/",
        )
    doc = load_baseline(path)
    s = state.settings
    if not s.gate or s.side_by_side or doc.protocol is None:
        return
    # What the options and the manifest already say (the rest waits for the collection):
    # another dataset's baseline, another mode or attempt count is refused right here.

    manifest_path = find_manifest(state.dataset_dir)
    if manifest_path is None:
        return
    try:
        dataset_id = read_manifest(manifest_path).version
    except GoldevalError:
        return  # reported by the collection
    known = {"datasetId": dataset_id, "mode": s.mode.protocol_name, "attempts": s.attempts}
    candidate = typed_run({"protocol": {**doc.protocol.dump(), **known}})
    diffs = [d for d in protocol_differences(doc, candidate) if d.key in known]
    if diffs:
        more = f" (+{len(diffs) - 1} more)" if len(diffs) > 1 else ""
        raise BaselineError(
            f"comparison invalid: {diffs[0].message}{more}",
            path=path,
            hint="pick the baseline of this dataset and protocol, or capture one",
        )


def preflight(state: GoldenSession, selected: list[str] | None) -> str | None:
    """After collection, before any item runs: the reason the baseline comparison is already
    known to be invalid (the run would exit 65 whatever the answers), else None.

    Checks the protocol keys known now (:data:`PREFLIGHT_KEYS`, plus ``selectedCaseIds`` when
    ``selected`` is given) against the explicit baseline, or against every candidate of the
    default lookup (refused only when none is comparable). Also checks that every
    ``grader.<name>`` threshold of the manifest names a registered grader (DatasetError).
    Skipped for capture runs, ``--golden-no-gate`` and several models side by side.
    """

    try:
        dataset = state.load()
    except GoldevalError:
        return None  # a row or manifest error: collection reports it (a collection error)
    if dataset.manifest.gate is not None:
        names = {g.name for g in state.get_graders()}
        check_gate_policy(dataset.manifest.gate, dataset.manifest_path, names)
    s = state.settings
    if s.save_baseline is not None or not s.gate or s.side_by_side:
        return None
    live = s.mode.value != "fixture"
    protocol = protocol_for(state, selected or [])
    (variant,) = baseline_variants(state)  # one run: side-by-side sessions returned above
    if variant is not None:  # one variant picked: its run's protocol names it
        protocol.update(variant_protocol(state, variant))
    keys = set(PREFLIGHT_KEYS)
    # A resumed key merges earlier attempts; nothing selected is pytest's own exit 5.
    if selected and not s.run_key:
        keys.add("selectedCaseIds")
    explicit = explicit_baseline_path(state, variant)
    if explicit is not None:
        docs = [(explicit, load_baseline(explicit))]
    else:
        docs = lookup_candidates(state, dataset.id, live, variant)
    first_reasons: list[str] | None = None
    for _path, doc in docs:
        if doc.protocol is None:
            return None  # a reference-format baseline: compared after the run
        candidate = typed_run({"protocol": {**protocol, "provider": doc.protocol.provider}})
        diffs = [d for d in protocol_differences(doc, candidate) if d.key in keys]
        if not diffs:
            return None
        if first_reasons is None:
            first_reasons = [d.message for d in diffs]
    if first_reasons is None:
        return None
    more = f" (+{len(first_reasons) - 1} more)" if len(first_reasons) > 1 else ""
    return f"comparison invalid: {first_reasons[0]}{more} (baseline {docs[0][0]})"
