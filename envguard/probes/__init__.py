"""Read-only probes, one per source of truth. None imports or runs code from the target venv."""
