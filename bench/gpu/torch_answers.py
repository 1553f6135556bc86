"""Print, as JSON, what torch itself says about its build and the GPU (venv's python)."""

import json
import time

start = time.perf_counter()
import torch  # noqa: E402

props = torch.cuda.get_device_properties(0) if torch.cuda.is_available() else None
cudnn = torch.backends.cudnn.version()
nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
print(
    json.dumps(
        {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "git_version": torch.version.git_version,
            "cudnn": f"{cudnn // 10000}.{cudnn % 10000 // 100}.{cudnn % 100}" if cudnn else None,
            "nccl": ".".join(map(str, nccl)) if nccl else None,
            "gpu_name": props.name if props else None,
            "compute_capability": f"{props.major}.{props.minor}" if props else None,
            "gpu_count": torch.cuda.device_count(),
            "import_s": time.perf_counter() - start,
        }
    )
)
