"""The user's benchmark in the H200 bisect (bench/gpu/bisect_h200.sh): the first training step
of a torch.compile'd transformer, compile included, as a training smoke test sees it.

What a warm Inductor cache (FX graph and AOTAutograd caches, Triton kernels) saves is most of
this step: it prints ``first step S s``.
"""

import time

import torch

torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True, dropout=0.0)
model = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
step = torch.compile(model)
x = torch.randn(8, 512, 1024, device="cuda")

started = time.perf_counter()
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = step(x).float().pow(2).mean()
loss.backward()
opt.step()
torch.cuda.synchronize()
print(f"first step {time.perf_counter() - started:.2f} s")
