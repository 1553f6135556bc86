"""Compile flex_attention (forward and backward, with a block mask) and a Linear, so that
TORCHINDUCTOR_CACHE_DIR holds a real cache. Run with the venv's own python on a GPU."""

import time

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def main() -> None:
    start = time.perf_counter()
    B, H, S, D = 2, 4, 1024, 64
    q, k, v = (
        torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        for _ in range(3)
    )
    mask = create_block_mask(causal, B=None, H=None, Q_LEN=S, KV_LEN=S, device="cuda")
    out = torch.compile(flex_attention)(q, k, v, block_mask=mask)
    out.sum().backward()
    lin = torch.compile(torch.nn.Linear(D, D).cuda())
    lin(torch.randn(8, D, device="cuda")).sum().backward()
    torch.cuda.synchronize()
    print(f"compiled flex_attention fwd+bwd and Linear in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
