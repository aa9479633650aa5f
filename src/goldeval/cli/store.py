"""``goldeval runs | export``: the store seen from the shell (``show`` and ``gate`` find a run
in the store, the runs folder or a file through ``goldeval.cli.runs``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from goldeval.cli.project import project_root, refuse_write_target
from goldeval.core.errors import GoldevalError
from goldeval.store import StoreError, open_store
from goldeval.store.views import run_document
from goldeval.verdict.exit_codes import OK


def _open(url: str) -> Any:
    try:
        if "://" not in url and not Path(url).exists():
            raise GoldevalError(
                "no run store here", path=url, hint="run pytest --golden=ID first, or pass --store"
            )
        return open_store(url)
    except StoreError as exc:
        raise GoldevalError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    store = _open(args.store)
    try:
        if args.command == "runs":
            rows = store.runs(limit=50)
            print(
                f"{'run':<24} {'key':<14} {'dataset':<16} {'mode':<13} {'model':<18} "
                f"{'status':<11} overall"
            )
            for r in rows:
                rate = "n/a" if r.pass_rate is None else f"{r.pass_rate * 100:.1f}%"
                print(
                    f"{r.run_id:<24} {(r.run_key or '-'):<14} {r.dataset_id:<16} "
                    f"{r.mode:<13} {(r.model or '-'):<18} {r.status:<11} {rate}"
                )
            if not rows:
                print("no runs yet")
            return OK
        doc = run_document(store, args.run)
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
        if args.out:
            out = refuse_write_target(Path(args.out), project_root(), "file", "--out")
            out.write_text(text, encoding="utf-8")
            print(f"written to {args.out}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return OK
    finally:
        store.close()
