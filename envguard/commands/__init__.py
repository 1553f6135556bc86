"""Each command's core, as the CLI and the library call it: a request in, a typed result out.

Which lock, venv and repository, which defaults (:mod:`envguard.config`), and the exit code
are decided here; :mod:`envguard.cli` only parses, calls, renders and exits.
"""
