"""The run document (run.json): built once on the controller from attempt records.

Attempts arrive as JSON-plain dicts on test reports. The collector keeps each one as a compact
JSON string (about a tenth of the memory of model objects), a long one (an answer the model
made long) in a temporary file (goldeval.results.text_spool), and the builder rolls cases up
one at a time, streaming them to disk, so 100,000 attempts never sit in memory as objects and
long answers never sit in memory together.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import platform
import secrets
import subprocess
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from goldeval.results.attempt_payloads import EXCERPT_CHARS, attempt_entry
from goldeval.results.metrics import MetricsAccumulator
from goldeval.results.rollup import Counters, roll_up, strip_raw
from goldeval.results.run_folder import fsync_dir, refuse_link, temp_file
from goldeval.results.run_json import RunJson, as_run_json
from goldeval.results.text_spool import Held, TextSpool


def git_commit(cwd: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def config_fingerprint(values: dict[str, Any]) -> str:
    """SHA-256 of sorted ``key=value`` lines (reference 5.1); None → empty string."""
    lines = []
    for key in sorted(values):
        value = values[key]
        if value is None:
            text = ""
        elif isinstance(value, bool):
            text = "true" if value else "false"
        else:
            text = str(value)
        lines.append(f"{key}={text}")
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


_COMPACT = (",", ":")
#: Key, in a finished run's stored summary, of its run.json minus ``cases`` (``goldeval show``
#: and ``export`` read it back).
RUN_DOCUMENT = "runDocument"


#: ``projectRoot`` as run.json records it: the other paths are relative to the project root.
PROJECT_ROOT_HERE = "."


def project_relative(path: Path | str, root: Path) -> str:
    """``path`` as run.json records it: relative to the project ``root``, '/'-separated.

    run.json is downloaded from the service, attached to CI jobs and kept in the store; an
    absolute path would name the machine's folders (a user name, a server layout) there.
    A path outside the project keeps only the steps from the root (``../shared/golden``);
    on another drive (Windows), only its name.
    """
    target = os.path.abspath(path)
    try:
        relative = os.path.relpath(target, os.path.abspath(root))
    except ValueError:
        return Path(target).name
    return Path(relative).as_posix()


def relative_origin_fields(
    root: str, golden_root: Any, baseline_path: Any, configuration: Any
) -> dict[str, Any]:
    """The fields that make a run document written before paths were relative (its
    ``projectRoot`` the absolute ``root``) name its paths relative to that root: the store's
    copy shown by the service and ``goldeval export`` must not name the machine's folders.

    The arguments are the document's ``goldenRoot``, ``baselinePath`` and ``configuration``
    as recorded (any JSON value); returns the top-level fields to update.
    """
    out: dict[str, Any] = {"projectRoot": PROJECT_ROOT_HERE}
    for key, value in (("goldenRoot", golden_root), ("baselinePath", baseline_path)):
        if isinstance(value, str) and os.path.isabs(value):
            out[key] = project_relative(value, Path(root))
    if isinstance(configuration, dict):
        output_dir = configuration.get("outputDir")
        if isinstance(output_dir, str) and os.path.isabs(output_dir):
            out["configuration"] = {
                **configuration,
                "outputDir": project_relative(output_dir, Path(root)),
            }
    return out


class RunCollector:
    """Folds attempt payloads (plain dicts from reports) into cases, in dataset order.

    A payload is ``{"attempt": {...}}``, optionally with ``"case"``: the case's facts (kinds,
    prompt, tags, line). Without it they come from ``case_info(case_id)`` at roll-up time,
    so the controller does not hold one info dict per case for the whole session.

    ``one_model``: the run's model when the session runs one model (``""`` for none); every
    attempt is then folded under it, whatever model its payload names, so a session without
    several models is never split into models side by side. None: several models or variants,
    each attempt under its own key (its variant, else its model: ``AttemptEntry.key``).
    """

    def __init__(
        self,
        keep_passing_output: bool = True,
        case_info: Callable[[str], dict[str, Any] | None] | None = None,
        case_line: Callable[[str], int | None] | None = None,
        one_model: str | None = None,
    ) -> None:
        self.keep_passing_output = keep_passing_output
        self.case_info = case_info
        self.case_line = case_line
        self.one_model = one_model
        self.infos: dict[str, dict[str, Any]] = {}
        #: Per case, (model, attempt) -> the record's JSON, or its place in :attr:`spool`.
        self.attempts: dict[str, dict[tuple[str, int], Held]] = {}
        self.spool = TextSpool()
        #: Variant sessions: per variant, each case's answer excerpt of its lowest attempt
        #: that had an answer (index, text): the matrix and side-by-side answers read it.
        self.excerpts: dict[str, dict[str, tuple[int, str]]] = {}

    def add(self, payload: dict[str, Any]) -> None:
        """Fold one attempt: a report payload (see :func:`attempt_payload`) or, from the
        store and for lost items, ``{"attempt": record_dict}`` with an optional ``"case"``."""
        entry = attempt_entry(payload, self.keep_passing_output)
        case = payload.get("case")
        if case is not None and entry.case_id not in self.infos:
            self.infos[entry.case_id] = case
        # Keyed by (model, attempt) so a re-sent report (xdist restart) is never counted twice.
        model = self.one_model if self.one_model is not None else entry.key or ""
        self.attempts.setdefault(entry.case_id, {})[(model, entry.index)] = self.spool.hold(
            entry.text
        )
        excerpt = payload.get("excerpt")
        if isinstance(excerpt, str) and entry.variant is not None:
            kept = self.excerpts.setdefault(entry.variant, {})
            held = kept.get(entry.case_id)
            if held is None or entry.index < held[0]:
                kept[entry.case_id] = (entry.index, excerpt[:EXCERPT_CHARS])

    def excerpt(self, variant: str, case_id: str) -> str | None:
        """The variant's answer excerpt for the case (None: none was recorded)."""
        held = self.excerpts.get(variant, {}).get(case_id)
        return held[1] if held is not None else None

    def record(self, held: Held) -> dict[str, Any]:
        """One attempt's record, from memory or the spool."""
        record: dict[str, Any] = json.loads(self.spool.text(held))
        return record

    def close(self) -> None:
        """Give the spool's file back (its records can no longer be read)."""
        self.spool.close()

    def __len__(self) -> int:
        return sum(len(v) for v in self.attempts.values())

    def info(self, case_id: str) -> dict[str, Any]:
        info = self.infos.get(case_id)
        if info is None and self.case_info is not None:
            info = self.case_info(case_id)
        if info is None:  # not in this dataset (a stored attempt of a renamed case)
            info = {"caseId": case_id, "kinds": ["GENERATION"]}
        return info

    def models(self) -> list[str]:
        return sorted({m for per_case in self.attempts.values() for (m, _) in per_case})

    def case_ids(self, model: str | None = None) -> list[str]:
        def order(case_id: str) -> tuple[int, str]:
            info = self.infos.get(case_id)
            if info is not None:
                line = info.get("line")
            elif self.case_line is not None:
                line = self.case_line(case_id)
            else:
                line = self.info(case_id).get("line")
            return (line or 0, case_id)

        return sorted(
            (
                case_id
                for case_id, per_case in self.attempts.items()
                if per_case and (model is None or any(m == model for (m, _) in per_case))
            ),
            key=order,
        )

    def iter_cases(
        self, model: str | None = None, release: bool = False
    ) -> Iterator[dict[str, Any]]:
        """Rolled-up cases (with raw text) in dataset order; with ``model``, that model's.

        With ``release``, each case's stored attempts are dropped once rolled up, so the
        run document is built without holding every attempt twice.
        """
        for case_id in self.case_ids(model):
            per_case = self.attempts[case_id]
            keys = [k for k in per_case if model is None or k[0] == model]
            records = [self.record(per_case[k]) for k in keys]
            if release:
                for k in keys:
                    del per_case[k]
            yield roll_up(self.info(case_id), records)


class LightCases:
    """What the controller keeps in memory per case once it is written to run.json.

    Everything for a non-passing case (the reports name its reasons); for a passing one only
    what comparison, gate and reports read: status, kinds, success rate, attempt statuses and
    whether retrieval applied. Passing cases mostly look alike, so those parts are shared
    objects: at 100,000 cases this is the difference between ~1.3 KB and ~0.4 KB a case.
    Readers must treat light cases as read-only.
    """

    def __init__(self) -> None:
        self._shared: dict[tuple[Any, ...], Any] = {}

    def _share(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        value = self._shared.get(key)
        if value is None:
            value = self._shared[key] = make()
        return value

    def light(self, case: dict[str, Any]) -> dict[str, Any]:
        if case["status"] != "PASS":
            return strip_raw(case)
        kinds = tuple(case["kinds"])
        rate = case["successRate"]
        statuses = tuple((a["index"], a["status"]) for a in case["attempts"])
        out = {
            "caseId": case["caseId"],
            "status": "PASS",
            "kinds": self._share(("kinds", kinds), lambda: list(kinds)),
            "successRate": self._share(
                ("rate", rate["hits"], rate["total"]),
                lambda: {"hits": rate["hits"], "total": rate["total"]},
            ),
            "attempts": self._share(
                ("attempts", statuses),
                lambda: [{"index": i, "status": st} for i, st in statuses],
            ),
            "durationMs": case.get("durationMs", 0),
        }
        retrieval = case.get("retrieval")
        if retrieval is not None:
            applicable, passed = bool(retrieval.get("applicable")), bool(retrieval.get("passed"))
            out["retrieval"] = self._share(
                ("retrieval", applicable, passed),
                lambda: {"applicable": applicable, "passed": passed},
            )
        return out


#: One encoder for every case line: ``json.dumps`` with options builds a new one per call.
_CASE_LINE = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))


def build_run(
    *,
    run_id: str,
    started: datetime,
    duration_ms: int,
    cases: Iterator[dict[str, Any]],
    cases_file: Path,
    protocol: dict[str, Any],
    configuration: dict[str, Any],
    identity: dict[str, Any],
    status: str,
    weights: dict[str, float] | None = None,
    extra: dict[str, Any] | None = None,
    on_case: Callable[[dict[str, Any]], None] | None = None,
) -> RunJson:
    """Roll up and write every case (one JSON line each) to ``cases_file``; return the run
    document with light cases (see :class:`LightCases`) for comparison, gate and reports."""
    counters = Counters()
    acc = MetricsAccumulator(pass_at_k=_repeats(protocol))
    light: list[dict[str, Any]] = []
    lighten = LightCases().light
    cases_file.parent.mkdir(parents=True, exist_ok=True)
    with open(cases_file, "w", encoding="utf-8") as fh:
        for case in cases:
            counters.add(case)
            acc.add(case)
            if on_case is not None:
                on_case(case)
            stripped = strip_raw(case)
            fh.write(_CASE_LINE.encode(stripped) + "\n")
            light.append(lighten(case))
    doc: dict[str, Any] = {
        "runId": run_id,
        "timestamp": started.astimezone(timezone.utc).isoformat().replace("+00:00", "Z"),
        "status": status,
        **{k: v for k, v in identity.items() if v is not None},
        "protocol": protocol,
        "configuration": configuration,
        **counters.dump(),
        "metrics": acc.result(weights),
        "cases": light,
        "durationMs": duration_ms,
        "environment": {"python": platform.python_version()},
    }
    if extra:
        doc.update(extra)
    return as_run_json(doc)


def _repeats(protocol: dict[str, Any]) -> bool:
    """Whether the run asked for more than one attempt per case (pass@k is then reported)."""
    attempts = protocol.get("attempts")
    return isinstance(attempts, int) and attempts > 1


def write_run_json(path: Path, run: RunJson, cases_file: Path) -> None:
    """run.json: the document's fields pretty-printed, cases spliced in from ``cases_file``
    one per line, written to a unique temp file, fsynced and renamed, so a crash leaves no
    half file and two processes finishing the same folder never share a temp file."""

    refuse_link(path, "run.json")
    fd, tmp = temp_file(path.parent, path.name)
    try:
        with open(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write("{\n")
            first = True
            for key, value in run.items():
                if not first:
                    out.write(",\n")
                first = False
                name = json.dumps(key, ensure_ascii=False)
                if key == "cases":
                    out.write(f"  {name}: [")
                    with open(cases_file, encoding="utf-8") as fh:
                        empty = not _splice_lines(fh, out)
                    out.write("]" if empty else "\n  ]")
                else:
                    text = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
                    out.write(f"  {name}: {text}")
            out.write("\n}\n")
            out.flush()
            os.fsync(out.fileno())
        refuse_link(path, "run.json")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _splice_lines(lines: TextIO, out: TextIO, chunk: int = 1 << 16) -> bool:
    """Copy one-JSON-value-a-line text into ``out`` as the items of an indented array
    (``"\\n    " + line``, separated by commas); whether there was any line.

    In pieces of 64 Ki characters with one ``replace`` each, not a Python step per line (a
    second at 100,000 cases). Pieces, not the whole file: the text is copied three times on
    its way, and a megabyte piece of non-ASCII text (four bytes a character) showed in the
    run's peak memory. The unfinished line at the end of a piece is kept as a list of pieces
    and written as it is (it holds no newline), so a line longer than a piece costs no more
    than a short one: each character is looked at once. Every line of ``lines`` ends with a
    newline (see :func:`build_run`).
    """
    carry: list[str] = []  # the start of a line that has not ended yet
    sep = ",\n    "
    before = "\n    "  # what goes before the next line: no comma before the first
    while piece := lines.read(chunk):
        cut = piece.rfind("\n")
        if cut < 0:
            carry.append(piece)
            continue
        out.write(before)
        out.writelines(carry)
        out.write(piece[:cut].replace("\n", sep))
        before = sep
        carry = [piece[cut + 1 :]] if cut + 1 < len(piece) else []
    if carry:  # a last line without its newline
        out.write(before)
        out.writelines(carry)
        before = sep
    return before == sep


#: Suffixes of run ids: a random start per process (processes started in the same millisecond
#: draw apart), then counting (never the same suffix twice in one process, unlike fresh draws).
_RUN_ID_SUFFIXES = itertools.count(secrets.randbits(24))


def new_run_id(out_dir: Path, now: datetime) -> str:
    """``YYYY-MM-DDTHH-MM-SS.mmm-xxxxxx``: sortable by start time, unique per process.

    The random suffix keeps two runs started in the same millisecond (CI shards, a matrix)
    apart; the folder is still created exclusively when the run is written (see
    ``pytest_plugin.run_writing.build_for``), so even a clash of suffixes cannot mix two runs
    in one folder.
    """
    base = now.strftime("%Y-%m-%dT%H-%M-%S") + f".{now.microsecond // 1000:03d}"
    while True:
        run_id = f"{base}-{next(_RUN_ID_SUFFIXES) % 0x1000000:06x}"
        if not os.path.lexists(out_dir / run_id):
            return run_id
