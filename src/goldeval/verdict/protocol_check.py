"""Comparability of two runs: the protocol check and its messages.

Two documents that both carry our ``protocol`` object are comparable when every protocol key
agrees (:data:`PROTOCOL_KEYS`; ``selectedCaseIds`` compared as sets). ``provider``, ``model``,
``judgeEnabled`` and ``judgeModel`` take part only when both runs are LIVE, and ``judgeModel``
only when either side has the judge on. A document without ``protocol`` (for example a reference
baseline) is checked with the reference rules of section 5.2 (``datasetVersion``,
``datasetHash``, ``packDatasetVersion``/``packHash`` when both present, judge,
``configuration.mode``/``repetitions``/``includeRed``). Unlike the reference, which stops at the
first failing check, every differing key is reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from goldeval.results.documents import RunDocument
from goldeval.verdict.comparison_result import ProtocolDifference

#: Keys of our ``protocol`` object, in report order.
PROTOCOL_KEYS: tuple[str, ...] = (
    "datasetId",
    "datasetHash",
    "packId",
    "packHash",
    "mode",
    "attempts",
    # --golden-attempts=auto:MAX (absent otherwise): the attempts per case follow its rule.
    "attemptsRule",
    "selectedAttempts",
    "selectedCaseIds",
    "graderConfigHash",
    "provider",
    "model",
    "judgeEnabled",
    "judgeModel",
    # A variant's run compares only with runs of the same variant and prompt (absent on both
    # outside variant sessions: equal).
    "variant",
    "promptHash",
    "optionsHash",
)
#: Protocol keys that only take part in comparability when both runs are LIVE.
LIVE_ONLY_KEYS: tuple[str, ...] = ("provider", "model", "judgeEnabled", "judgeModel")
#: Configuration fields never listed as configuration differences (reference 5.2).
IGNORED_CONFIGURATION_KEYS: frozenset[str] = frozenset({"outputDir", "artifactMode", "javaVersion"})

#: How many case ids a selectedCaseIds message shows per side before "+N more".
MAX_IDS_SHOWN = 5

DATASET_VERSIONING_DOC = "docs/dataset-versioning.md"


def _protocol(doc: RunDocument) -> dict[str, Any] | None:
    """The ``protocol`` object as JSON: comparability is key by key, extra keys included
    (``selectedAttempts``), and a key absent differs from one present."""
    return doc.protocol.dump() if doc.protocol is not None else None


def _configuration(doc: RunDocument) -> dict[str, Any] | None:
    """The ``configuration`` object as JSON (every key takes part in its differences)."""
    return doc.configuration.dump() if doc.configuration is not None else None


def normal_mode(mode: Any) -> str | None:
    """DETERMINISTIC or LIVE (BENCHMARK counts as LIVE); anything else is unknown (None)."""
    if not isinstance(mode, str):
        return None
    upper = mode.upper()
    if upper in ("LIVE", "BENCHMARK"):
        return "LIVE"
    if upper in ("DETERMINISTIC", "FIXTURE"):
        return "DETERMINISTIC"
    return None


def run_mode(doc: RunDocument) -> str | None:
    """``protocol.mode`` or ``configuration.mode`` normalised to DETERMINISTIC/LIVE, else None."""
    if doc.protocol is not None and normal_mode(doc.protocol.mode) is not None:
        return normal_mode(doc.protocol.mode)
    configuration = doc.configuration
    return normal_mode(configuration.mode) if configuration is not None else None


def _fmt(value: Any) -> str:
    """A value as the reference prints it: null, true/false, plain strings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)


def _ids_text(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_IDS_SHOWN])
    more = len(ids) - MAX_IDS_SHOWN
    return f"{shown}, … +{more} more" if more > 0 else shown


def _mismatch(key: str, baseline: Any, candidate: Any) -> ProtocolDifference:
    return ProtocolDifference(
        key=key,
        baseline=baseline,
        candidate=candidate,
        message=f"{key} mismatch: baseline {_fmt(baseline)} vs candidate {_fmt(candidate)}",
    )


def _version_bump(
    id_key: str, dataset_id: Any, hash_key: str, baseline: Any, candidate: Any
) -> ProtocolDifference:
    return ProtocolDifference(
        key=hash_key,
        baseline=baseline,
        candidate=candidate,
        message=(
            f"dataset changed without a version bump: {id_key} {_fmt(dataset_id)} has hash "
            f"{_fmt(baseline)} in the baseline and {_fmt(candidate)} now; bump `version` in the "
            f"manifest (see {DATASET_VERSIONING_DOC})"
        ),
    )


def _id_list(value: Any) -> list[str] | None:
    if not isinstance(value, (list, tuple)):
        return None
    return [str(v) for v in value]


def _selected_ids_difference(baseline: Any, candidate: Any) -> ProtocolDifference | None:
    b_ids, c_ids = _id_list(baseline), _id_list(candidate)
    if b_ids is None or c_ids is None:
        if b_ids is None and c_ids is None and baseline == candidate:
            return None
        return _mismatch("selectedCaseIds", baseline, candidate)
    b_set, c_set = set(b_ids), set(c_ids)
    if b_set == c_set:
        return None
    only_b = sorted(b_set - c_set)
    only_c = sorted(c_set - b_set)
    parts = []
    if only_b:
        parts.append(f"{len(only_b)} only in the baseline ({_ids_text(only_b)})")
    if only_c:
        parts.append(f"{len(only_c)} only in the candidate ({_ids_text(only_c)})")
    return ProtocolDifference(
        key="selectedCaseIds",
        baseline=sorted(b_set),
        candidate=sorted(c_set),
        message=(
            f"selectedCaseIds mismatch: baseline {len(b_set)} cases vs candidate "
            f"{len(c_set)} cases; " + ", ".join(parts)
        ),
    )


def _attempts_text(value: Any) -> str:
    if not isinstance(value, dict):
        return "every attempt of every case"
    runs = sum(len(v) for v in value.values() if isinstance(v, list))
    return f"{runs} attempts of {len(value)} cases (a partial attempt selection)"


def _attempts_difference(baseline: Any, candidate: Any) -> ProtocolDifference:
    """selectedAttempts (absent = every attempt): summarised, never the whole map."""
    return ProtocolDifference(
        key="selectedAttempts",
        baseline=baseline,
        candidate=candidate,
        message=(
            f"selectedAttempts mismatch: baseline {_attempts_text(baseline)} vs candidate "
            f"{_attempts_text(candidate)}"
        ),
    )


def _live_keys_in_play(b: Mapping[str, Any], c: Mapping[str, Any]) -> set[str]:
    """The live-only keys that take part in comparability for these two protocols."""
    if not (normal_mode(b.get("mode")) == "LIVE" and normal_mode(c.get("mode")) == "LIVE"):
        return set()
    keys = {"provider", "model", "judgeEnabled"}
    if b.get("judgeEnabled") is True or c.get("judgeEnabled") is True:
        keys.add("judgeModel")
    return keys


def _protocol_differences(b: Mapping[str, Any], c: Mapping[str, Any]) -> list[ProtocolDifference]:
    live_keys = _live_keys_in_play(b, c)
    diffs: list[ProtocolDifference] = []
    for key in PROTOCOL_KEYS:
        if key in LIVE_ONLY_KEYS and key not in live_keys:
            continue
        bv, cv = b.get(key), c.get(key)
        if key == "selectedCaseIds":
            diff = _selected_ids_difference(bv, cv)
            if diff is not None:
                diffs.append(diff)
            continue
        if key == "selectedAttempts":
            if bv != cv:
                diffs.append(_attempts_difference(bv, cv))
            continue
        if key == "mode":
            bm, cm = normal_mode(bv) or bv, normal_mode(cv) or cv
            if bm != cm:
                diffs.append(_mismatch(key, bv, cv))
            continue
        if bv == cv and type(bv) is type(cv):
            continue
        if key == "datasetHash" and b.get("datasetId") == c.get("datasetId"):
            diffs.append(_version_bump("datasetId", b.get("datasetId"), key, bv, cv))
        else:
            diffs.append(_mismatch(key, bv, cv))
    return diffs


def _reference_view(doc: RunDocument) -> dict[str, Any]:
    """The reference's comparability fields, filled from ``protocol`` where a run lacks them."""
    protocol = _protocol(doc) or {}
    configuration = _configuration(doc) or {}
    if not configuration and protocol:
        configuration = {
            "mode": protocol.get("mode"),
            "repetitions": protocol.get("attempts"),
            "judgeEnabled": protocol.get("judgeEnabled"),
            "judgeModel": protocol.get("judgeModel"),
        }
    has_configuration = bool(configuration)

    def pick(top: str | None, proto: str) -> Any:
        return top if top is not None else protocol.get(proto)

    return {
        "datasetVersion": pick(doc.dataset_version, "datasetId"),
        "datasetHash": pick(doc.dataset_hash, "datasetHash"),
        "packDatasetVersion": pick(doc.pack_dataset_version, "packId"),
        "packHash": pick(doc.pack_hash, "packHash"),
        "configuration": configuration if has_configuration else None,
    }


def _reference_differences(
    baseline: RunDocument, candidate: RunDocument
) -> list[ProtocolDifference]:
    """Reference section 5.2 checks 2–7, every failing one reported."""
    b, c = _reference_view(baseline), _reference_view(candidate)
    diffs: list[ProtocolDifference] = []
    bv, cv = b["datasetVersion"], c["datasetVersion"]
    if bv is None or cv is None or bv != cv:
        diffs.append(_mismatch("datasetVersion", bv, cv))
    if b["datasetHash"] != c["datasetHash"]:
        if bv is not None and bv == cv:
            diffs.append(
                _version_bump(
                    "datasetVersion", bv, "datasetHash", b["datasetHash"], c["datasetHash"]
                )
            )
        else:
            diffs.append(_mismatch("datasetHash", b["datasetHash"], c["datasetHash"]))
    for key in ("packDatasetVersion", "packHash"):
        if b[key] is not None and c[key] is not None and b[key] != c[key]:
            diffs.append(_mismatch(key, b[key], c[key]))
    bc, cc = b["configuration"], c["configuration"]
    if bc is not None and cc is not None:
        if bc.get("judgeEnabled") is True or cc.get("judgeEnabled") is True:
            for key in ("judgeEnabled", "judgeModel"):
                if bc.get(key) != cc.get(key):
                    diffs.append(_mismatch(key, bc.get(key), cc.get(key)))
        bm, cm = normal_mode(bc.get("mode")), normal_mode(cc.get("mode"))
        if bm is not None and cm is not None and bm != cm:
            diffs.append(_mismatch("mode", bc.get("mode"), cc.get("mode")))
        for key in ("repetitions", "includeRed"):
            # A key absent on one side (a protocol-only run has no includeRed) is not compared.
            if key in bc and key in cc and bc.get(key) != cc.get(key):
                diffs.append(_mismatch(key, bc.get(key), cc.get(key)))
    return diffs


def protocol_differences(baseline: RunDocument, candidate: RunDocument) -> list[ProtocolDifference]:
    """Every key on which the two runs are not comparable; empty when they are comparable.

    With a ``protocol`` on both sides the protocol keys decide; otherwise the reference's
    section 5.2 checks apply (values missing at the top level are taken from ``protocol``).
    """
    b, c = _protocol(baseline), _protocol(candidate)
    if b is not None and c is not None:
        return _protocol_differences(b, c)
    return _reference_differences(baseline, candidate)


def configuration_differences(
    baseline: RunDocument,
    candidate: RunDocument,
    exclude: Iterable[str] = (),
) -> list[str]:
    """Informational ``k: a vs b`` lines for settings that may differ between comparable runs.

    The live-only protocol keys when they do not take part (e.g. model/provider of a fixture
    run), then ``configuration`` fields other than outputDir/artifactMode/javaVersion. Keys in
    ``exclude`` (already reported as protocol differences) are left out.
    """
    skip = set(exclude) | IGNORED_CONFIGURATION_KEYS
    if "attempts" in skip:
        skip.add("repetitions")  # configuration's name for the protocol's attempts
    lines: dict[str, str] = {}
    b, c = _protocol(baseline), _protocol(candidate)
    if b is not None and c is not None:
        in_play = _live_keys_in_play(b, c)
        for key in LIVE_ONLY_KEYS:
            if key not in in_play and key not in skip and b.get(key) != c.get(key):
                lines[key] = f"{key}: {_fmt(b.get(key))} vs {_fmt(c.get(key))}"
    bc, cc = _configuration(baseline), _configuration(candidate)
    if bc is not None and cc is not None:
        keys = list(bc) + [k for k in cc if k not in bc]
        for key in keys:
            if key in skip or key in lines:
                continue
            if bc.get(key) != cc.get(key):
                lines[key] = f"{key}: {_fmt(bc.get(key))} vs {_fmt(cc.get(key))}"
    return list(lines.values())
