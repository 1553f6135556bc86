"""Entry point for ``envguard`` and ``python -m envguard``.

``--version`` is answered before click and the core are imported: it is what scripts and
shells call most often, and it should cost no more than the interpreter's start.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        from envguard import __version__

        print(f"envguard, version {__version__}")
        return
    from envguard.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
