"""The run's protocol: what must match for two runs to be compared (reference 5.2).

Built from the session's options, dataset and graders; read by the pre-flight (before any item
runs), the store (to refuse a run key reused under another protocol) and the finished run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from goldeval.core.models import Mode
from goldeval.dataset.case import selected_attempts
from goldeval.providers.base import CallableProvider
from goldeval.results.run_document import config_fingerprint

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession


def provider_label(state: GoldenSession) -> str | None:
    """How the protocol names a ``golden_provider`` override (the team's own app), once this
    process has built the fixture: ``callable:<name>`` or the provider's ``name``; None for
    the built-in provider or before any item ran (an xdist controller runs none: its
    workers send theirs, see goldeval.pytest_plugin.xdist)."""
    fixtures = state._fixtures
    if fixtures is None:
        return None
    used = fixtures[0]
    if isinstance(used, CallableProvider) or (callable(used) and not hasattr(used, "complete")):
        return f"callable:{getattr(used, 'name', getattr(used, '__name__', 'app'))}"
    if getattr(used, "name", None) and used is not state._provider:
        return str(used.name)
    return None


def protocol_for(state: GoldenSession, selected: list[str]) -> dict[str, Any]:
    ds = state.load()
    s = state.settings
    live = s.mode is not Mode.FIXTURE
    # Only graders that grade some row of the dataset: installing a new grader type must not
    # make every existing baseline incomparable, and every shard or selection of one dataset
    # gets the same hash.
    used = state.graders_in_use()
    grader_config = config_fingerprint(ds.grader_config(used))
    provider_name = s.provider.name if live else None
    if live:
        provider_name = provider_label(state) or state.workers_provider or provider_name

    # The attempts actually run, when they are not 1..attempts for every case (-k attempt2).
    # Not with auto:MAX, whose rule decides the attempts per case (attemptsRule says so).
    partial = (
        None if s.adaptive else selected_attempts(state.collector.attempts, selected, s.attempts)
    )
    return {
        "datasetId": ds.id,
        "datasetHash": ds.hash,
        "packId": ds.pack.version if ds.pack else None,
        "packHash": ds.pack.hash if ds.pack else None,
        "mode": s.mode.protocol_name,
        "attempts": s.attempts,
        **({"attemptsRule": f"auto:{s.attempts}"} if s.adaptive else {}),
        **({"selectedAttempts": partial} if partial is not None else {}),
        "selectedCaseIds": sorted(selected),
        "graderConfigHash": grader_config,
        "provider": provider_name,
        "model": (s.provider.model if live else None),
        "judgeEnabled": bool(s.judge and live),
        "judgeModel": (s.judge_model or s.provider.model) if (s.judge and live) else None,
        # The dataset's rules (dataset.profiles); comparability rests on graderConfigHash,
        # which covers it, this names it for reports.
        "profile": ds.manifest.profile_name,
    }


def early_protocol(state: GoldenSession) -> tuple[dict[str, Any], dict[str, Any]]:
    """Protocol and configuration known before the selection is complete (for the store)."""
    protocol = protocol_for(state, [])
    protocol.pop("selectedCaseIds")
    s = state.settings
    configuration = {
        "mode": s.mode.protocol_name,
        "goldenMode": s.mode.value,
        "repetitions": s.attempts,
        "provider": s.provider.name,
        "runKey": s.run_key,
    }
    return protocol, configuration


def variant_protocol(state: GoldenSession, name: str) -> dict[str, Any]:
    """What a variant's run adds to its protocol: its name, the fingerprint of the prompt
    templates it sent (its own parts over the manifest's; None when there are none) and, when
    it names request options of its own, their fingerprint."""
    variant = state.variants.get(name) if state.variants is not None else None
    if variant is None:
        return {}
    spec = variant.prompt_spec(state.load().manifest.prompt)
    prompt_hash = None
    if spec is not None and (spec.system is not None or spec.user is not None):
        prompt_hash = config_fingerprint({"system": spec.system, "user": spec.user})
    protocol: dict[str, Any] = {"variant": name, "promptHash": prompt_hash}
    if variant.options:  # its own request options over the manifest's (absent: none)
        protocol["optionsHash"] = config_fingerprint(variant.options)
    s = state.settings
    judge = variant.judge
    if judge is not None and judge.model is not None and s.judge and s.mode is not Mode.FIXTURE:
        protocol["judgeModel"] = judge.model  # the model that scored its answers
    return protocol
