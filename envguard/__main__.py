"""Entry point for ``envguard`` and ``python -m envguard``.

``--version`` is answered before click and the core are imported; everything else is
click's (a second parser for the plain forms of snapshot and diff saved 20 ms and went).
"""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv in (["--version"], ["-V"]):
        from envguard import __version__

        print(f"envguard, version {__version__}")
        return
    from envguard.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
