#!/usr/bin/env python3
"""PyTorch's DDP tutorial program, on any torch.distributed backend.

    python examples/torch_ddp.py ringtree   # or: gloo (python: one with torch 2.x, e.g. build/torch-venv/bin/python)
    python examples/torch_ddp.py ringtree --ranks 3 --epochs 4
    torchrun --standalone --nproc_per_node 2 examples/torch_ddp.py ringtree --checkpoint ckpt.pt

ToyModel (Linear(10,10) -> ReLU -> Linear(10,5)) trained with SGD under
DistributedDataParallel on a small random dataset split by a
DistributedSampler. Against the tutorial, two lines change:

    import ringtree_torch                        # registers the backend
    dist.init_process_group("ringtree", ...)     # instead of "gloo"

Started by torchrun (or any launcher that sets RANK, WORLD_SIZE and
MASTER_ADDR/PORT) it runs as that one rank; started by hand it spawns
--ranks processes itself. With --checkpoint, rank 0 saves the model and
optimizer after every epoch and a new start resumes from there: what
torchrun's restarts (--max_restarts) need to pick up a killed run.

Rank 0 prints the loss of each epoch and a checksum of the final
parameters (the same on every backend that sums exactly alike).
"""
import argparse
import datetime
import gc
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


def setup(rank, world_size, a):
    if a.backend == "ringtree":
        import ringtree_torch  # noqa: F401  (registers the backend)
    # (MASTER_ADDR and MASTER_PORT: set by torchrun, or by main below)
    dist.init_process_group(a.backend, rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=a.timeout))


def demo_basic(rank, world_size, a, after_step=None):
    setup(rank, world_size, a)
    torch.manual_seed(0)  # the same model and data on every rank and backend
    data = TensorDataset(torch.randn(256, 10), torch.randn(256, 5))
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = ToyModel()
    optimizer = optim.SGD(model.parameters(), lr=0.01)
    first = 0
    if a.checkpoint and os.path.exists(a.checkpoint):
        snapshot = torch.load(a.checkpoint)
        model.load_state_dict(snapshot["model"])
        optimizer.load_state_dict(snapshot["optimizer"])
        first = snapshot["epoch"] + 1
        if rank == 0:
            print(f"{a.backend} resuming at epoch {first} from {a.checkpoint}", flush=True)
    ddp_model = DDP(model)
    loss_fn = nn.MSELoss()
    for epoch in range(first, a.epochs):
        sampler.set_epoch(epoch)
        total = 0.0
        for step, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
            if after_step:
                after_step(epoch, step)
        if rank == 0:
            print(f"{a.backend} epoch {epoch}: loss {total / len(loader):.6f}", flush=True)
            if a.checkpoint:  # written whole, then renamed: a kill never leaves half a file
                torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
                           a.checkpoint + ".tmp")
                os.replace(a.checkpoint + ".tmp", a.checkpoint)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    if rank == 0:
        digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]
        print(f"{a.backend} parameters sha256 {digest}", flush=True)
        if a.save:
            torch.save(flat, a.save)
    # DDP holds the group: drop it (and its reference cycles) first, so that
    # the group ends here and not while the interpreter shuts down (gloo's
    # worker threads abort the process then, about one run in fifteen on
    # torch 2.15)
    del ddp_model
    gc.collect()
    dist.destroy_process_group()


def main(argv=None, after_step=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("backend", nargs="?", default="ringtree", help="ringtree (default) or gloo")
    ap.add_argument("--ranks", type=int, default=2, help="processes to spawn (not under torchrun)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--port", type=int, default=0, help="MASTER_PORT (default: a free one; not under torchrun)")
    ap.add_argument("--save", default="", help="write the final parameters (rank 0's) to this file")
    ap.add_argument("--checkpoint", default="", help="save every epoch here, and resume from it if it exists")
    ap.add_argument("--timeout", type=float, default=1800, help="the group's timeout in seconds (torch's default)")
    a = ap.parse_args(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by torchrun: this process is one rank
        demo_basic(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), a, after_step)
        return
    os.environ["MASTER_ADDR"] = "localhost"
    port = a.port
    if port == 0:
        import socket
        with socket.socket() as s:
            s.bind(("localhost", 0))
            port = s.getsockname()[1]
    os.environ["MASTER_PORT"] = str(port)
    mp.spawn(demo_basic, args=(a.ranks, a), nprocs=a.ranks, join=True)


if __name__ == "__main__":
    main()
