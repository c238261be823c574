#!/usr/bin/python3
"""ResNet-50 training step in PyTorch on one GPU, strict fp32: the cross-check
of `starconv-plan calibrate --device cuda` in docs/PLANNER-VS-PAPERS.md
("Measured GPU kernels"): torchvision's ResNet-50, batch 128 of random
224x224 images, TF32 off, forward and backward (no optimizer), each step
between CUDA events, the median of 7 after 3 warm-ups; with cuDNN's
heuristics (cudnn.benchmark off, as starconv) and autotuned.  No arguments;
prints the torch and cuDNN versions, the device and the two medians.  Needs
a CUDA device and torchvision (run on the GPU machine's own python3)."""
import torch
import torchvision
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.set_float32_matmul_precision("highest")
dev = torch.device("cuda")
print(torch.__version__, torch.backends.cudnn.version(), torch.cuda.get_device_name(0), flush=True)
for bench in (False, True):
    torch.backends.cudnn.benchmark = bench
    m = torchvision.models.resnet50().to(dev)
    x = torch.randn(128, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (128,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    ts = []
    for i in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        loss = loss_fn(m(x), y)
        loss.backward()
        b.record()
        torch.cuda.synchronize()
        if i >= 3:
            ts.append(a.elapsed_time(b))
        m.zero_grad(set_to_none=True)
    ts.sort()
    print("cudnn.benchmark=%s: step %.1f ms (median of 7; min %.1f max %.1f)" % (bench, ts[3], ts[0], ts[-1]), flush=True)
