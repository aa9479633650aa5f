"""Runs as the store sees them: a run.json-shaped document rebuilt from the stored attempts.

``goldeval show/export/gate --run-key`` and the evaluation service read runs through this, so
a stored run reports the same values as its run.json (tests/store/test_store_views.py).
"""

from __future__ import annotations

import os
from typing import Any

from goldeval.core.errors import GoldevalError
from goldeval.dataset.case import selected_attempts
from goldeval.results.metrics import MetricsAccumulator
from goldeval.results.rollup import COUNTER_KEYS, Counters
from goldeval.results.run_document import RUN_DOCUMENT, RunCollector, relative_origin_fields


def run_document(store: Any, run_id_or_key: str) -> dict[str, Any]:
    """A run.json-shaped document rebuilt from the store (all shards of a run key)."""
    row = store.get_run(run_id_or_key)
    if row is None:
        raise GoldevalError(
            f"no run {run_id_or_key!r} in the store", hint="goldeval runs lists them"
        )
    infos = {c["caseId"]: c for c in store.cases(row.run_id)}
    collector = RunCollector()  # the same roll-up and order as a pytest run
    variants: set[str] = set()
    for attempt in store.attempts(row.run_id):
        info = infos.get(attempt["caseId"]) or {
            "caseId": attempt["caseId"],
            "kinds": ["GENERATION"],
            "prompt": "",
        }
        # A variant session's attempts are its variants' (two may share a model, or have
        # none): keyed by the variant column, none is folded over another's.
        variant = attempt.pop("variant", None)
        if variant is not None:
            variants.add(variant)
        collector.add({"case": info, "attempt": attempt, "variant": variant})
    counters = Counters()
    acc = MetricsAccumulator()
    cases = list(collector.iter_cases())
    for case in cases:
        counters.add(case)
        acc.add(case)
    protocol = dict(row.protocol)
    protocol["selectedCaseIds"] = sorted(collector.infos)

    # As in a pytest run's protocol: the attempts stored, when not 1..attempts for every case.
    partial = (
        None  # --golden-attempts=auto:MAX: its rule decides the attempts per case
        if protocol.get("attemptsRule")
        else selected_attempts(
            collector.attempts, collector.infos, int(protocol.get("attempts") or 1)
        )
    )
    if partial is not None:
        protocol["selectedAttempts"] = partial
    doc: dict[str, Any] = {
        "runId": row.run_id,
        "runKey": row.run_key,
        "status": row.status,
        "datasetVersion": row.dataset_id,
        "datasetHash": row.dataset_hash,
        "model": row.model,
        "protocol": protocol,
        "configuration": row.configuration,
        **counters.dump(),
        "metrics": acc.result(),
        "cases": cases,
    }
    if len(variants) > 1:
        # A variant session's one stored run: every variant's attempts together. Each
        # variant's run (and its own baseline) is its run folder; this is no run to regate.
        doc[SIDE_BY_SIDE_VARIANTS] = sorted(variants)
    if protocol.get("packHash"):
        doc["packHash"] = protocol["packHash"]
        doc["packDatasetVersion"] = protocol.get("packId")
    return _with_recorded_fields(doc, row.summary)


#: Set on the rebuilt document of a variant session (the variants its attempts ran).
SIDE_BY_SIDE_VARIANTS = "sideBySideVariants"

#: Fields of a run document computed from its attempts: always rebuilt from the store.
_FROM_ATTEMPTS = ("cases", "metrics")
#: Fields that judge the attempts the finished session saw (gate, comparison, exit code).
VERDICT_KEYS = ("qualityGate", "comparison", "exitDecision")


def _with_recorded_fields(doc: dict[str, Any], summary: Any) -> dict[str, Any]:
    """``doc`` (rebuilt from the attempts) completed with the run-level fields the finished
    session recorded (its run.json minus cases), so show/export report the same run as
    run.json: provider, fingerprint, commit, duration, gate, comparison, exit decision, notes.

    When the store holds other attempts than the recorded document covered (a shard or a
    session that finished later without finishing the run, or a crash after recording), the
    recorded verdicts are about other attempts: they are left out and a note says why, rather
    than showing a gate PASS for attempts it never saw.
    """
    recorded = summary.get(RUN_DOCUMENT) if isinstance(summary, dict) else None
    if not isinstance(recorded, dict):
        return doc

    counter_keys = tuple(COUNTER_KEYS)
    # The store row's status wins over the recorded document's: a later session of the run
    # key that was killed leaves the row RUNNING over the first session's COMPLETED summary
    # (its gate PASS is about another session's end).
    same = recorded.get("status") == doc.get("status") and all(
        recorded.get(k) == doc.get(k) for k in counter_keys
    )
    out: dict[str, Any] = dict(recorded)
    root = out.get("projectRoot")
    if isinstance(root, str) and os.path.isabs(root):
        # Recorded before run.json held relative paths (issue 33): made relative here too.
        out.update(
            relative_origin_fields(
                root, out.get("goldenRoot"), out.get("baselinePath"), out.get("configuration")
            )
        )
    for key in (*counter_keys, *_FROM_ATTEMPTS, SIDE_BY_SIDE_VARIANTS):
        if key not in doc:
            out.pop(key, None)
            continue
        out[key] = doc[key]
    # Store-only identity (not in run.json): the run key and the model of the stored row.
    out["runKey"] = doc["runKey"]
    out.setdefault("model", doc["model"])
    if not same:
        out["protocol"] = doc["protocol"]
        out["status"] = doc["status"]
        for key in VERDICT_KEYS:
            out.pop(key, None)
        then = "; run `goldeval gate --run-key KEY` to gate every attempt"
        if recorded.get("status") != doc.get("status"):
            note = (
                f"the store run is {doc.get('status')} but the last finished session recorded "
                f"{recorded.get('status')}: its gate, comparison and exit decision are not "
                f"shown{then}"
            )
        else:
            note = withheld_note(
                doc.get("attemptsTotal"),
                recorded.get("attemptsTotal"),
                "gate, comparison and exit decision",
                then,
            )
        out["notes"] = [*(out.get("notes") or []), note]
    return out


def withheld_note(held: Any, recorded: Any, withheld: str, then: str = "") -> str:
    """The note of a document whose recorded verdicts (:data:`VERDICT_KEYS`) are left out:
    the store holds another number of attempts (``held``) than the finished session recorded
    (``recorded``), so a gate PASS about attempts it never saw is not shown. One text for
    the store's run views and the service's run page."""
    return (
        f"the store holds {held} attempt(s) but the last finished session recorded "
        f"{recorded}: its {withheld} are not shown{then}"
    )


def side_by_side_problem(variants: Any, reference: str) -> str | None:
    """Why a stored run cannot be gated or compared as one run (None: it can): a variant
    session's stored run holds every variant's attempts together (``variants``: its rebuilt
    document's :data:`SIDE_BY_SIDE_VARIANTS`), and each variant was decided on its own run
    (and its own baseline) by the session."""
    if not variants:
        return None
    return (
        f"run {reference} is a variant session ({', '.join(map(str, variants))} side by side): "
        "its stored run holds every variant's attempts together, not one run to gate or "
        "compare; gate or compare a variant's own run folder (.goldeval/runs/<run id>), or "
        "read the session's exit decision"
    )
