"""``goldeval``'s entry point: parse the command line (goldeval.cli.parser, which lists the
commands), run the command, and turn a user mistake into a message and its exit code instead of
a traceback."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from goldeval.cli.parser import build_parser
from goldeval.core.errors import GoldevalError
from goldeval.core.textsafe import safe_text
from goldeval.verdict import exit_codes

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except GoldevalError as exc:
        print(f"goldeval: {safe_text(exc)}", file=sys.stderr)
        return exit_codes.code_for_error(exc)
    except KeyboardInterrupt:
        return exit_codes.INTERRUPTED
    except BrokenPipeError:  # `goldeval show RUN | head`
        sys.stderr.close()
        return exit_codes.OK
    except OSError as exc:
        # A path the command was given and the system refused (a missing folder, a file
        # where a folder goes): its name and the reason, not a traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"goldeval: {safe_text(where)}{exc.strerror or exc}", file=sys.stderr)
        return exit_codes.code_for_os_error(exc)


if __name__ == "__main__":
    raise SystemExit(main())
