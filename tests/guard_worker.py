"""Run by torchrun in test_guard: rank 1 drifts an environment variable before the guard."""

import os
import sys

import torch.distributed as dist

import envguard
from envguard.runtime_guard import DriftError

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    os.environ["NCCL_ALGO"] = "Tree"
try:
    envguard.guard(sys.argv[1], fail_on="warning", ranks=True, venv=sys.argv[2])
    print(f"rank {dist.get_rank()} GUARD OK", flush=True)
except DriftError as exc:
    print(f"rank {dist.get_rank()} GUARD STOP", flush=True)
    if dist.get_rank() == 0:
        print(exc, flush=True)
dist.destroy_process_group()
