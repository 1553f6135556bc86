"""A steady-state fp32 training step on the GPU with TF32 allowed (#40): a 4-layer,
4096-wide MLP, forward, backward and SGD on a 1024-sample batch, after a warm-up; prints
the best of five half-second windows in Ksamples/s (the best window is what the GPU can
do, as timeit takes the fastest run). ``NVIDIA_TF32_OVERRIDE=0`` makes cuBLAS refuse TF32
whatever torch allows, and every matmul runs in full fp32."""

import time

import torch

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.manual_seed(0)
WIDE, BATCH = 4096, 1024
layers = [m for _ in range(4) for m in (torch.nn.Linear(WIDE, WIDE), torch.nn.ReLU())]
model = torch.nn.Sequential(*layers).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(BATCH, WIDE, device="cuda"), torch.randn(BATCH, WIDE, device="cuda")


def step() -> None:
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()


for _ in range(10):
    step()
torch.cuda.synchronize()
best = 0.0
for _ in range(5):
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < 0.5:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        n += 5
    best = max(best, n * BATCH / (time.perf_counter() - start) / 1e3)
print(f"throughput: {best:.1f}")
