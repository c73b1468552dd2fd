#!/usr/bin/env python3
"""torch.distributed on "ringtree" against "gloo", in one run.

    /usr/bin/python3 bench/torch_bench.py [--ranks 2] [--max-mib 256] [--rounds 5] [--steps 8]

Rows 1..: dist.all_reduce (SUM) of float32 tensors from 4 KiB to --max-mib,
each size timed on both backends in alternating rounds (a round: a batch
of calls, timed on every rank, the slowest rank's mean counts; the
median of --rounds rounds is shown). Last row: one DDP training step of
an MLP of about 25 M parameters (forward, backward with DDP's bucketed
all-reduces, SGD step), median over --steps steps after two warm-up
steps. ratio = gloo's time / ringtree's: above 1, ringtree is faster.
Each rank runs torch with one thread (as many ranks as cores).
"""
import argparse
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

here = os.path.dirname(os.path.abspath(__file__))


def timed(fn, group, iters):
    """Mean seconds per call on the slowest rank."""
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    dt = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
    dist.all_reduce(dt, op=dist.ReduceOp.MAX, group=group)
    return dt.item()


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                         nn.Linear(4096, 1024), nn.ReLU(), nn.Linear(1024, 10))


def worker(rank, n, port, a, module_dir):
    sys.path.insert(0, module_dir)
    import ringtree_torch  # noqa: F401
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "localhost", str(port)
    dist.init_process_group("ringtree", rank=rank, world_size=n)
    groups = {"gloo": dist.new_group(backend="gloo"), "ringtree": dist.new_group(backend="ringtree")}
    say = (lambda *x: print(*x, flush=True)) if rank == 0 else (lambda *x: None)
    say(f"# torch {torch.__version__}, {n} ranks on one host, ringtree transport "
        f"{groups['ringtree'].transport}; times: median of {a.rounds} rounds, slowest rank")
    say(f"# {'what':>28} {'gloo(us)':>12} {'ringtree(us)':>12} {'ratio':>7}")
    size = 4096
    while size <= a.max_mib << 20:
        t = torch.ones(size // 4)
        iters = max(2, min(200, (8 << 20) // size))
        times = {b: [] for b in groups}
        for b, g in groups.items():  # warm-up: connections, pages, automatic's choices
            timed(lambda: dist.all_reduce(t, group=g), g, 2)
        for _ in range(a.rounds):
            for b, g in groups.items():
                times[b].append(timed(lambda: dist.all_reduce(t, group=g), g, iters))
        gl, rt = statistics.median(times["gloo"]) * 1e6, statistics.median(times["ringtree"]) * 1e6
        label = f"all_reduce {size >> 10} KiB" if size < 1 << 20 else f"all_reduce {size >> 20} MiB"
        say(f"  {label:>28} {gl:12.1f} {rt:12.1f} {gl / rt:7.2f}")
        size *= 4
    # DDP: one training step of the MLP
    from torch.nn.parallel import DistributedDataParallel as DDP
    params = sum(p.numel() for p in mlp().parameters())
    step_times = {}
    for b, g in groups.items():
        model = mlp()
        ddp = DDP(model, process_group=g)
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        x, y = torch.randn(32, 1024), torch.randint(0, 10, (32,))

        def step():
            opt.zero_grad()
            nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
        timed(step, g, 2)
        step_times[b] = statistics.median(timed(step, g, 1) for _ in range(a.steps))
    gl, rt = step_times["gloo"] * 1e6, step_times["ringtree"] * 1e6
    say(f"  {'DDP step, ' + str(round(params / 1e6, 1)) + ' M params':>28} {gl:12.1f} {rt:12.1f} {gl / rt:7.2f}"
        f"   (ringtree/gloo = {rt / gl:.2f})")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--max-mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--module-dir", default=os.environ.get("RINGTREE_TORCH_PATH", os.path.join(here, "..", "build", "python")))
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(a.ranks, port, a, os.path.abspath(a.module_dir)), nprocs=a.ranks, join=True)


if __name__ == "__main__":
    main()
