"""``python -m millimcp``: the command line."""

from __future__ import annotations

import sys


def main() -> None:
    from millimcp.cli import main as cli_main

    sys.exit(cli_main())


if __name__ == "__main__":
    main()
