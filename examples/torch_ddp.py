#!/usr/bin/env python3
"""PyTorch's DDP tutorial program, on any torch.distributed backend.

    /usr/bin/python3 examples/torch_ddp.py ringtree   # or: gloo
    /usr/bin/python3 examples/torch_ddp.py ringtree --ranks 3 --epochs 4

ToyModel (Linear(10,10) -> ReLU -> Linear(10,5)) trained with SGD under
DistributedDataParallel on a small random dataset split by a
DistributedSampler. Against the tutorial, two lines change:

    import ringtree_torch                        # registers the backend
    dist.init_process_group("ringtree", ...)     # instead of "gloo"

Rank 0 prints the loss of each epoch and a checksum of the final
parameters (the same on every backend that sums exactly alike).
"""
import argparse
import hashlib
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

# Where the module is when run from the source tree (meson puts it in build/python).
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("RINGTREE_TORCH_PATH", os.path.join(here, "..", "build", "python")))


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def setup(rank, world_size, backend, port):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    if backend == "ringtree":
        import ringtree_torch  # noqa: F401  (registers the backend)
    dist.init_process_group(backend, rank=rank, world_size=world_size)


def demo_basic(rank, world_size, backend, epochs, port, out):
    setup(rank, world_size, backend, port)
    torch.manual_seed(0)  # the same model and data on every rank and backend
    data = TensorDataset(torch.randn(256, 10), torch.randn(256, 5))
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = ToyModel()
    ddp_model = DDP(model)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.01)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        if rank == 0:
            print(f"{backend} epoch {epoch}: loss {total / len(loader):.6f}", flush=True)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    if rank == 0:
        digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]
        print(f"{backend} parameters sha256 {digest}", flush=True)
        if out:
            torch.save(flat, out)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("backend", nargs="?", default="ringtree", help="ringtree (default) or gloo")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--port", type=int, default=0, help="MASTER_PORT (default: a free one)")
    ap.add_argument("--save", default="", help="write the final parameters (rank 0's) to this file")
    a = ap.parse_args()
    port = a.port
    if port == 0:
        import socket
        with socket.socket() as s:
            s.bind(("localhost", 0))
            port = s.getsockname()[1]
    mp.spawn(demo_basic, args=(a.ranks, a.backend, a.epochs, port, a.save), nprocs=a.ranks, join=True)


if __name__ == "__main__":
    main()
