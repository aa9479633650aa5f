"""Datasets: discovery by id, row loading with precise errors, identity hashes.

A dataset is a folder holding a manifest, one JSONL file of rows, ``fixtures/<id>.out.md``
recorded answers and optional ``rubric.md`` / ``calibration.jsonl``. Every problem is reported
at collection with file, line and field, before anything runs: a broken row must never turn
into a partial run that looks complete.
"""

from __future__ import annotations

import difflib
import json
import keyword
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from goldeval.cases import GoldenCase, dataset_hash
from goldeval.domain import DomainConfig
from goldeval.errors import ConfigError, DatasetError, DatasetErrors, GoldevalError
from goldeval.graders.base import ExpectKey, Grader
from goldeval.manifest import Manifest, find_manifest, read_manifest
from goldeval.pack import Pack, load_pack

ROW_FIELDS = ("id", "prompt", "expect", "must_not", "tags", "metadata")
CORE_EXPECT_KEYS = (ExpectKey("red", "bool", "known to fail live: carries the `red` marker"),)
RESERVED_FILES = ("calibration.jsonl",)
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
TAG = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# Names that are special files on Windows: an id becomes a file name under fixtures/ and runs/.
WINDOWS_RESERVED = (
    {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(10)} | {f"lpt{i}" for i in range(10)}
)


@dataclass
class Dataset:
    dir: Path
    manifest_path: Path
    manifest: Manifest
    rows_path: Path
    cases: list[GoldenCase]
    pack: Pack | None
    domain: DomainConfig
    rubric: str | None = None
    grader_modes: dict[str, str] = field(default_factory=dict)

    _hash: str | None = None

    @property
    def id(self) -> str:
        return self.manifest.version

    @property
    def hash(self) -> str:
        """datasetHash, computed on first use: collection (on every xdist worker) never needs
        it, only the controller's run document does."""
        if self._hash is None:
            self._hash = dataset_hash(self.cases)
        return self._hash


class _Pairs(dict[str, Any]):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _suggest(name: str, known: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {close[0]!r}?" if close else None


def check_case_id(case_id: Any) -> str | None:
    """Why ``case_id`` is not a safe identity, or None when it is."""
    if case_id is None:
        return "missing or blank"
    if not isinstance(case_id, str):
        return f"must be a string, got {type(case_id).__name__}"
    if not case_id.strip():
        return "missing or blank"
    if not SAFE_ID.match(case_id):
        return (
            f"{case_id[:80]!r} is not filename-safe (letters, digits, '.', '_', '-'; "
            "must start with a letter or digit; at most 128 characters)"
        )
    if case_id.split(".")[0].lower() in WINDOWS_RESERVED:
        return f"{case_id!r} is a reserved file name on Windows"
    return None


def parse_rows(
    path: Path, expect_keys: dict[str, ExpectKey], graders: Sequence[Grader] = ()
) -> list[GoldenCase]:
    """Parse and validate a JSONL rows file; raise DatasetErrors listing every problem."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"cannot read: {exc.strerror}", path=path) from None
    errors: list[GoldevalError] = []
    cases: list[GoldenCase] = []
    first_line: dict[str, int] = {}
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append(
                DatasetError(
                    f"not valid UTF-8 at byte {exc.start}",
                    path=path,
                    line=lineno,
                    hint="save the file as UTF-8",
                )
            )
            continue
        if not line.strip() or line.startswith("#"):
            continue
        row_errors: list[GoldevalError] = []

        def err(
            message: str,
            fld: str | None = None,
            hint: str | None = None,
            _e: list[GoldevalError] = row_errors,
            _l: int = lineno,
        ) -> None:
            _e.append(DatasetError(message, path=path, line=_l, field=fld, hint=hint))

        try:
            obj = json.loads(line, object_pairs_hook=_no_duplicate_keys)
        except _DuplicateKey as dup:
            err("duplicate key in the same object", fld=dup.key)
            errors.extend(row_errors)
            continue
        except json.JSONDecodeError as exc:
            err(f"invalid JSON: {exc.msg} (column {exc.colno})", hint="one JSON object per line")
            errors.extend(row_errors)
            continue
        except RecursionError:
            err("invalid JSON: nested too deeply")
            errors.extend(row_errors)
            continue
        except ValueError as exc:  # e.g. an integer beyond Python's digit limit
            err(f"invalid JSON: {str(exc)[:120]}")
            errors.extend(row_errors)
            continue
        if "\\u" in line:
            try:  # JSON escapes can produce lone surrogates, which are not text
                json.dumps(obj, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                err(
                    "contains a lone surrogate escape (\\ud800-\\udfff): not valid Unicode",
                    hint="escape the whole character pair, or write the character itself",
                )
                errors.extend(row_errors)
                continue
        if not isinstance(obj, dict):
            err(f"a row must be a JSON object, got {type(obj).__name__}")
            errors.extend(row_errors)
            continue
        for key in obj:
            if key not in ROW_FIELDS:
                err(
                    "unknown field",
                    fld=key,
                    hint=_suggest(key, ROW_FIELDS) or f"known fields: {', '.join(ROW_FIELDS)}",
                )
        case_id = obj.get("id")
        id_problem = check_case_id(case_id)
        if id_problem:
            err(id_problem, fld="id")
        prompt = obj.get("prompt")
        if not isinstance(prompt, str):
            err(
                "missing" if prompt is None else f"must be a string, got {type(prompt).__name__}",
                fld="prompt",
            )
        expect = obj.get("expect")
        if expect is None:
            expect = {}
        elif not isinstance(expect, dict):
            err(f"must be an object, got {type(expect).__name__}", fld="expect")
            expect = {}
        for key, value in expect.items():
            spec = expect_keys.get(key)
            if spec is None:
                err(
                    "unknown expect key",
                    fld=f"expect.{key}",
                    hint=_suggest(key, expect_keys) or "no registered grader reads this key",
                )
                continue
            if value is None:
                continue
            problem = spec.check(value)
            if problem:
                err(problem, fld=f"expect.{key}")
        for grader in graders:
            for fld, message in grader.validate_expect(expect):
                err(message, fld=fld)
        must_not = obj.get("must_not")
        if must_not is None:
            must_not = []
        elif not (isinstance(must_not, list) and all(isinstance(s, str) for s in must_not)):
            err("must be a list of strings", fld="must_not")
            must_not = []
        tags = obj.get("tags")
        if tags is None:
            tags = []
        elif not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
            err("must be a list of strings", fld="tags")
            tags = []
        else:
            for tag in tags:
                if not TAG.match(tag) or keyword.iskeyword(tag) or tag in ("red",):
                    err(
                        f"tag {tag[:40]!r} cannot be a pytest marker",
                        fld="tags",
                        hint="use letters, digits and '_' (e.g. smoke_test); "
                        "'red' comes from expect.red",
                    )
        metadata = obj.get("metadata")
        if metadata is None:
            metadata = {}
        elif not isinstance(metadata, dict):
            err(f"must be an object, got {type(metadata).__name__}", fld="metadata")
            metadata = {}
        if not id_problem and isinstance(case_id, str):
            if case_id in first_line:
                err(
                    f"duplicate id {case_id!r} (first defined at line {first_line[case_id]})",
                    fld="id",
                    hint="ids are the stable identity of a case; make them unique",
                )
            else:
                first_line[case_id] = lineno
        if row_errors:
            errors.extend(row_errors)
            continue
        assert isinstance(case_id, str) and isinstance(prompt, str)  # checked above
        cases.append(
            GoldenCase(
                id=case_id,
                prompt=prompt,
                expect={k: v for k, v in expect.items() if v is not None},
                must_not=tuple(must_not),
                tags=tuple(dict.fromkeys(tags)),
                metadata=metadata,
                line=lineno,
            )
        )
    if errors:
        if len(errors) == 1:
            raise errors[0]
        raise DatasetErrors(errors)
    return cases


def rows_file(folder: Path, manifest: Manifest, manifest_path: Path) -> Path:
    if manifest.rows:
        path = (folder / manifest.rows).resolve()
        if not path.is_file():
            raise DatasetError("rows file not found", path=manifest_path, field="rows")
        return path
    candidates = sorted(
        p for p in folder.glob("*.jsonl") if p.name not in RESERVED_FILES and p.is_file()
    )
    if not candidates:
        raise DatasetError(
            "no rows file (*.jsonl) next to the manifest",
            path=manifest_path,
            hint="add one JSONL file of rows; calibration.jsonl is reserved for the judge",
        )
    if len(candidates) > 1:
        names = ", ".join(p.name for p in candidates)
        raise DatasetError(
            f"more than one rows file ({names})",
            path=manifest_path,
            field="rows",
            hint="keep one, or name it with `rows:` in the manifest",
        )
    return candidates[0]


def discover(golden_root: Path, problems: list[str] | None = None) -> dict[str, Path]:
    """Map dataset id → folder for every manifest under ``golden_root`` (sorted walk).

    Manifests that cannot be read are left out; their errors go to ``problems`` if given.
    """
    found: dict[str, Path] = {}
    if not golden_root.is_dir():
        return found
    stack = [golden_root]
    while stack:
        folder = stack.pop()
        manifest_path = find_manifest(folder)
        if manifest_path is not None and folder != golden_root:
            try:
                manifest = read_manifest(manifest_path)
            except DatasetError as exc:
                manifest = None
                if problems is not None:
                    problems.append(str(exc))
            if manifest is not None:
                found.setdefault(manifest.version, folder)
        for child in sorted(folder.iterdir(), reverse=True):
            if (
                child.is_dir()
                and child.name not in ("fixtures", "__pycache__")
                and not child.name.startswith(".")
            ):
                stack.append(child)
    return dict(sorted(found.items()))


def resolve_dataset(spec: str, golden_root: Path, invocation_dir: Path) -> Path:
    """``--golden=ID`` (a manifest version under the golden root) or a folder path."""
    for base in (invocation_dir, golden_root):
        candidate = base / spec
        if candidate.is_dir() and find_manifest(candidate) is not None:
            return candidate.resolve()
    problems: list[str] = []
    known = discover(golden_root, problems)
    if spec in known:
        return known[spec].resolve()
    listing = ", ".join(known) if known else f"none found under {golden_root}"
    broken = "".join(f"\n  unreadable manifest: {p}" for p in problems)
    raise ConfigError(
        f"unknown dataset {spec!r}; datasets: {listing}{broken}",
        hint="pass a dataset id from a manifest's `version`, or a folder with a dataset.yaml",
    )


def load_dataset(
    folder: Path,
    *,
    project_root: Path,
    graders: Sequence[Grader],
    require_fixtures: bool,
) -> Dataset:
    manifest_path = find_manifest(folder)
    if manifest_path is None:
        raise DatasetError("no dataset.yaml or dataset.json", path=folder)
    manifest = read_manifest(manifest_path)
    modes = dict(manifest.graders)
    for name, mode in modes.items():
        if mode not in ("hard", "soft", "off"):
            raise DatasetError(
                f"{mode!r} is not hard, soft or off", path=manifest_path, field=f"graders.{name}"
            )
    known_names = {g.name for g in graders}
    for name in modes:
        if name not in known_names:
            raise DatasetError(
                "no such grader",
                path=manifest_path,
                field=f"graders.{name}",
                hint=_suggest(name, known_names) or f"graders: {', '.join(sorted(known_names))}",
            )
    expect_keys: dict[str, ExpectKey] = {k.name: k for k in CORE_EXPECT_KEYS}
    for grader in graders:
        for key in grader.expect_keys:
            expect_keys.setdefault(key.name, key)
    path = rows_file(folder, manifest, manifest_path)
    cases = parse_rows(path, expect_keys, graders)
    domain = DomainConfig(
        contract=manifest.contract or DomainConfig().contract,
        retriever=manifest.retriever or DomainConfig().retriever,
    )
    pack: Pack | None = None
    pack_spec = manifest.pack
    if pack_spec is None:
        default = project_root / "pack"
        if default.is_dir():
            pack = load_pack(default)
    elif pack_spec.lower() not in ("none", "null", ""):
        pack = load_pack((folder / pack_spec).resolve())
    if require_fixtures:
        try:
            # One directory listing instead of a stat per row (100,000 rows, 100,000 stats).
            present = set(os.listdir(folder / "fixtures"))
        except OSError:
            present = set()
        missing = [c for c in cases if f"{c.id}.out.md" not in present]
        if missing:
            raise (
                DatasetErrors(
                    [
                        DatasetError(
                            f"no recorded answer fixtures/{c.id}.out.md",
                            path=path,
                            line=c.line,
                            field="id",
                            hint="record it with --golden-mode=record, or write it",
                        )
                        for c in missing
                    ]
                )
                if len(missing) > 1
                else DatasetError(
                    f"no recorded answer fixtures/{missing[0].id}.out.md",
                    path=path,
                    line=missing[0].line,
                    field="id",
                    hint="record it with --golden-mode=record, or write it",
                )
            )
    rubric_path = folder / "rubric.md"
    return Dataset(
        dir=folder,
        manifest_path=manifest_path,
        manifest=manifest,
        rows_path=path,
        cases=cases,
        pack=pack,
        domain=domain,
        rubric=rubric_path.read_text(encoding="utf-8") if rubric_path.is_file() else None,
        grader_modes=modes,
    )
