"""Configuration of the evaluation service (command line and environment)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

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
        root = root.resolve()
        golden = (datasets if datasets is not None else root / "golden").resolve()
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
