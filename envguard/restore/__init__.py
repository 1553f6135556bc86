"""``envguard restore``: put a venv (and its code and caches) back as a lockfile says.

- :mod:`.plan`: what will happen, from the lock alone;
- :mod:`.build`: the venv: built beside the old one, verified, swapped in (:mod:`.transaction`);
- :mod:`.caches` and :mod:`.code`: the compile caches (:mod:`.cache_archive`) and the code
  (:mod:`.checkout`);
- :mod:`.steps`: the steps asked, in their order, and what is said when one fails;
- :mod:`.processes`: who is using a venv; :mod:`.backups`: the venvs a restore kept.

Nothing is imported here: ``import envguard.restore.processes`` loads what it needs alone.
"""
