"""Datasets: discovery by id, row loading with precise errors, identity hashes.

A dataset is a folder holding a manifest, one JSONL file of rows, ``fixtures/<id>.out.md``
recorded answers and optional ``rubric.md`` / ``calibration.jsonl``. Every problem is reported
at collection with file, line and field, before anything runs: a broken row must never turn
into a partial run that looks complete.
"""

from __future__ import annotations

import difflib
import io
import json
import keyword
import os
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goldeval.core.errors import ConfigError, DatasetError, DatasetErrors, GoldevalError
from goldeval.core.safe_files import contained_file, read_regular_file
from goldeval.dataset.case import GoldenCase, dataset_hash
from goldeval.dataset.domain import DomainConfig
from goldeval.dataset.expect import ExpectKey
from goldeval.dataset.manifest import Manifest, find_manifest, read_manifest
from goldeval.dataset.pack import Pack, load_pack
from goldeval.dataset.profiles import JAVA_AUTOTEST, get_profile
from goldeval.dataset.request import check_messages, parse_request
from goldeval.dataset.templates import TemplateProblem

if TYPE_CHECKING:
    from goldeval.graders.base import Grader

ROW_FIELDS = (
    "id",
    "prompt",
    "messages",
    "vars",
    "request",
    "expect",
    "must_not",
    "tags",
    "metadata",
)
CORE_EXPECT_KEYS = (ExpectKey("red", "bool", "known to fail live: carries the `red` marker"),)
RESERVED_FILES = ("calibration.jsonl",)
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# A tag becomes ``pytest.mark.<tag>``: a plain identifier starting with a letter (``_x`` and
# ``__init__`` are attributes of pytest's MarkGenerator, not marks).
TAG = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
#: Marks with behaviour of their own, in pytest or in common plugins. A row tagged with one
#: would be skipped, xfailed, retried, given fixtures...: a failing row turned into a green run.
#: The plugin adds every marker code registered in the running pytest (see
#: ``goldeval.pytest_plugin.config_keys.reserved_marks``); this list is the floor when pytest is not
#: there to
#: ask, and keeps a row valid or invalid alike where a plugin is installed only (e.g. in CI).
RESERVED_TAGS = frozenset(
    {
        # pytest itself
        "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "parametrize",
        "tryfirst", "trylast",
        # common plugins: timeouts, reruns, ordering, async, databases, xdist, isolation...
        "timeout", "flaky", "repeat", "order", "run", "first", "second", "last",
        "dependency", "asyncio", "anyio", "trio", "django_db", "urls",
        "ignore_template_errors", "xdist_group", "forked", "no_cover", "hypothesis",
        "benchmark", "freeze_time", "vcr", "block_network", "enable_socket",
        "disable_socket", "allow_hosts", "httpx_mock", "respx", "only",
        "randomly_dont_reorganize", "golden",
        # ours: `red` comes from expect.red
        "red",
    }
)  # fmt: skip
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

    def grader_config(self, used: Sequence[str]) -> dict[str, str]:
        """What the protocol's ``graderConfigHash`` covers: every grading input outside the rows.

        The domain constants (``contract:``/``retriever:``), the graders that grade some row,
        their modes and the manifest's ``grader_options`` (a citation pattern changes verdicts
        as surely as a row does). ``options`` enters only when set, so the hash of a dataset
        without options is the one its baselines were captured with.
        """
        config = {
            "domain": self.domain.fingerprint(),
            "graders": ",".join(used),
            "modes": ",".join(f"{k}={v}" for k, v in sorted(self.grader_modes.items())),
        }
        if self.manifest.grader_options:
            config["options"] = json.dumps(
                self.manifest.grader_options, sort_keys=True, ensure_ascii=True, default=repr
            )
        # Each enters only when it is not what a dataset had before it existed: the
        # java-autotest rules were the only ones, so reference baselines keep their hash.
        m = self.manifest
        if m.profile_name != JAVA_AUTOTEST:
            config["profile"] = m.profile_name
        if m.prompt is not None:
            config["prompt"] = json.dumps(
                m.prompt.model_dump(exclude_none=True), sort_keys=True, ensure_ascii=True
            )
        if m.request:
            config["request"] = json.dumps(m.request, sort_keys=True, ensure_ascii=True)
        if m.truncated != "hard":
            config["truncated"] = m.truncated
        return config


class _Pairs(dict[str, Any]):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


#: One decoder for every row: ``json.loads(..., object_pairs_hook=...)`` builds a new decoder
#: per call, which cost more than decoding a short row.
_ROW_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)


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
    path: Path,
    expect_keys: dict[str, ExpectKey],
    graders: Sequence[Grader] = (),
    reserved_tags: Collection[str] = RESERVED_TAGS,
    manifest: Manifest | None = None,
) -> list[GoldenCase]:
    """Parse and validate a JSONL rows file; raise DatasetErrors listing every problem.

    ``manifest``: the dataset's (its profile names the cases' kinds; its prompt templates
    must render over every row's variables).

    ``reserved_tags``: names a row tag may not take because they are marks with behaviour
    (pytest's own and the running plugins'); the default is :data:`RESERVED_TAGS`.
    """
    data = read_regular_file(path)
    errors: list[GoldevalError] = []
    cases: list[GoldenCase] = []
    first_line: dict[str, int] = {}
    profile = get_profile(manifest.profile).name if manifest is not None else JAVA_AUTOTEST
    templates = manifest.templates() if manifest is not None else None
    base_request = (manifest.request or {}) if manifest is not None else {}
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    # Line by line from the buffer, not data.split(): that list held a second copy of the
    # whole file for the length of the loop.
    for lineno, raw in enumerate(io.BytesIO(data), start=1):
        if raw.endswith(b"\n"):
            raw = raw[:-1]
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
            obj = _ROW_DECODER.decode(line)
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
        messages = None
        if "messages" in obj:
            messages, problems = check_messages(obj["messages"], path.parent)
            for fld, message in problems:
                err(message, fld=fld)
            if "prompt" in obj:
                err(
                    "a row has either prompt or messages, not both",
                    fld="prompt",
                    hint="put the question in the last user turn",
                )
        prompt = obj.get("prompt")
        from_template = False
        if messages is not None and prompt is None:
            prompt = _last_user_text(messages)
        elif prompt is None and templates is not None and templates.has("user"):
            from_template = True  # the rendered prompt.user, once the row's vars are read
            prompt = ""
        elif not isinstance(prompt, str):
            err(
                "missing" if prompt is None else f"must be a string, got {type(prompt).__name__}",
                fld="prompt",
                hint="a row needs prompt (text) or messages (a conversation)"
                if prompt is None
                else None,
            )
        row_vars = obj.get("vars")
        if row_vars is None:
            row_vars = {}
        elif not isinstance(row_vars, dict):
            err(f"must be an object, got {type(row_vars).__name__}", fld="vars")
            row_vars = {}
        else:
            for name in row_vars:
                if not name.isidentifier() or keyword.iskeyword(name):
                    err(
                        f"{name[:40]!r} cannot be a template variable",
                        fld=f"vars.{name[:40]}",
                        hint="letters, digits and '_', not starting with a digit",
                    )
        row_request: dict[str, Any] = {}
        if obj.get("request") is not None:
            row_request, problems = parse_request(obj["request"])
            if not problems:
                _, problems = parse_request({**base_request, **row_request})
            for fld, message in problems:
                err(message, fld="request" + (f".{fld}" if fld else ""))
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
                if not TAG.match(tag) or keyword.iskeyword(tag):
                    err(
                        f"tag {tag[:40]!r} cannot be a pytest marker",
                        fld="tags",
                        hint="start with a letter, then letters, digits and '_' (e.g. smoke_test)",
                    )
                elif tag in reserved_tags:
                    err(
                        f"tag {tag!r} is a pytest mark with its own behaviour (it would "
                        "skip, xfail, retry or reconfigure the row instead of labelling it)",
                        fld="tags",
                        hint="rename the tag (e.g. "
                        f"{tag}_rows); 'red' comes from expect.red, a known failure stays "
                        "graded and is deselected with -m 'not red'",
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
        if from_template and templates is not None:
            probe = GoldenCase(id=case_id, prompt="", expect={}, vars=row_vars)
            if not templates.missing(probe):
                try:
                    prompt = templates.render("user", probe)
                except TemplateProblem as exc:
                    errors.append(
                        DatasetError(exc.message, path=path, line=lineno, field=exc.field)
                    )
                    continue
        cases.append(
            GoldenCase(
                id=case_id,
                prompt=prompt,
                # A copy only when there are nulls to drop: 10,000 copies were a visible
                # part of a collection's memory.
                expect=expect
                if None not in expect.values()
                else {k: v for k, v in expect.items() if v is not None},
                must_not=tuple(must_not),
                tags=tuple(dict.fromkeys(tags)),
                metadata=metadata,
                line=lineno,
                profile=profile,
                vars=row_vars,
                messages=messages,
                request=row_request,
            )
        )
        if templates is not None:
            case = cases[-1]
            for fld, name in templates.missing(case):
                errors.append(
                    DatasetError(
                        f"the template uses {{{{ {name} }}}} but the row defines no {name!r}",
                        path=path,
                        line=lineno,
                        field=fld,
                        hint=f'add "vars": {{"{name}": ...}} to the row, or change the '
                        "template in the manifest",
                    )
                )
    if errors:
        if len(errors) == 1:
            raise errors[0]
        raise DatasetErrors(errors)
    return cases


def _last_user_text(messages: Sequence[dict[str, Any]]) -> str:
    """A conversation's question, as text: its last user turn (for reports and retrieval)."""
    for turn in reversed(messages):
        if turn.get("role") == "user":
            content = turn.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(p["text"] for p in content if p.get("type") == "text")
    return ""


def rows_file(folder: Path, manifest: Manifest, manifest_path: Path) -> Path:
    if manifest.rows:
        return contained_file(
            folder / manifest.rows, folder, what="rows file", source=manifest_path, fld="rows"
        )
    # is_file() follows links and is False for a FIFO: both are checked just below instead of
    # being silently skipped (a rows file that is a link out must be an error, not "no rows").
    candidates = sorted(
        p
        for p in folder.glob("*.jsonl")
        if p.name not in RESERVED_FILES and (p.is_symlink() or not p.is_dir())
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
    return contained_file(candidates[0], folder, what="rows file", source=manifest_path)


def discover(
    golden_root: Path,
    problems: list[str] | None = None,
    duplicates: dict[str, list[Path]] | None = None,
) -> dict[str, Path]:
    """Map dataset id → folder for every manifest under ``golden_root`` (sorted walk).

    Manifests that cannot be read are left out; their errors go to ``problems`` if given.
    An id found in more than one folder maps to the first; ``duplicates`` (if given) receives
    every folder of each such id.
    """
    found: dict[str, Path] = {}
    every: dict[str, list[Path]] = {}
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
                every.setdefault(manifest.version, []).append(folder)
        for child in sorted(folder.iterdir(), reverse=True):
            if (
                child.is_dir()
                and not child.is_symlink()  # a link could loop, or lead out of the project
                and child.name not in ("fixtures", "__pycache__")
                and not child.name.startswith(".")
            ):
                stack.append(child)
    if duplicates is not None:
        duplicates.update({k: v for k, v in sorted(every.items()) if len(v) > 1})
    return dict(sorted(found.items()))


def resolve_dataset(spec: str, golden_root: Path, invocation_dir: Path) -> Path:
    """``--golden=ID`` (a manifest version under the golden root) or a folder path.

    Two folders under the golden root with the same ``version`` are a usage error, whichever
    one is asked for: the id names baselines, history and the store, so runs of the two would
    be compared with each other's baselines.
    """
    problems: list[str] = []
    duplicates: dict[str, list[Path]] = {}
    known = discover(golden_root, problems, duplicates)
    if duplicates:
        clashes = "; ".join(
            f"{version!r} in " + " and ".join(str(f) for f in folders)
            for version, folders in duplicates.items()
        )
        raise ConfigError(
            f"two datasets share a version: {clashes}",
            hint="a dataset's `version` is its identity (baselines, history, store): give "
            "each folder its own, e.g. bump one to a new version",
        )
    for base in (invocation_dir, golden_root):
        candidate = base / spec
        if candidate.is_dir() and find_manifest(candidate) is not None:
            return candidate.resolve()
    if spec in known:
        return known[spec].resolve()
    listing = ", ".join(known) if known else f"none found under {golden_root}"
    broken = "".join(f"\n  unreadable manifest: {p}" for p in problems)
    raise ConfigError(
        f"unknown dataset {spec!r}; datasets: {listing}{broken}",
        hint="pass a dataset id from a manifest's `version`, or a folder with a dataset.yaml",
    )


def ungraded_rows(
    cases: Sequence[GoldenCase], graders: Sequence[Grader], modes: dict[str, str], path: Path
) -> list[GoldevalError]:
    """Rows no check reads: they would PASS whatever the answer (a silent false green).

    A row is checked when a grader that is not ``off`` applies to it (the manifest's
    ``graders:`` mode, else the grader's default) or its retrieval is graded (``expect.rag``,
    not a refusal). A row read only by soft graders counts as checked: soft is a documented
    choice (a score reported next to the verdict), whereas a row nothing reads is a mistake.
    """
    active = [g for g in graders if modes.get(g.name, "hard" if g.hard else "soft") != "off"]
    errors: list[GoldevalError] = []
    for case in cases:
        if any(g.applies(case) for g in active) or ("rag" in case.expect and not case.refuse):
            continue
        errors.append(
            DatasetError(
                "no grader checks this row (no expect key a grader reads, no must_not): "
                "it would pass whatever the answer",
                path=path,
                line=case.line,
                field="expect",
                hint="add an expect key or must_not, or set `allow_ungraded_rows: true` in "
                "the manifest to run such rows on purpose",
            )
        )
    return errors


def fixture_problems(dataset: Dataset, cases: Iterable[GoldenCase]) -> list[GoldevalError]:
    """Why the recorded answers of ``cases`` cannot be replayed (fixture mode), per row.

    Only the selected rows are checked (a deselected row needs no fixture). One directory
    scan instead of a stat per row: at 100,000 rows the stats were the cost. A fixture must be
    a regular file inside the dataset folder; a link inside the folder is followed.
    """
    folder = dataset.dir
    errors: list[GoldevalError] = []
    hint = "record it with --golden-mode=record, or write it"
    fixtures_dir = folder / "fixtures"
    entries: dict[str, os.DirEntry[str]] = {}
    try:
        contained = fixtures_dir.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        contained = False
    if fixtures_dir.exists() and not contained:
        return [
            DatasetError(
                f"fixtures/ resolves to {fixtures_dir.resolve()}, outside {folder}",
                path=fixtures_dir,
                hint="keep the recorded answers inside the dataset folder",
            )
        ]
    try:
        with os.scandir(fixtures_dir) as scan:
            entries = {e.name: e for e in scan}
    except OSError:
        entries = {}
    for case in cases:
        name = f"{case.id}.out.md"
        entry = entries.get(name)
        if entry is None:
            errors.append(
                DatasetError(
                    f"no recorded answer fixtures/{name}",
                    path=dataset.rows_path,
                    line=case.line,
                    field="id",
                    hint=hint,
                )
            )
            continue
        try:
            if entry.is_file(follow_symlinks=False):
                continue  # a plain regular file: the common case needs no further stat
        except OSError:
            pass
        try:
            contained_file(
                fixtures_dir / name,
                folder,
                what=f"recorded answer fixtures/{name}",
                source=dataset.rows_path,
                line=case.line,
                fld="id",
            )
        except DatasetError as exc:
            errors.append(exc)
    return errors


def raise_all(errors: list[GoldevalError]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise DatasetErrors(errors)


def load_dataset(
    folder: Path,
    *,
    project_root: Path,
    graders: Sequence[Grader],
    require_fixtures: bool,
    reserved_tags: Collection[str] = RESERVED_TAGS,
) -> Dataset:
    """Load and validate a dataset folder.

    ``require_fixtures``: check every row's recorded answer now (the plugin checks only the
    selected rows, after deselection, with :func:`fixture_problems`).
    """
    folder = folder.resolve()
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
    cases = parse_rows(path, expect_keys, graders, reserved_tags, manifest)
    if not manifest.allow_ungraded_rows:
        raise_all(ungraded_rows(cases, graders, modes, path))
    domain = DomainConfig(
        contract=manifest.contract or DomainConfig().contract,
        retriever=manifest.retriever or DomainConfig().retriever,
    )
    pack: Pack | None = None
    pack_spec = manifest.pack
    project = project_root.resolve()
    if pack_spec is None:
        # Only the java-autotest profile picks a project pack/ up unnamed: a generic dataset
        # gets a pack (and its prompt parts) only when its manifest names one.
        default = project_root / "pack"
        if get_profile(manifest.profile).default_pack and default.is_dir():
            pack = load_pack(default, project)
    elif pack_spec.lower() not in ("none", "null", ""):
        pack_dir = folder / pack_spec
        real = pack_dir.resolve()
        if not real.is_relative_to(project):
            raise DatasetError(
                f"pack {pack_spec!r} resolves to {real}, outside the project {project}",
                path=manifest_path,
                field="pack",
                hint="keep the pack inside the project",
            )
        pack = load_pack(real, project)
    rubric: str | None = None
    rubric_path = folder / "rubric.md"
    if rubric_path.exists() or rubric_path.is_symlink():
        real_rubric = contained_file(rubric_path, folder, what="rubric")
        try:
            rubric = read_regular_file(real_rubric).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(f"not valid UTF-8 ({exc.reason})", path=rubric_path) from None
    dataset = Dataset(
        dir=folder,
        manifest_path=manifest_path,
        manifest=manifest,
        rows_path=path,
        cases=cases,
        pack=pack,
        domain=domain,
        rubric=rubric,
        grader_modes=modes,
    )
    if require_fixtures:
        raise_all(fixture_problems(dataset, cases))
    return dataset
