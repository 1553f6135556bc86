"""Started by torchrun in bench/gpu/guard_nccl.sh: envguard.guard on real ranks.

    guard_worker.py LOCK BACKEND SET_DEVICE(0|1) DRIFT(0|1) [default-group]

DRIFT sets NCCL_ALGO=Tree on rank 1 before the process group exists, as a drifted
environment would; SET_DEVICE calls torch.cuda.set_device before the guard. With
``default-group`` the facts are gathered the old way (all_gather_object over the job's
default group), to show what that does under NCCL.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

lock, backend, set_device, drift = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1"
old_way = sys.argv[5:] == ["default-group"]
rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
if drift and rank == 1:
    os.environ["NCCL_ALGO"] = "Tree"
dist.init_process_group(backend)
if set_device:
    torch.cuda.set_device(local)

import envguard  # noqa: E402
from envguard.runtime_guard import DriftError  # noqa: E402

if old_way:
    out = [None] * dist.get_world_size()
    try:
        dist.all_gather_object(out, {"rank": rank})
        print(f"rank {rank} OLD WAY OK", flush=True)
    except Exception as exc:  # what the default NCCL group does before set_device
        print(f"rank {rank} OLD WAY FAILED: {str(exc).splitlines()[0][:200]}", flush=True)
    sys.exit(0)
try:
    start = time.perf_counter()
    envguard.guard(lock, fail_on="warning", ranks=True, venv=sys.prefix)
    print(f"rank {rank} GUARD OK in {time.perf_counter() - start:.2f} s", flush=True)
    if backend == "nccl" and set_device:
        x = torch.ones(1, device=f"cuda:{local}") * (rank + 1)
        dist.all_reduce(x)
        print(f"rank {rank} then trains: all_reduce gives {x.item():.0f}", flush=True)
except DriftError as exc:
    print(f"rank {rank} GUARD STOP", flush=True)
    if rank == 0:
        print(exc, flush=True)
dist.destroy_process_group()
