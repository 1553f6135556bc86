"""Entry point for ``envguard`` and ``python -m envguard``.

``--version`` is answered before click and the core are imported, and the plain forms of
``snapshot`` and ``diff`` run without click (:mod:`envguard._fastpath`): they are what scripts,
shells and CI call most often, and they should cost little more than reading the venv.
"""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv in (["--version"], ["-V"]):
        from envguard import __version__

        print(f"envguard, version {__version__}")
        return
    from envguard import _fastpath

    parsed = _fastpath.parse(argv)
    if parsed is not None:
        _fastpath.run(*parsed)
    from envguard.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
