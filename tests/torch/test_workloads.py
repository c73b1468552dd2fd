#!/usr/bin/env python3
"""What PyTorch 2.x users run, on "ringtree" and on "gloo", compared.

    test_workloads.py BUILD/python [--only CASE[,CASE]] [--keep DIR] [--strict]

Each case is one program run twice, in fresh processes (mp.spawn), once
per backend; every rank saves what it computed (or the error it raised:
a case that gloo cannot run on this torch is skipped, saying why), and
the two runs must agree: bitwise where both reduce in the same order, which is every case
here (two summands add alike in any order; the 4-rank cases reduce over
2-rank mesh dimensions), else within the tolerance the case states.

  ddp_hooks    2 ranks: DDP with the fp16 and bf16 compression comm hooks
  fsdp2        2 ranks: FSDP2 fully_shard of a small transformer, 3 Adam steps
  functional   2 ranks: torch.distributed._functional_collectives, eager
               and under torch.compile
  dtensor      2 ranks: DTensor redistribute (Shard, Replicate, Partial)
  mesh         4 ranks: a 2-D DeviceMesh ("dp", "tp") on the CPU, its
               dimensions' groups, and DTensor across it
  mixed        2 ranks: init_process_group("cpu:ringtree,cuda:gloo"): CPU
               tensors go to ringtree (and split_group of it)

For ringtree, each case also checks that ringtree ran it: every group the
case used has ringtree's backend behind its CPU tensors.
"""
import argparse
import datetime
import os
import shutil
import sys
import tempfile
import time

from common import backend_of, end_group, free_port  # (tests/torch/common.py)

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torch is not importable with {sys.executable}: {e}")
    sys.exit(77)


def ringtree_behind(group, backend):
    """Raises unless ringtree's backend serves `group`'s CPU tensors (in a ringtree run)."""
    if backend == "gloo":
        return
    got = type(backend_of(group)).__name__
    if got != "ProcessGroupRingtree":
        raise AssertionError(f"a group of the case runs on {got}, not on ringtree")


def params_of(model):
    return torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1, self.relu, self.net2 = nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def case_ddp_hooks(rank, n, backend):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
    out = {}
    for name, hook in [("none", None), ("fp16", default_hooks.fp16_compress_hook), ("bf16", default_hooks.bf16_compress_hook)]:
        torch.manual_seed(0)
        model = ToyModel()
        ddp = DDP(model)
        if hook is not None:
            ddp.register_comm_hook(dist.group.WORLD, hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(10 + rank)
        for _ in range(5):
            opt.zero_grad()
            nn.functional.mse_loss(ddp(torch.randn(16, 10, generator=g)), torch.randn(16, 5, generator=g)).backward()
            opt.step()
        out[name] = params_of(model)
    ringtree_behind(None, backend)
    return out


def case_fsdp2(rank, n, backend):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (n,))
    torch.manual_seed(0)
    layers = [nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
              for _ in range(2)]
    model = nn.Sequential(*layers, nn.Linear(32, 8))
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(20 + rank)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(torch.randn(4, 6, 32, generator=g)), torch.randn(4, 6, 8, generator=g))
        loss.backward()
        opt.step()
        losses.append(loss.detach().reshape(1))
    full = torch.cat([p.full_tensor().reshape(-1) for p in model.parameters()])
    ringtree_behind(mesh.get_group(), backend)
    return {"params": full, "losses": torch.cat(losses)}


def case_functional(rank, n, backend):
    import torch.distributed._functional_collectives as funcol
    # (2.15 renamed the tensor forms *_single; 2.6 has only the old names)
    gather = getattr(funcol, "all_gather_single", funcol.all_gather_tensor)
    scatter = getattr(funcol, "reduce_scatter_single", funcol.reduce_scatter_tensor)
    group = dist.group.WORLD
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3) * (rank + 1) + 0.25
    out = {
        "all_reduce": funcol.all_reduce(x, "sum", group),
        "all_reduce_max": funcol.all_reduce(x, "max", group),
        "all_gather": gather(x, 0, group),
        "reduce_scatter": scatter(x, "sum", 0, group),
        "all_to_all": funcol.all_to_all_single(x, None, None, group),
        "broadcast": funcol.broadcast(x, 1, group),
    }
    out = {k: funcol.wait_tensor(v).clone() for k, v in out.items()}

    # the same under torch.compile (inductor on the CPU): collectives
    # traced into the graph, run through the backend
    def step(t):
        s = funcol.all_reduce(t * 2, "sum", group)
        g = gather(s + 1, 0, group)
        return scatter(g.sin(), "sum", 0, group)

    compiled = torch.compile(step, fullgraph=True)
    out["compiled"] = compiled(x).clone()
    out["compiled_again"] = compiled(x + 1).clone()
    out["eager_of_compiled"] = funcol.wait_tensor(step(x)).clone()
    ringtree_behind(group, backend)
    return out


def _dtensor_cases(mesh, rank, prefix):
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    torch.manual_seed(1)
    full = torch.randn(8, 6)  # the same on every rank
    nd = mesh.ndim
    out = {}
    x = distribute_tensor(full, mesh, [Shard(0)] * nd)
    out[prefix + "shard0_to_replicate"] = x.redistribute(mesh, [Replicate()] * nd).to_local()
    out[prefix + "shard0_to_shard1"] = x.redistribute(mesh, [Shard(1)] * nd).to_local()
    local = torch.randn(8, 6, generator=torch.Generator().manual_seed(30 + rank))
    p = DTensor.from_local(local, mesh, [Partial()] * nd)
    out[prefix + "partial_to_replicate"] = p.redistribute(mesh, [Replicate()] * nd).to_local()
    out[prefix + "partial_to_shard0"] = p.redistribute(mesh, [Shard(0)] * nd).to_local()
    y = distribute_tensor(full, mesh, [Shard(0)] * nd)
    out[prefix + "matmul_sum"] = (y @ distribute_tensor(full.t().contiguous(), mesh, [Replicate()] * nd)).sum().full_tensor().reshape(1)
    return out


def case_dtensor(rank, n, backend):
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (n,))
    out = _dtensor_cases(mesh, rank, "")
    ringtree_behind(mesh.get_group(), backend)
    return out


def case_mesh(rank, n, backend):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (2, n // 2), mesh_dim_names=("dp", "tp"))
    out = {}
    for dim in ("dp", "tp"):
        group = mesh[dim].get_group()
        ringtree_behind(group, backend)
        t = torch.arange(5, dtype=torch.float32) * (rank + 1) + 0.5
        dist.all_reduce(t, group=group)
        out[f"{dim}_all_reduce"] = t
        g = torch.empty(5 * dist.get_world_size(group))
        dist.all_gather_into_tensor(g, torch.arange(5, dtype=torch.float32) + rank, group=group)
        out[f"{dim}_all_gather"] = g
        out[f"{dim}_coordinate"] = torch.tensor(mesh.get_coordinate())
    out.update(_dtensor_cases(mesh, rank, "2d_"))
    torch.manual_seed(2)
    full = torch.randn(4, 8)
    x = distribute_tensor(full, mesh, [Shard(0), Shard(1)])
    out["2d_shard_to_mixed"] = x.redistribute(mesh, [Replicate(), Shard(0)]).to_local()
    return out


def case_mixed(rank, n, backend):
    # (the test's init made the default group from "cpu:BACKEND,cuda:gloo")
    cuda = type(dist.group.WORLD._get_backend(torch.device("cuda"))).__name__
    if cuda != "ProcessGroupGloo":
        raise AssertionError(f"cuda tensors go to {cuda}, not gloo")
    t = torch.arange(6, dtype=torch.float64) + rank
    dist.all_reduce(t)
    ringtree_behind(None, backend)
    out = {"all_reduce": t}
    try:  # (torch 2.6 splits only a group bound to a GPU, for gloo too; 2.8 on split CPU groups)
        pair = dist.split_group(split_ranks=[list(range(n))[::-1]])
    except RuntimeError as e:
        if "split" not in str(e):
            raise
        return out
    u = torch.tensor([float(rank)])
    dist.broadcast(u, group_src=0, group=pair)
    ringtree_behind(pair, backend)
    out["split_broadcast"] = u
    return out


CASES = {"ddp_hooks": (case_ddp_hooks, 2), "fsdp2": (case_fsdp2, 2), "functional": (case_functional, 2),
         "dtensor": (case_dtensor, 2), "mesh": (case_mesh, 4), "mixed": (case_mixed, 2)}


def worker(rank, n, port, backend, names, module_dir, outdir):
    sys.path.insert(0, module_dir)
    if backend == "ringtree":
        import ringtree_torch  # noqa: F401
    os.environ.update(MASTER_ADDR="localhost", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    spec = f"cpu:{backend},cuda:gloo" if names == ["mixed"] else backend
    dist.init_process_group(spec, rank=rank, world_size=n, timeout=datetime.timedelta(seconds=120))
    for name in names:
        try:
            got = CASES[name][0](rank, n, backend)
        except Exception as e:  # (compared below: gloo failing it too means this torch cannot run it)
            got = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
        torch.save(got, os.path.join(outdir, f"{backend}-{name}-{rank}.pt"))
    dist.barrier()
    end_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module_dir")
    ap.add_argument("--only", default="", help="cases, comma-separated (default: all)")
    ap.add_argument("--keep", default="", help="keep each rank's results in this directory")
    ap.add_argument("--strict", action="store_true", help="a case that gloo cannot run fails the test (the pinned torch runs all)")
    a = ap.parse_args()
    names = [x for x in a.only.split(",") if x] or list(CASES)
    for x in names:
        if x not in CASES:
            sys.exit(f"unknown case {x}: one of {', '.join(CASES)}")
    outdir = a.keep or tempfile.mkdtemp(prefix="ringtree-workloads-")
    os.makedirs(outdir, exist_ok=True)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(outdir, "inductor"))  # never the user's /tmp/torchinductor_*
    fails = []
    try:
        # one world per rank count and backend (the mixed spec in its own)
        worlds = {}
        for x in names:
            worlds.setdefault((CASES[x][1], x == "mixed"), []).append(x)
        for (n, _), group in worlds.items():
            for backend in ("gloo", "ringtree"):
                t0 = time.time()
                mp.spawn(worker, args=(n, free_port(), backend, group, os.path.abspath(a.module_dir), outdir), nprocs=n)
                print(f"ran {', '.join(group)} on {backend}, {n} ranks, in {time.time() - t0:.1f} s", flush=True)
            for x in group:
                worst = 0.0
                results = [[torch.load(os.path.join(outdir, f"{b}-{x}-{r}.pt")) for r in range(n)] for b in ("gloo", "ringtree")]
                gloo_error = next((g["error"] for g in results[0] if "error" in g), None)
                if gloo_error:
                    print(f"skip {x}: gloo fails it too on torch {torch.__version__} ({gloo_error})", flush=True)
                    if a.strict:
                        fails.append(f"{x}: gloo could not run it (--strict)")
                    continue
                for r in range(n):
                    g, o = results[0][r], results[1][r]
                    if "error" in o:
                        fails.append(f"{x}: rank {r} raised on ringtree: {o['error']}")
                        continue
                    if sorted(g) != sorted(o):
                        fails.append(f"{x}: rank {r} computed {sorted(o)} on ringtree, {sorted(g)} on gloo")
                        continue
                    for k in g:
                        if g[k].dtype != o[k].dtype or g[k].shape != o[k].shape or not torch.equal(g[k], o[k]):
                            d = (g[k].double() - o[k].double()).abs().max().item() if g[k].shape == o[k].shape else float("inf")
                            worst = max(worst, d)
                            fails.append(f"{x}: rank {r}, {k}: ringtree differs from gloo (largest difference {d:g})")
                if worst == 0.0:
                    print(f"ok {x}: every rank's {len(g)} results bitwise equal to gloo's", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(outdir, ignore_errors=True)
    if fails:
        sys.exit("FAILED:\n" + "\n".join(fails))


if __name__ == "__main__":
    main()
