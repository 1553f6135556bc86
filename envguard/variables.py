"""What an environment variable does when a lock, not the user, chooses its value.

A lock is someone else's file. Most of its variables only tune a run (``OMP_NUM_THREADS=8``)
and a bisect trial may set them as the lock has them. Two kinds choose more:

- a **loader** variable chooses code that runs (``LD_PRELOAD``, ``PYTHONPATH``, a CUDA
  injection library, an NCCL plugin, the ``ptxas`` Triton runs): from a lock it is shown,
  and set only when the user trusts the lock's variables (``--trust-lock-env``);
- a **location** names where a program writes (a cache, a log, a dump): from a lock it is
  rebased into the trial's own folder, so that a lock never chooses where anything is
  written (a ``NCCL_DEBUG_FILE`` of ``~/.ssh/authorized_keys``).

Any other variable whose value a lock sets to an absolute path is taken for a loader: what
it does with the path is not known here, so it is not guessed.
"""

from __future__ import annotations

from typing import Literal

Role = Literal["loader", "folder", "file", "value"]

LOADERS = frozenset(
    {
        "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONPATH", "PYTHONHOME",
        "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONEXECUTABLE", "PYTHONBREAKPOINT",
        "PYTHONWARNINGS",  # a warning category names a module, which is imported
        "CUDA_INJECTION64_PATH", "CUDA_INJECTION32_PATH", "CUDA_HOME", "CUDA_PATH",
        "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN",
        "TRITON_LIBCUDA_PATH", "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH",
        "TRITON_NVDISASM_PATH", "TRITON_LIBDEVICE_PATH",
    }
)  # fmt: skip
# Where a program writes a file of its own: rebased to a file in the trial's folder.
_FILES = frozenset(
    {
        "NCCL_DEBUG_FILE", "NCCL_TOPO_DUMP_FILE", "NCCL_GRAPH_DUMP_FILE",
        "CUDNN_LOGDEST_DBG", "CUBLAS_LOGDEST_DBG", "CUBLASLT_LOG_FILE",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "HF_TOKEN_PATH",
    }
)  # fmt: skip
_FILE_SUFFIXES = ("_FILE", "_LOGDEST_DBG", "_LOGFILE")
_FOLDER_SUFFIXES = ("_DIR", "_HOME", "_ROOT", "_CACHE", "_PATH", "_PREFIX", "_DIRECTORY")
_FOLDERS = frozenset({"HOME", "TMPDIR", "TMP", "TEMP", "TORCH_TRACE", "TRANSFORMERS_CACHE"})
# Values that name a stream, not a place (cuDNN's and cuBLAS's log destinations).
_STREAMS = frozenset({"stdout", "stderr", ""})


def role(name: str, value: str) -> Role:
    """What setting ``name`` to ``value`` from a lock does."""
    if name in LOADERS or name.startswith("LD_"):
        return "loader"
    place = _is_place(value)
    if name in _FILES or name.endswith(_FILE_SUFFIXES):
        return "file" if place and value not in _STREAMS else "value"
    if name in _FOLDERS or name.startswith("XDG_") or name.endswith(_FOLDER_SUFFIXES):
        return "folder" if place else "value"  # TORCHINDUCTOR_FX_GRAPH_CACHE=1 is a switch
    if any(word.startswith(("/", "~")) for word in _words(value)):
        return "loader"
    return "value"


def _is_place(value: str) -> bool:
    return "/" in value or value.startswith(("~", "."))


def _words(value: str) -> list[str]:
    """A value's words as paths hide in them: ``--xla_dump_to=/x``, ``a:/b``, ``k=/v``."""
    for sep in ("=", ":", ",", ";"):
        value = value.replace(sep, " ")
    return value.split()
