"""Configuration of the evaluation service (command line and environment)."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from goldeval.core.errors import ConfigError
from goldeval.core.secrets import MIN_SECRET_LENGTH, run_secrets
from goldeval.core.settings import mask_secrets
from goldeval.dataset.discovery import check_golden_root
from goldeval.server.auth import KeyRing

#: Dataset ids and folder names a request may name: no path separators, no ``..``.
DATASET_SPEC = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: Run ids this service creates (and therefore the only ones a path may name).
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


@dataclass
class ServiceSettings:
    """Everything a server or worker process needs; paths are absolute."""

    store_url: str
    """SQLite path or ``postgresql://`` URL (may hold a password: never logged as is)."""
    root: Path
    """Project root: pytest runs here (its conftest.py, pytest.ini, baselines/)."""
    datasets: Path
    """The golden root (folder of dataset folders)."""
    runs_dir: Path
    """Where run folders are written (``--golden-out``)."""
    work_dir: Path
    """Per-run pytest logs and exported baselines (``<root>/.goldeval/service``)."""
    keys: KeyRing | None = None
    lease_seconds: float = 30.0
    heartbeat_seconds: float = 2.0
    poll_seconds: float = 1.0
    kill_grace_seconds: float = 20.0
    max_body_bytes: int = 64 * 1024
    max_cases: int | None = None
    max_attempts: int = 20
    rate_limit_per_minute: int | None = None
    pool_size: int = 4
    allow_live: bool = True
    python: str = field(default_factory=lambda: sys.executable)

    @classmethod
    def build(
        cls,
        *,
        store_url: str,
        root: Path,
        datasets: Path | None,
        runs_dir: Path | None = None,
        **options: object,
    ) -> ServiceSettings:
        given = (datasets if datasets is not None else root / "golden").absolute()
        root = root.resolve()
        check_datasets_folder(given, root)  # before it is resolved: the link is refused
        golden = given.resolve()
        runs = (runs_dir if runs_dir is not None else root / ".goldeval" / "runs").resolve()
        work = root / ".goldeval" / "service"
        if "://" not in store_url and not Path(store_url).is_absolute():
            store_url = str((root / store_url).resolve())
        return cls(
            store_url=store_url,
            root=root,
            datasets=golden,
            runs_dir=runs,
            work_dir=work,
            **options,  # type: ignore[arg-type]
        )

    # ---- what clients may see of the server's file system

    @cached_property
    def _path_names(self) -> list[tuple[re.Pattern[str], str]]:
        """(absolute folder, what an answer shows instead), longest path first."""
        folders = [(self.runs_dir, "<runs>"), (self.datasets, "<datasets>")]
        if "://" not in self.store_url:
            folders.append((Path(self.store_url).parent, "<store>"))
        # Inside the project a path is shown relative to it; outside, by its role.
        shown = {str(f): name for f, name in folders if not f.is_relative_to(self.root)}
        shown[str(self.root) + "/"] = ""
        shown[str(self.root)] = "."
        return [
            # A folder only where its name ends (not /srv/project inside /srv/project2).
            (re.compile(re.escape(path) + ("" if path.endswith("/") else r"(?![\w.-])")), name)
            for path, name in sorted(shown.items(), key=lambda item: -len(item[0]))
        ]

    @cached_property
    def _secrets(self) -> tuple[str, ...]:
        """The credentials a run's pytest process inherits from this process (the store URL's
        password, provider keys and passwords in the environment: goldeval.core.secrets'
        variables), every form of each, longest first. The service's API keys are not among
        them: no run sees those, and the service keeps only their digests."""
        forms = run_secrets((), os.environ, urls=(self.store_url,))
        kept = {f for f in forms if len(f) >= MIN_SECRET_LENGTH}
        return tuple(sorted(kept, key=len, reverse=True))

    @property
    def secret_forms(self) -> tuple[str, ...]:
        """What :meth:`masked` masks (a run's log is masked with them as it is written)."""
        return self._secrets

    def masked(self, text: str) -> str:
        """``text`` with every credential a run inherits (:attr:`_secrets`) masked."""
        return mask_secrets(text, self._secrets)

    def public_text(self, text: str) -> str:
        """``text`` with every credential a run inherits masked (a project's conftest.py may
        print its environment into the run's log, an exception may quote the store URL),
        then the server's absolute folders (project root, datasets, runs, the SQLite file's
        folder) replaced by project-relative names or ``<runs>``-style roles, then any other
        absolute path of this machine (a link's target outside the project, Python's own
        files in a traceback) by ``<server path>``: error messages, pages and logs name files
        without revealing where the server keeps them."""
        text = self.masked(text)
        for pattern, name in self._path_names:
            text = pattern.sub(name, text)
        return _other_paths(text)

    def public_json(self, text: str) -> str:
        """JSON text with no absolute server path in its strings (a results item: the record
        holds what the run wrote, and a provider's error message names the file it could not
        open). Rewritten on the decoded strings, never on the text itself (a path ending in an
        escaped quote would swallow the escape); text with no such path is returned as is."""
        if self.public_text(text) == text:
            return text
        value = self.public_data(json.loads(text))
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def public_data(self, value: Any) -> Any:
        """:meth:`public_text` on every string of a JSON-like value (dicts, lists)."""
        if isinstance(value, str):
            return self.public_text(value)
        if isinstance(value, dict):
            return {key: self.public_data(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.public_data(item) for item in value]
        return value


def check_datasets_folder(folder: Path, root: Path) -> None:
    """The plugin's refusal of a golden root reached through a symbolic link
    (:func:`~goldeval.dataset.discovery.check_golden_root`), for the service's datasets
    folder: :class:`ConfigError` (a usage error) naming the link. Resolved, a link out of the
    project became the ``golden_root`` and rows path of every run, outside the project: pytest
    took its rootdir there, found no baselines, and a run that must be refused passed."""
    try:
        check_golden_root(folder, root)
    except ConfigError as exc:
        raise ConfigError(
            f"datasets folder: {exc.message}",
            hint="copy the datasets in, or pass the real folder with --datasets",
        ) from None


#: An absolute path in a text: slashes not inside a word or a relative path (``a/b``), then
#: its first name (the top folder), then the rest up to a space, a quote, a bracket or a
#: colon (``path:line``). A URL's host (``http://127.0.0.1:8000/...``) is a "first name" no
#: top folder has.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~/-])/+([^/\s'\"`<>|,;:()\[\]{}]+)([^\s'\"`<>|,;:()\[\]{}]*)")


@lru_cache(maxsize=1)
def _top_folders() -> frozenset[str]:
    """The names of this machine's top folders (``tmp``, ``home``, ``usr``, ...): a text's
    ``/name/...`` is a path of this machine only when ``name`` is one of them (an API route
    such as ``/api/eval/runs/{id}/resume`` is not)."""
    try:
        return frozenset(entry.name for entry in Path("/").iterdir())
    except OSError:
        return frozenset()


def _other_paths(text: str) -> str:
    if "/" not in text:
        return text
    tops = _top_folders()

    def hide(match: re.Match[str]) -> str:
        return "<server path>" if match.group(1) in tops else match.group(0)

    return _ABSOLUTE_PATH.sub(hide, text)
