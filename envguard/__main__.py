"""Entry point for ``envguard`` and ``python -m envguard``.

``--version`` is answered before click and the core are imported, and the plain forms of
``snapshot`` run without click (:mod:`envguard._fastpath`): they are what scripts, shells and
CI call most often, and they should cost little more than the interpreter's start.
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

    kw = _fastpath.parse(argv)
    if kw is not None:
        _fastpath.snapshot(kw)
    from envguard.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
