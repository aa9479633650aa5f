"""The ``goldeval`` commands that hand over to one module each: site, runs/export, prune,
verify, init, import, serve and worker."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from goldeval.cli import prune
from goldeval.cli import store as store_cli
from goldeval.cli.importers import import_dataset
from goldeval.cli.project import (
    DEFAULT_RUNS,
    project_root,
    refuse_write_target,
    store_location,
)
from goldeval.cli.runs import contained
from goldeval.cli.scaffold import find_project_root, init_dataset
from goldeval.core.errors import GoldevalError
from goldeval.core.textsafe import one_line, safe_text
from goldeval.dataset.discovery import check_golden_root
from goldeval.reports import site
from goldeval.results.evidence import verify_run_dir
from goldeval.verdict import exit_codes


def cmd_site(args: argparse.Namespace) -> int:
    runs = Path(args.runs) if args.runs else project_root(args.root) / DEFAULT_RUNS
    if not args.runs:  # the project's own: read through no link, as pytest writes none
        contained(runs, runs, "the runs folder")
    if not runs.is_dir():
        # Nothing to render is a usage mistake (outside a project, a wrong --runs), not a
        # failed gate.
        raise GoldevalError(
            "no runs folder", path=runs, hint="run pytest --golden=ID first, or pass --runs DIR"
        )
    out = refuse_write_target(Path(args.out), project_root(args.root), "folder", "--out")
    return int(site.main_site(["--out", str(out), "--runs", str(runs)]))


def cmd_store(args: argparse.Namespace) -> int:
    args.store = store_location(args)
    return int(store_cli.run(args))


def cmd_prune(args: argparse.Namespace) -> int:
    root = project_root(args.root)
    policy = prune.Policy(keep_last=args.keep_last, older_than=args.older_than)
    url = None if (args.store or "").lower() in ("none", "off") else store_location(args)
    outcome = prune.prune(
        runs_dir=Path(args.runs) if args.runs else root / DEFAULT_RUNS,
        baselines_dir=Path(args.baselines) if args.baselines else root / "baselines",
        store_url=url,
        policy=policy,
        dry_run=args.dry_run,
        project=root,
    )
    if args.json:
        print(json.dumps(prune.summary_of(outcome), indent=2, ensure_ascii=False))
    else:
        for line in outcome.lines():
            print(safe_text(line))
    return exit_codes.OK


def cmd_verify(args: argparse.Namespace) -> int:
    problems = verify_run_dir(Path(args.run_dir))
    for p in problems:
        print(one_line(p))
    if problems:
        print(f"goldeval verify: {len(problems)} problem(s)")
        return exit_codes.COMPARISON_INVALID
    print("goldeval verify: every artifact present and unchanged")
    return exit_codes.OK


def cmd_init(args: argparse.Namespace) -> int:
    scaffold = init_dataset(args.name, Path.cwd())
    print(f"goldeval init: dataset {scaffold.dataset_id} in {scaffold.root}")
    for path in scaffold.created:
        print(f"  created {path}")
    for path in scaffold.kept:
        print(f"  kept    {path}")
    print("next:")
    for step, command in enumerate(scaffold.next_steps(), start=1):
        print(f"  {step}. {command}")
    return exit_codes.OK


def cmd_import(args: argparse.Namespace) -> int:
    cwd = Path.cwd()
    if args.golden_root:
        golden_root = Path(args.golden_root)
    else:
        golden_root = (find_project_root(cwd) or cwd) / "golden"
    # Written into: never through a link out of the project (pytest would refuse to read it).
    check_golden_root(golden_root, find_project_root(cwd) or cwd)
    try:
        report = import_dataset(
            Path(args.source),
            args.name,
            golden_root,
            fmt=args.format,
            split=args.split,
            strict_ids=args.strict_ids,
        )
    except MemoryError:
        # Every reader is bounded by the import limits; a source inside them can still need
        # more memory than this machine has (a 240 MB CSV): a clear error, nothing staged.
        raise GoldevalError(
            f"{args.source}: reading it ran out of memory",
            hint="split the source into smaller files, or import on a machine with more memory",
        ) from None
    for line in report.lines():
        print(line)
    print(f"next: pytest --golden={args.name}-v1")
    return 0


def _server_main() -> Any:
    """goldeval.server.main, imported only when asked for: the server is an optional extra
    (``pip install -e '.[server]'``) and every other command must work without it."""
    try:
        from goldeval.server import main as server_main
    except ImportError as exc:
        raise GoldevalError(
            f"the evaluation service needs the [server] extra ({exc.name or exc} is missing)",
            hint="pip install 'pytest-goldeval[server]'",
        ) from None
    return server_main


def cmd_serve(args: argparse.Namespace) -> int:
    server_main = _server_main()
    root = str(project_root(args.root))
    return int(server_main.serve(args, store_location(args), root))


def cmd_worker(args: argparse.Namespace) -> int:
    server_main = _server_main()
    root = str(project_root(args.root))
    return int(server_main.worker(args, store_location(args), root))
