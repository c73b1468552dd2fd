#!/usr/bin/env python3
"""The torch backend in corner cases: what once hung, was refused or
returned wrong numbers with exit 0.

    test_corner_cases.py BUILD/python

  p2p-beside-collective  rank 0: isend, all_reduce, wait; rank 1: recv,
                         all_reduce. Completes at once (it used to wait for
                         the group's timeout).
  uneven-all-to-all      all_to_all_single with input_split_sizes whose
                         totals differ by rank (MoE routing), against exact
                         values and gloo (checked mode used to refuse it).
  two-jobs               two 2-rank jobs given one MASTER_PORT: the second
                         job's rank 0 cannot bind, its rank 1 reaches the
                         first job's store. Started after the first job
                         formed, the stranger is refused and the first job's
                         200 all-reduces stay right; started together, no
                         process returns a wrong number with exit 0.
Exits 77 (meson's skip) where torch cannot be imported.
"""
import datetime
import os
import subprocess
import sys
import tempfile
import time
import traceback

from common import end_group, free_port  # (tests/torch/common.py)

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torch is not importable with {sys.executable}: {e}")
    sys.exit(77)


def init(rank, n, port, module_dir, seconds=20):
    sys.path.insert(0, module_dir)
    import ringtree_torch  # noqa: F401
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("ringtree", rank=rank, world_size=n, timeout=datetime.timedelta(seconds=seconds))


def spawned(rank, n, port, module_dir):
    try:
        init(rank, n, port, module_dir)
        # point to point beside a collective: both calls make progress
        t0 = time.time()
        x = torch.ones(8) * (rank + 1)
        if rank == 0:
            w = dist.isend(torch.arange(1000, dtype=torch.float32), 1)
            dist.all_reduce(x)
            w.wait()
        else:
            got = torch.empty(1000)
            dist.recv(got, 0)
            dist.all_reduce(x)
            if not torch.equal(got, torch.arange(1000, dtype=torch.float32)):
                raise AssertionError("recv beside all_reduce: wrong data")
        if not torch.all(x == 3):
            raise AssertionError("all_reduce beside isend: wrong sum")
        took = time.time() - t0
        if took > 10:
            raise AssertionError(f"isend + all_reduce took {took:.1f} s")
        if rank == 0:
            print(f"ok p2p-beside-collective: isend, all_reduce, wait in {took:.2f} s", flush=True)
        # all-to-all of uneven blocks: rank r sends (r * 3 + j) % 5 rows of 2 to rank j
        gloo = dist.new_group(backend="gloo")
        ins = [(rank * 3 + j) % 5 for j in range(n)]
        outs = [(j * 3 + rank) % 5 for j in range(n)]
        src = torch.cat([torch.full((c, 2), 100.0 * rank + j) for j, c in enumerate(ins)])
        ours = torch.full((sum(outs), 2), -1.0)
        theirs = torch.full((sum(outs), 2), -1.0)
        dist.all_to_all_single(ours, src, outs, ins)
        dist.all_to_all_single(theirs, src, outs, ins, group=gloo)
        want = torch.cat([torch.full((c, 2), 100.0 * j + rank) for j, c in enumerate(outs)])
        if not (torch.equal(ours, want) and torch.equal(theirs, want)):
            raise AssertionError(f"uneven all_to_all_single: got {ours.tolist()} want {want.tolist()}")
        if rank == 0:
            print(f"ok uneven-all-to-all: splits {ins} (totals differ by rank), exact and as gloo", flush=True)
        end_group()
    except Exception:
        raise AssertionError(f"rank {rank}:\n{traceback.format_exc()}")


def job_worker(rank, port, module_dir, go_file, calls):
    """One rank of a 2-rank job: forms the group, then (once go_file exists) all-reduces and checks."""
    try:
        init(rank, 2, port, module_dir, seconds=30)
    except Exception as e:
        print(f"raised at init: {e}", flush=True)
        sys.exit(3)
    print("formed", flush=True)
    until = time.time() + 60
    while go_file and not os.path.exists(go_file):
        if time.time() > until:
            print("no go", flush=True)
            sys.exit(4)
        time.sleep(0.01)
    wrong = 0
    try:
        for i in range(calls):
            t = torch.full((1000,), float(rank + 1 + i))
            dist.all_reduce(t)
            wrong += int(not torch.all(t == 2 * i + 3))  # this job's two ranks: (1 + i) + (2 + i)
    except Exception as e:
        print(f"raised after {i} calls: {e}", flush=True)
        sys.exit(3)
    print(f"WRONG {wrong} of {calls}" if wrong else f"right {calls} of {calls}", flush=True)
    sys.exit(0)


def start_job(port, module_dir, go_file, calls=200):
    procs = []
    for r in range(2):
        procs.append(subprocess.Popen([sys.executable, __file__, "--job-worker", str(r), str(port), module_dir,
                                       go_file, str(calls)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    return procs


def finish(procs, limit=120):
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            p.kill()
            text, _ = p.communicate()
            text += "\n(killed: no end within the limit)"
        out.append((p.returncode, text))
    return out


def two_jobs(module_dir):
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        # the stranger comes once the first job has formed
        port = free_port()
        go = os.path.join(tmp, "go")
        a = start_job(port, module_dir, go)
        formed = 0
        until = time.time() + 60
        lines = {0: "", 1: ""}
        while formed < 2 and time.time() < until:  # read "formed" from both ranks of A
            for r, p in enumerate(a):
                if lines[r] != "formed" and p.poll() is None:
                    lines[r] = p.stdout.readline().strip()
                    formed += lines[r] == "formed"
            if any(p.poll() is not None for p in a):
                break
        if formed < 2:
            failures.append(f"job A did not form: {lines} {finish(a)}")
            return failures
        b = start_job(port, module_dir, "", calls=200)
        b_out = finish(b, 60)
        open(go, "w").close()
        a_out = finish(a)
        for r, (rc, text) in enumerate(a_out):
            if rc != 0 or "right 200 of 200" not in text:
                failures.append(f"job A rank {r} (exit {rc}): {text.strip()}")
        rc, text = b_out[1]
        if rc == 0 or "claimed by two processes" not in text:
            failures.append(f"job B rank 1, a stranger to job A's store, was not refused (exit {rc}): {text.strip()}")
        print(f"ok two-jobs (B after A formed): A right 200 of 200 on both ranks; B's rank 1 refused: "
              f"{text.strip().splitlines()[-1][:160] if text.strip() else ''}", flush=True)
        # both at once: whatever pairs up, no process returns a wrong number with exit 0
        port = free_port()
        a = start_job(port, module_dir, "")
        b = start_job(port, module_dir, "")
        outcomes = finish(a) + finish(b)
        for k, (rc, text) in enumerate(outcomes):
            if "WRONG" in text or (rc == 0 and "right 200 of 200" not in text):
                failures.append(f"job {'AB'[k // 2]} rank {k % 2}: exit {rc} with {text.strip()}")
        summary = ", ".join(f"{'AB'[k // 2]}{k % 2}: exit {rc}" for k, (rc, _) in enumerate(outcomes))
        print(f"ok two-jobs (started together): {summary}; no wrong number with exit 0", flush=True)
    return failures


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--job-worker":
        _, _, rank, port, module_dir, go, calls = sys.argv
        job_worker(int(rank), int(port), module_dir, go, int(calls))
        return
    module_dir = os.path.abspath(sys.argv[1])
    mp.spawn(spawned, args=(2, free_port(), module_dir), nprocs=2, join=True)
    failures = two_jobs(module_dir)
    for f in failures:
        print(f"FAIL: {f}", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
