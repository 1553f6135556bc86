"""``envguard bisect``: which drifted fact costs the throughput.

- :mod:`.moves`: the drift between GOOD (a lock) and BAD (the live environment) cut into
  moves, facts a trial applies or not; pure, from two snapshots;
- :mod:`.metric`: what a run of the user's command measured (a number, or why none); pure;
- :mod:`.search`: bisection, then ddmin, over sets of moves, each set measured once; pure,
  driven by a ``measure(moves)`` function;
- :mod:`.command`: the user's command as it runs in a copy: the live venv's interpreter and
  scripts pointed at the copy's; pure but for reading the venv's ``bin``;
- :mod:`.trials`: the I/O: a trial's venv (uv), code (a clone of its own), caches and
  environment, the command run in them, and the work folder cleaned whatever happens.
"""
