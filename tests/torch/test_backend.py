#!/usr/bin/env python3
"""The torch.distributed backend "ringtree" against exact references and gloo.

    test_backend.py BUILD/python --ranks 2|3 [--only NAME]
    [RINGTREE_TORCH_TRANSPORT=mpi] mpirun -np 2 test_backend.py BUILD/python   (cluster_transport; mpi: MPI only)

Spawns the ranks once (mp.spawn) and runs every check in them; a failed
check raises in its rank, and mp.spawn then fails the run with its message.
Exits 77 (meson's skip) where torch cannot be imported.
"""
import argparse
import datetime
import os
import sys
import time
import traceback

from common import backend_of, end_group, free_port  # (tests/torch/common.py)

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torch is not importable with {sys.executable}: {e}")
    sys.exit(77)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
          torch.int32, torch.int64, torch.bool]
OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "product": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}
SIZES = [0, 1, 2, 5, 1000, 70001]  # 0, 1, fewer than ranks, not divisible, large


def values(rank, count, dtype, salt=0):
    """Rank's input: small integers (exact in every type and in any order of summation)."""
    i = torch.arange(count, dtype=torch.int64)
    v = (i * 7 + rank * 3 + salt) % 5 - 2  # -2..2
    if dtype == torch.bool:
        return (v > 0)
    if dtype == torch.uint8:
        v = v + 2
    return v.to(dtype)


def reference(inputs, op, dtype):
    """The reduction over the ranks' inputs, computed in int64/float64 and cast back."""
    if dtype == torch.bool:
        x = torch.stack([t.to(torch.int64) for t in inputs])
        r = {"sum": x.max(0).values, "max": x.max(0).values, "product": x.min(0).values, "min": x.min(0).values}[op]
        return r.to(torch.bool)
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    x = torch.stack([t.to(wide) for t in inputs])
    n = len(inputs)
    if op == "sum":
        r = x.sum(0)
    elif op == "product":
        r = x.prod(0)
    elif op == "min":
        r = x.min(0).values
    elif op == "max":
        r = x.max(0).values
    else:
        r = x.sum(0) / n if dtype.is_floating_point else torch.div(x.sum(0), n, rounding_mode="trunc")
    return r.to(dtype)


def same(got, want, what, exact=True):
    if got.dtype != want.dtype or got.shape != want.shape:
        raise AssertionError(f"{what}: got {got.dtype} {tuple(got.shape)}, want {want.dtype} {tuple(want.shape)}")
    if exact or not got.dtype.is_floating_point:
        ok = torch.equal(got, want)
    else:
        ok = torch.allclose(got.to(torch.float64), want.to(torch.float64), rtol=1e-2, atol=1e-2)
    if not ok:
        bad = (got != want).nonzero()
        i = tuple(bad[0].tolist()) if len(bad) else ()
        raise AssertionError(f"{what}: first difference at {i}: got {got[i] if i else got} want {want[i] if i else want}")


def gloo_agrees(gloo, fn, ringtree_result, what):
    """The same call on gloo gives bitwise the same result (where gloo has the call and type)."""
    try:
        g = fn(gloo)
    except RuntimeError as e:
        if "does not support" in str(e) or "Unsupported" in str(e) or "Invalid" in str(e) or "not supported" in str(e):
            return False
        raise
    same(ringtree_result, g, what + " (vs gloo)")
    return True


def splits_cpu_groups(gloo):
    """Whether dist.split_group splits a CPU group on this torch: tried on gloo's."""
    try:
        dist.split_group(parent_pg=gloo, split_ranks=[list(range(dist.get_world_size()))])
        return True
    except RuntimeError as e:
        if "split" not in str(e):
            raise
        return False


# ---------------------------------------------------------------- checks

def check_collectives(rank, n, gloo):
    compared = 0
    for dtype in DTYPES:
        ops = ["sum", "product", "min", "max"] + ([] if dtype == torch.bool else ["avg"])
        for count in SIZES:
            ins = [values(r, count, dtype) for r in range(n)]
            for op in ops:
                what = f"all_reduce {op} {dtype} x{count}"
                t = ins[rank].clone()
                dist.all_reduce(t, op=OPS[op])
                same(t, reference(ins, op, dtype), what, exact=(op != "avg"))
                if op != "avg":
                    def on(g, x=ins[rank], o=OPS[op]):
                        y = x.clone()
                        dist.all_reduce(y, op=o, group=g)
                        return y
                    compared += gloo_agrees(gloo, on, t, what)
                for root in sorted({0, n - 1}):
                    t = ins[rank].clone()
                    dist.reduce(t, root, op=OPS[op])
                    if rank == root:
                        same(t, reference(ins, op, dtype), f"reduce {op} root {root} {dtype} x{count}", exact=(op != "avg"))
            # broadcast, all_gather, gather, scatter, reduce_scatter, all_to_all
            for root in sorted({0, n - 1}):
                t = ins[rank].clone()
                dist.broadcast(t, root)
                same(t, ins[root], f"broadcast root {root} {dtype} x{count}")
                outs = [torch.empty(count, dtype=dtype) for _ in range(n)] if rank == root else None
                dist.gather(ins[rank], outs, dst=root)
                if rank == root:
                    for r in range(n):
                        same(outs[r], ins[r], f"gather root {root} {dtype} x{count} block {r}")
                blocks = [values(root, count, dtype, salt=j) for j in range(n)]
                t = torch.empty(count, dtype=dtype)
                dist.scatter(t, blocks if rank == root else None, src=root)
                same(t, blocks[rank], f"scatter root {root} {dtype} x{count}")
            outs = [torch.empty(count, dtype=dtype) for _ in range(n)]
            dist.all_gather(outs, ins[rank])
            for r in range(n):
                same(outs[r], ins[r], f"all_gather {dtype} x{count} block {r}")
            flat = torch.empty(count * n, dtype=dtype)
            dist.all_gather_into_tensor(flat, ins[rank])
            same(flat, torch.cat(ins), f"all_gather_into_tensor {dtype} x{count}")
            if dtype != torch.bool:
                parts = [values(rank, count, dtype, salt=j) for j in range(n)]
                t = torch.empty(count, dtype=dtype)
                dist.reduce_scatter(t, parts)
                same(t, reference([values(r, count, dtype, salt=rank) for r in range(n)], "sum", dtype),
                     f"reduce_scatter {dtype} x{count}")
                t2 = torch.empty(count, dtype=dtype)
                dist.reduce_scatter_tensor(t2, torch.cat(parts))
                same(t2, t, f"reduce_scatter_tensor {dtype} x{count}")
            # all_to_all_single with equal blocks, then all_to_all with lists
            src = torch.cat([values(rank, count, dtype, salt=j) for j in range(n)])
            dst = torch.empty(count * n, dtype=dtype)
            dist.all_to_all_single(dst, src)
            same(dst, torch.cat([values(r, count, dtype, salt=rank) for r in range(n)]), f"all_to_all_single {dtype} x{count}")
            if count <= 1000:
                sends = [values(rank, count + j, dtype, salt=j) for j in range(n)]  # rank j gets count + j elements
                recvs = [torch.empty(count + rank, dtype=dtype) for _ in range(n)]
                dist.all_to_all(recvs, sends)
                for r in range(n):
                    same(recvs[r], values(r, count + rank, dtype, salt=rank), f"all_to_all {dtype} x{count} from {r}")
    # all_to_all_single with split sizes (rows of a 2-D tensor)
    # (every rank sends j + 1 rows to rank j, so it receives rank + 1 rows from each)
    src = torch.cat([torch.full((j + 1, 3), float(100 * rank + j)) for j in range(n)])
    dst = torch.empty((rank + 1) * n, 3)
    dist.all_to_all_single(dst, src, output_split_sizes=[rank + 1] * n, input_split_sizes=[j + 1 for j in range(n)])
    want = torch.cat([torch.full((rank + 1, 3), float(100 * r + rank)) for r in range(n)])
    same(dst, want, "all_to_all_single with split sizes")
    # all_reduce_coalesced (what DDP's older paths and users call)
    ts = [values(rank, c, torch.float32) for c in (3, 0, 17)]
    dist.all_reduce_coalesced(ts)
    for c, t in zip((3, 0, 17), ts):
        same(t, reference([values(r, c, torch.float32) for r in range(n)], "sum", torch.float32), f"all_reduce_coalesced x{c}")
    # non-contiguous tensors: a transposed view and a strided slice
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) + rank
    view = base.t()
    dist.all_reduce(view)
    same(base, (torch.arange(24, dtype=torch.float32).reshape(4, 6) * n + sum(range(n))), "all_reduce of a transposed view")
    base = torch.zeros(10)
    base[::2] = rank + 1
    dist.all_reduce(base[::2])
    same(base, torch.tensor([n * (n + 1) / 2, 0] * 5), "all_reduce of a strided slice (odd elements untouched)")
    dist.barrier()
    if compared == 0:
        raise AssertionError("gloo agreed with none of the calls: the comparison did not run")
    return f"collectives: every dtype x op x size, {compared} all_reduce results also bitwise equal to gloo's"


def check_async(rank, n, gloo):
    t = torch.ones(1 << 20) * (rank + 1)
    u = torch.ones(16) * (rank + 1)
    w1 = dist.all_reduce(t, async_op=True)
    w2 = dist.all_reduce(u, op=dist.ReduceOp.MAX, async_op=True)
    busy = sum(i * i for i in range(20000))  # Python work while the calls run
    w2.wait()
    w1.wait()
    want = n * (n + 1) / 2
    if not (torch.all(t == want) and torch.all(u == n)) or busy < 0:
        raise AssertionError("async all_reduce results are wrong")
    fut = dist.all_reduce(torch.ones(8) * rank, async_op=True).get_future()
    res = fut.wait()
    same(res[0], torch.ones(8) * sum(range(n)), "get_future().wait() of an all_reduce")
    # completion from the progress thread: nobody waits, the future still completes
    w = dist.all_reduce(torch.ones(4), async_op=True)
    deadline = time.time() + 30
    while not w.is_completed():
        if time.time() > deadline:
            raise AssertionError("an async all_reduce nobody waited on did not complete in 30 s")
        time.sleep(0.001)
    # point to point: a ring exchange with isend/irecv, then blocking send/recv
    right, left = (rank + 1) % n, (rank - 1) % n
    out = torch.full((300000,), float(rank))
    got = torch.empty(300000)
    reqs = [dist.isend(out, right, tag=5), dist.irecv(got, left, tag=5)]
    for r in reqs:
        r.wait()
    same(got, torch.full((300000,), float(left)), "isend/irecv ring exchange")
    if rank == 0:
        dist.send(torch.arange(10, dtype=torch.int64), 1)
    elif rank == 1:
        x = torch.empty(10, dtype=torch.int64)
        dist.recv(x, 0)
        same(x, torch.arange(10, dtype=torch.int64), "send/recv")
    dist.barrier()
    return "async: overlapped all_reduces, futures, unwaited completion, isend/irecv ring, send/recv"


def check_tensor_forms(rank, n, gloo):
    """The single-tensor and coalesced forms of torch 2.x (all_gather_into_tensor,
    reduce_scatter_tensor, their _coalescing_manager batches), against references."""
    count = 7
    outs = [torch.empty(count * n), torch.empty(n, 3, dtype=torch.int32)]
    ins = [values(rank, count, torch.float32), values(rank, 3, torch.int32).clone()]
    # (one type per batch, as gloo requires too)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_gather_into_tensor(outs[0], ins[0])
    cm.wait()
    same(outs[0], torch.cat([values(r, count, torch.float32) for r in range(n)]), "all_gather_into_tensor (coalesced)")
    big = [torch.empty(5 * n), torch.empty(2 * n)]
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_gather_into_tensor(big[0], values(rank, 5, torch.float32, salt=1))
        dist.all_gather_into_tensor(big[1], values(rank, 2, torch.float32, salt=2))
    cm.wait()
    same(big[0], torch.cat([values(r, 5, torch.float32, salt=1) for r in range(n)]), "coalesced all_gather_into_tensor, first")
    same(big[1], torch.cat([values(r, 2, torch.float32, salt=2) for r in range(n)]), "coalesced all_gather_into_tensor, second")
    dist.all_gather_into_tensor(outs[1], ins[1])
    same(outs[1], torch.stack([values(r, 3, torch.int32) for r in range(n)]), "all_gather_into_tensor into a 2-D tensor")
    for op in ("sum", "max", "avg"):
        full = [values(rank, 4 * n, torch.float64, salt=3), values(rank, 3 * n, torch.float64, salt=4)]
        mine = [torch.empty(4, dtype=torch.float64), torch.empty(3, dtype=torch.float64)]
        with dist._coalescing_manager(async_ops=True) as cm:
            for o, i in zip(mine, full):
                dist.reduce_scatter_tensor(o, i, op=OPS[op])
        cm.wait()
        for o, c, salt in zip(mine, (4, 3), (3, 4)):
            want = reference([values(r, c * n, torch.float64, salt=salt) for r in range(n)], op, torch.float64)
            same(o, want[rank * c:(rank + 1) * c], f"coalesced reduce_scatter_tensor {op} x{c}", exact=(op != "avg"))
    t = torch.empty(5)
    dist.reduce_scatter_tensor(t, values(rank, 5 * n, torch.float32, salt=5))
    same(t, reference([values(r, 5 * n, torch.float32, salt=5) for r in range(n)], "sum", torch.float32)[rank * 5:rank * 5 + 5],
         "reduce_scatter_tensor")
    # what torch checks ranks by: the group's sequence number, alike on every rank
    backend = backend_of(None)
    seq = torch.tensor([backend._get_sequence_number_for_group()])
    seqs = [torch.zeros(1, dtype=torch.int64) for _ in range(n)]
    dist.all_gather(seqs, seq, group=gloo)
    if any(int(x) != int(seq) for x in seqs) or int(seq) == 0:
        raise AssertionError(f"sequence numbers differ or did not count: {[int(x) for x in seqs]}")
    return f"tensor forms: all_gather_into_tensor, reduce_scatter_tensor and their coalesced batches; sequence number {int(seq)} on every rank"


def check_subgroups(rank, n, gloo):
    members = list(range(0, n, 2)) if n > 2 else [0, 1]
    sub = dist.new_group(members)  # every rank calls new_group, members or not
    odd = dist.new_group([r for r in range(n) if r not in members]) if n > 2 else None
    if rank in members:
        t = torch.ones(5) * (rank + 1)
        dist.all_reduce(t, group=sub)
        same(t, torch.ones(5) * sum(r + 1 for r in members), f"all_reduce on subgroup {members}")
        b = torch.full((3,), float(rank))
        dist.broadcast(b, members[-1], group=sub)
        same(b, torch.full((3,), float(members[-1])), "broadcast on a subgroup (global root rank)")
    elif odd is not None:
        t = torch.ones(2)
        dist.all_reduce(t, group=odd)
        same(t, torch.ones(2) * (n - len(members)), "all_reduce on the other subgroup")
    # dist.split_group: the parent's ranks in two halves, the second in reverse
    # order (a group's rank follows the order given); where this torch
    # splits gloo's CPU groups (2.8 on: 2.6 splits only a group bound to a GPU)
    low, high = list(range((n + 1) // 2 - 1, -1, -1)), list(range(n - 1, (n + 1) // 2 - 1, -1))
    if not splits_cpu_groups(gloo):
        dist.barrier()
        return f"subgroups: new_group {members} and the rest (this torch splits no CPU group, gloo's neither)"
    half = dist.split_group(split_ranks=[low, high])
    mine = low if rank in low else high
    if type(backend_of(half)).__name__ != "ProcessGroupRingtree":
        raise AssertionError(f"split_group made a {type(backend_of(half)).__name__}, not ringtree's backend")
    if dist.get_rank(half) != mine.index(rank) or dist.get_world_size(half) != len(mine):
        raise AssertionError(f"split_group: rank {dist.get_rank(half)} of {dist.get_world_size(half)}, want {mine.index(rank)} of {len(mine)}")
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, group=half)
    same(t, torch.tensor([float(sum(r + 1 for r in mine))]), f"all_reduce on split group {mine}")
    g = torch.empty(len(mine))
    dist.all_gather_into_tensor(g, torch.tensor([float(rank)]), group=half)
    same(g, torch.tensor([float(r) for r in mine]), f"all_gather on split group {mine} (in the order given)")
    dist.barrier()
    return f"subgroups: new_group {members} and the rest; split_group {low} and {high}"


def check_errors(rank, n, gloo):
    # complex tensors travel as their real pairs (torch's view_as_real)
    z = torch.complex(torch.ones(4) * rank, torch.ones(4))
    dist.all_reduce(z)
    same(z, torch.complex(torch.ones(4) * sum(range(n)), torch.ones(4) * n), "all_reduce of complex64")
    # a type ringtree does not carry: raised on every rank, before anything moves
    # (torch itself refuses quantized tensors before any backend sees them;
    # sparse ones are summed: check_gloo_extras)
    for bad, words in [(torch.ones(4, dtype=torch.uint32), "not supported")]:
        try:
            dist.all_reduce(bad)
            raise AssertionError(f"all_reduce of {bad.dtype} {bad.layout} did not raise")
        except RuntimeError as e:
            if words not in str(e) or "ringtree" not in str(e):
                raise AssertionError(f"{bad.dtype} {bad.layout}: unclear error: {e}")
    try:
        dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND)
        raise AssertionError("all_reduce with BAND did not raise")
    except (RuntimeError, ValueError) as e:
        if "not supported" not in str(e) and "BAND" not in str(e):
            raise AssertionError(f"BAND: unclear error: {e}")
    # shapes that differ across ranks: every rank raises, naming the ranks
    try:
        dist.all_reduce(torch.ones(10 + rank))
        raise AssertionError("all_reduce of different sizes on the ranks did not raise")
    except RuntimeError as e:
        if "differ" not in str(e) or "count" not in str(e):
            raise AssertionError(f"mismatched shapes: unclear error: {e}")
    # the group still works afterwards
    t = torch.ones(3)
    dist.all_reduce(t)
    same(t, torch.ones(3) * n, "all_reduce after the errors")
    return "errors: unsupported dtype and op, mismatched shapes raise on every rank; the group goes on"


def check_gloo_extras(rank, n, gloo):
    """The Backend functions of torch 2.x that gloo has beyond the collectives:
    sparse all_reduce (against gloo, bitwise) and monitored_barrier (its
    verdicts and gloo's words)."""
    for dtype in (torch.float32, torch.float64, torch.int64):
        # overlapping entries: every rank has (0, 0) and its own (rank, 1 + rank)
        idx = torch.tensor([[0, rank, 1], [0, 1 + rank, 2]])
        val = torch.tensor([1.5 + rank, 2.25 * rank, -1.0]).to(dtype)
        mk = lambda: torch.sparse_coo_tensor(idx, val, (n + 1, n + 2))  # noqa: E731
        ours, theirs = mk(), mk()
        dist.all_reduce(ours)
        dist.all_reduce(theirs, group=gloo)
        want = sum(torch.sparse_coo_tensor(torch.tensor([[0, r, 1], [0, 1 + r, 2]]),
                                           torch.tensor([1.5 + r, 2.25 * r, -1.0]).to(dtype), (n + 1, n + 2)).to_dense()
                   for r in range(n))
        same(ours.to_dense(), want, f"sparse all_reduce {dtype}")
        same(ours.to_dense(), theirs.to_dense(), f"sparse all_reduce {dtype} (vs gloo)")
        if not ours.is_sparse:
            raise AssertionError("sparse all_reduce: the result is no longer sparse")
    try:
        dist.all_reduce(torch.ones(3).to_sparse(), op=dist.ReduceOp.MAX)
        raise AssertionError("sparse all_reduce with MAX did not raise")
    except RuntimeError as e:
        if "SUM" not in str(e):
            raise AssertionError(f"sparse MAX: unclear error: {e}")
    # every rank comes: passes (twice, and waiting for all)
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))
    except ValueError as e:  # (before 2.15 torch's Python gives it to gloo alone: every rank raises before any message)
        if "only implemented for GLOO" not in str(e):
            raise
        return f"gloo's extras: sparse all_reduce (bitwise as gloo); monitored_barrier: torch {torch.__version__} allows it on gloo only"
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30), wait_all_ranks=True)
    # the last rank stays away (on a group of its own, so that the others'
    # count of monitored barriers goes on alike)
    g = dist.new_group(backend="ringtree")
    late = n - 1
    if rank != late:
        try:
            dist.monitored_barrier(group=g, timeout=datetime.timedelta(seconds=1), wait_all_ranks=(rank == 0 and n > 2))
            raise AssertionError("monitored_barrier with a rank missing did not raise")
        except RuntimeError as e:
            want = f"Rank {late} failed to pass monitoredBarrier" if rank == 0 else \
                f"Rank {rank} successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0"
            if want not in str(e):
                raise AssertionError(f"monitored_barrier on rank {rank}: want '{want}', got: {e}")
    dist.barrier(group=gloo)
    return "gloo's extras: sparse all_reduce (bitwise as gloo), monitored_barrier passing and naming the missing rank"


class Net(nn.Module):
    def __init__(self, unused):
        super().__init__()
        self.a = nn.Linear(10, 10)
        self.b = nn.Linear(10, 5)
        if unused:
            self.unused = nn.Linear(5, 5)  # never in the graph: find_unused_parameters

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def train(rank, n, group, steps=6, find_unused=False, no_sync_every=0, hook=None):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = Net(unused=find_unused)
    ddp = DDP(model, process_group=group, find_unused_parameters=find_unused)
    if hook is not None:
        ddp.register_comm_hook(group, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1 + rank)
    for step in range(steps):
        x, y = torch.randn(8, 10, generator=g), torch.randn(8, 5, generator=g)
        opt.zero_grad()
        if no_sync_every and step % no_sync_every == 0:
            with ddp.no_sync():  # accumulate locally, synchronize on the next step
                torch.nn.functional.mse_loss(ddp(x), y).backward()
            x, y = torch.randn(8, 10, generator=g), torch.randn(8, 5, generator=g)
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def check_ddp(rank, n, gloo):
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import fp16_compress_hook
    exact = n == 2  # two summands add alike in any order; three may round differently
    done = []
    for name, kw in [("plain", {}), ("find_unused_parameters", {"find_unused": True}),
                     ("no_sync", {"no_sync_every": 2}), ("fp16_compress_hook", {"hook": fp16_compress_hook})]:
        ours = train(rank, n, None, **kw)
        theirs = train(rank, n, gloo, **kw)
        same(ours, theirs, f"DDP {name}: parameters vs gloo", exact=exact)
        done.append(name)
    return "DDP vs gloo (" + ("bitwise" if exact else "within rounding") + "): " + ", ".join(done)


def check_faults(rank, n, gloo):
    """A stalled peer, then a dead one: RuntimeError naming it within the group's timeout, never a hang."""
    last = n - 1
    quick = dist.new_group(backend="ringtree", timeout=datetime.timedelta(seconds=3))
    t0 = time.time()
    if rank == last:
        time.sleep(6)  # stalls past the others' timeout
    try:
        dist.all_reduce(torch.ones(4), group=quick)
        if rank != last:
            raise AssertionError("all_reduce with a stalled peer did not raise")
    except RuntimeError as e:
        took = time.time() - t0
        if rank != last and (f"rank {last}" not in str(e) or took > 30):
            raise AssertionError(f"stalled peer: after {took:.1f} s, an error that does not name rank {last}: {e}")
    dist.barrier(group=gloo)
    if rank == last:
        os._exit(0)  # dies without a word
    t0 = time.time()
    try:
        dist.all_reduce(torch.ones(1 << 16))
        raise AssertionError("all_reduce with a dead peer did not raise")
    except RuntimeError as e:
        took = time.time() - t0
        if f"rank {last}" not in str(e) or took > 30:
            raise AssertionError(f"dead peer: after {took:.1f} s, an error that does not name rank {last}: {e}")
    return f"faults: a stalled rank {last}, then a dead one, raise naming it"


CHECKS = {"collectives": check_collectives, "tensor_forms": check_tensor_forms, "async": check_async, "subgroups": check_subgroups,
          "errors": check_errors, "gloo_extras": check_gloo_extras, "ddp": check_ddp, "faults": check_faults}  # faults last: it ends the group


def worker(rank, n, port, only, module_dir):
    sys.path.insert(0, module_dir)
    import ringtree_torch  # noqa: F401
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("ringtree", rank=rank, world_size=n, timeout=datetime.timedelta(seconds=60))
    pg = backend_of(None)
    if not str(getattr(pg, "transport", "")).startswith(("shm", "mpi", "cluster")) or dist.get_backend() != "ringtree":
        raise AssertionError(f"the default group is not ringtree's: {pg!r}, {dist.get_backend()}")
    gloo = dist.new_group(backend="gloo")
    for name, fn in CHECKS.items():
        if (only and name != only) or (not only and name == "faults"):
            continue
        t0 = time.time()
        try:
            msg = fn(rank, n, gloo)
        except Exception:
            raise AssertionError(f"rank {rank}: check '{name}' failed:\n{traceback.format_exc()}")
        if rank == 0:
            print(f"ok {n} ranks ({pg.transport}): {msg} [{time.time() - t0:.1f} s]", flush=True)
    if only != "faults":
        end_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module_dir")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--only", default="", help="one check (faults runs only when named)")
    a = ap.parse_args()
    if "OMPI_COMM_WORLD_RANK" in os.environ:  # started by mpirun: this process is one rank
        job = os.environ.get("OMPI_MCA_ess_base_jobid", "") + os.environ.get("PMIX_NAMESPACE", "")
        port = 20000 + sum(ord(c) * 31 ** i for i, c in enumerate(job)) % 20000  # the same on every rank
        worker(int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"]), port, a.only,
               os.path.abspath(a.module_dir))
        return
    mp.spawn(worker, args=(a.ranks, free_port(), a.only, os.path.abspath(a.module_dir)), nprocs=a.ranks, join=True)


if __name__ == "__main__":
    main()
