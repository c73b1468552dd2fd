#!/usr/bin/env python3
"""torch.distributed on "ringtree" against "gloo", in one run.

    build/torch-venv/bin/python bench/torch_bench.py [--ranks 2] [--max-mib 256] [--rounds 5] [--steps 3] [--batches 1,8,32]
                                                     [--calls all_reduce,all_gather_into_tensor,reduce_scatter_tensor]

Rows 1..: dist.all_reduce (SUM), all_gather_into_tensor and
reduce_scatter_tensor of float32 tensors from 4 KiB to --max-mib,
each size timed on both backends in alternating rounds (a round: a batch
of calls, timed on every rank, the slowest rank's mean counts; the
median of --rounds rounds is shown). Then DDP training steps of an MLP
of about 25 M parameters (forward, backward with DDP's bucketed
all-reduces, SGD step) at each per-rank batch size, timed the same way,
next to the floor: the same step with a comm hook that sends nothing.
ratio = gloo's time / ringtree's: above 1, ringtree is faster.
Each rank runs torch with one thread (as many ranks as cores).

Under torchrun (or any launcher that sets RANK, WORLD_SIZE, MASTER_ADDR
and MASTER_PORT) it runs as the launched worker instead of spawning
--ranks of its own: that is how bench/hosts_torch_bench.sh measures it
across emulated hosts, where the ringtree group runs net_cluster.
"""
import argparse
import gc
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
    if port is not None:  # spawned here; under a launcher, its variables say where to meet
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "localhost", str(port)
    dist.init_process_group("ringtree", rank=rank, world_size=n)
    groups = {"gloo": dist.new_group(backend="gloo"), "ringtree": dist.new_group(backend="ringtree")}
    say = (lambda *x: print(*x, flush=True)) if rank == 0 else (lambda *x: None)
    transport = groups["ringtree"]._get_backend(torch.device("cpu")).transport
    say(f"# torch {torch.__version__}, {n} ranks, ringtree transport "
        f"{transport}; times: median of {a.rounds} rounds, slowest rank")
    say(f"# {'what':>36} {'gloo(us)':>12} {'ringtree(us)':>12} {'ratio':>7}")
    # size: the larger buffer (all_gather's output, reduce_scatter's input),
    # as nccl-tests counts
    calls = {"all_reduce": lambda t, out, g: dist.all_reduce(t, group=g),
             "all_gather_into_tensor": lambda t, out, g: dist.all_gather_into_tensor(out, t[:t.numel() // n], group=g),
             "reduce_scatter_tensor": lambda t, out, g: dist.reduce_scatter_tensor(out[:t.numel() // n], t, group=g)}
    for name in a.calls:
        call = calls[name]
        size = 4096
        while size <= a.max_mib << 20:
            t, out = torch.ones(size // 4), torch.empty(size // 4)
            iters = max(2, min(200, (8 << 20) // size))
            times = {b: [] for b in groups}
            for b, g in groups.items():  # warm-up: connections, pages, automatic's choices
                timed(lambda: call(t, out, g), g, 2)
            for _ in range(a.rounds):
                for b, g in groups.items():
                    times[b].append(timed(lambda: call(t, out, g), g, iters))
            gl, rt = statistics.median(times["gloo"]) * 1e6, statistics.median(times["ringtree"]) * 1e6
            label = f"{name} {size >> 10} KiB" if size < 1 << 20 else f"{name} {size >> 20} MiB"
            say(f"  {label:>36} {gl:12.1f} {rt:12.1f} {gl / rt:7.2f}")
            size *= 4
    # DDP: training steps of the MLP at each per-rank batch size; "floor" is
    # DDP with a comm hook that communicates nothing (what the step costs
    # without any all-reduce), so step - floor is the communication the
    # step could not hide.
    from torch.nn.parallel import DistributedDataParallel as DDP

    def nothing(state, bucket):
        f = torch.futures.Future()
        f.set_result(bucket.buffer())
        return f
    params = sum(p.numel() for p in mlp().parameters())
    say(f"# DDP step of an MLP of {params / 1e6:.1f} M parameters (SGD), per-rank batch B; median of {a.rounds} rounds of "
        f"{a.steps} steps; exposed = step - floor")
    say(f"# {'what':>28} {'gloo(ms)':>12} {'ringtree(ms)':>12} {'ratio':>7} {'rt/gloo':>8} {'floor(ms)':>10} "
        f"{'exposed gloo':>13} {'exposed rt':>11}")
    for batch in a.batches:
        x, y = torch.randn(batch, 1024), torch.randint(0, 10, (batch,))
        runs = {}
        for b in ("floor", "gloo", "ringtree"):
            ddp = DDP(mlp(), process_group=groups["gloo" if b == "floor" else b])
            if b == "floor":
                ddp.register_comm_hook(None, nothing)
            runs[b] = (ddp, torch.optim.SGD(ddp.parameters(), lr=1e-3))

        def step(ddp, opt):
            opt.zero_grad()
            nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
        times = {b: [] for b in runs}
        for b, (ddp, opt) in runs.items():  # warm-up: buckets, automatic's choices
            timed(lambda: step(ddp, opt), groups["gloo"], 2)
        for _ in range(a.rounds):  # rounds alternate the backends, so noise hits all of them
            for b, (ddp, opt) in runs.items():
                times[b].append(timed(lambda: step(ddp, opt), groups["gloo"], a.steps))
        fl, gl, rt = (statistics.median(times[b]) * 1e3 for b in ("floor", "gloo", "ringtree"))
        say(f"  {'DDP step, B=' + str(batch):>28} {gl:12.1f} {rt:12.1f} {gl / rt:7.2f} {rt / gl:8.2f} {fl:10.1f} "
            f"{gl - fl:13.1f} {rt - fl:11.1f}")
        del runs
    gc.collect()  # (DDP's cycles and gloo's works end here, not while Python shuts down)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--max-mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3, help="DDP steps per round")
    ap.add_argument("--calls", type=lambda v: v.split(","), default=["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"],
                    help="collectives of the size rows (default all_reduce,all_gather_into_tensor,reduce_scatter_tensor)")
    ap.add_argument("--batches", type=lambda v: [int(b) for b in v.split(",")], default=[1, 8, 32],
                    help="per-rank batch sizes of the DDP rows (default 1,8,32)")
    ap.add_argument("--module-dir", default=os.environ.get("RINGTREE_TORCH_PATH", os.path.join(here, "..", "build", "python")))
    a = ap.parse_args()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ:
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), None, a, os.path.abspath(a.module_dir))
        return
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(a.ranks, port, a, os.path.abspath(a.module_dir)), nprocs=a.ranks, join=True)


if __name__ == "__main__":
    main()
