#!/usr/bin/env python3
"""examples/torch_ddp.py under torchrun (torch's elastic agent: c10d
rendezvous, env:// init, LOCAL_RANK, TORCHELASTIC_RUN_ID), as a user
launches it:

1. "ringtree" and "gloo" give the same parameters, bitwise (2 ranks);
2. with --max_restarts 1 and rank 1 SIGKILLed in the middle of epoch 1:
   the survivor raises (naming the dead rank) within the group's timeout,
   the agent restarts both workers, they form a new "ringtree" group,
   resume from the example's checkpoint at epoch 1 and end with the
   parameters of the run that was never killed, bitwise; no shared-memory
   segment of any worker is left in /dev/shm.

    test_elastic.py EXAMPLE BUILD/python

The workers are this file (--worker): it runs the example's main() in
the process torchrun started, adds the kill, and writes what each worker
did into the run's temporary directory.
"""
import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from common import free_port  # (tests/torch/common.py)

try:
    import torch
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torch is not importable with {sys.executable}: {e}")
    sys.exit(77)

TIMEOUT = 20  # the group's timeout (s): the survivor must raise before it


def record(logdir, what, **kw):
    kw.update(what=what, pid=os.getpid(), rank=int(os.environ["RANK"]),
              attempt=int(os.environ["TORCHELASTIC_RESTART_COUNT"]), run_id=os.environ["TORCHELASTIC_RUN_ID"],
              local_rank=int(os.environ["LOCAL_RANK"]), time=time.time())
    with open(os.path.join(logdir, f"{what}-{kw['attempt']}-{kw['rank']}.json"), "w") as f:
        json.dump(kw, f)


def worker(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("example")
    ap.add_argument("logdir")
    ap.add_argument("--kill", default="", help="RANK:EPOCH:STEP: that rank SIGKILLs itself there, in the first attempt")
    a, rest = ap.parse_known_args(argv)
    spec = importlib.util.spec_from_file_location("torch_ddp", a.example)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    record(a.logdir, "start")
    after_step = None
    if a.kill:
        rank, epoch, step = (int(x) for x in a.kill.split(":"))
        if int(os.environ["RANK"]) == rank and int(os.environ["TORCHELASTIC_RESTART_COUNT"]) == 0:
            def after_step(e, s):
                if (e, s) == (epoch, step):
                    record(a.logdir, "killed", epoch=e, step=s)
                    os.kill(os.getpid(), signal.SIGKILL)
    try:
        example.main(rest, after_step)
    except Exception as e:
        record(a.logdir, "raised", error=f"{type(e).__name__}: {e}")
        raise
    record(a.logdir, "done")


def torchrun(tmp, name, args, max_restarts=0):
    """One job under torchrun (the environment's own command, as a user
    types it), on its own rendezvous port and log directory."""
    logdir = os.path.join(tmp, name)
    os.mkdir(logdir)
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    launcher = [torchrun] if os.path.exists(torchrun) else [sys.executable, "-m", "torch.distributed.run"]
    cmd = launcher + ["--nnodes", "1", "--nproc_per_node", "2",
                      "--rdzv_backend", "c10d", "--rdzv_endpoint", f"localhost:{free_port()}", "--rdzv_id", name,
                      "--max_restarts", str(max_restarts), "--monitor_interval", "5", "--log_dir", os.path.join(logdir, "agent"),
                      os.path.abspath(__file__), "--worker", EXAMPLE, logdir] + args
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    print(f"torchrun {name}: exit {r.returncode} in {time.time() - t0:.1f} s")
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        sys.exit(f"FAILED: torchrun {name} exited {r.returncode}")
    records = {}
    for f in os.listdir(logdir):
        if f.endswith(".json"):
            with open(os.path.join(logdir, f)) as fh:
                records[f[:-5]] = json.load(fh)
    return r.stdout + r.stderr, records


def leftovers(records):
    pids = {r["pid"] for r in records.values()}
    return [f for f in os.listdir("/dev/shm") if f.startswith("ringtree-") and any(f"-{p}-" in f for p in pids)]


def main():
    global EXAMPLE
    ap = argparse.ArgumentParser()
    ap.add_argument("example")
    ap.add_argument("module_dir")
    a = ap.parse_args()
    EXAMPLE = os.path.abspath(a.example)
    os.environ["RINGTREE_TORCH_PATH"] = os.path.abspath(a.module_dir)
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        params = {}
        for backend in ("ringtree", "gloo"):
            out = os.path.join(tmp, backend + ".pt")
            log, rec = torchrun(tmp, backend, [backend, "--save", out, "--timeout", str(TIMEOUT)])
            params[backend] = torch.load(out)
            envs = {(r["rank"], r["local_rank"]) for k, r in rec.items() if k.startswith("start-")}
            if envs != {(0, 0), (1, 1)} or {r["run_id"] for r in rec.values()} != {backend}:
                fails.append(f"{backend}: the workers did not see torchrun's RANK/LOCAL_RANK/TORCHELASTIC_RUN_ID: {rec}")
        if not torch.equal(params["ringtree"], params["gloo"]):
            fails.append(f"under torchrun, ringtree's parameters differ from gloo's by "
                         f"{(params['ringtree'] - params['gloo']).abs().max().item():g}")
        else:
            print("ok: under torchrun, ringtree's parameters are gloo's, bitwise")

        out = os.path.join(tmp, "restarted.pt")
        log, rec = torchrun(tmp, "restart", ["ringtree", "--save", out, "--timeout", str(TIMEOUT),
                                             "--checkpoint", os.path.join(tmp, "ckpt.pt"), "--kill", "1:1:3"], max_restarts=1)
        killed, raised = rec.get("killed-0-1"), rec.get("raised-0-0")
        if not killed:
            fails.append(f"rank 1 was not killed in the first attempt: {sorted(rec)}")
        elif not raised:
            fails.append(f"the survivor (rank 0) of the first attempt did not raise: {sorted(rec)}\n{log}")
        else:
            after = raised["time"] - killed["time"]
            print(f"ok: the survivor raised {after:.2f} s after rank 1 was killed: {raised['error'][:160]}")
            if after > TIMEOUT or "rank 1" not in raised["error"]:
                fails.append(f"the survivor raised {after:.1f} s after the kill (timeout {TIMEOUT} s), or did not name rank 1: "
                             f"{raised['error']}")
        if not (("done-1-0" in rec) and ("done-1-1" in rec)):
            fails.append(f"the restarted workers did not both finish: {sorted(rec)}\n{log}")
        if "ringtree resuming at epoch 1" not in log:
            fails.append(f"the restarted run did not resume at epoch 1 from the checkpoint:\n{log}")
        if os.path.exists(out):
            if torch.equal(torch.load(out), params["ringtree"]):
                print("ok: killed, restarted and resumed: the parameters of the run never killed, bitwise")
            else:
                fails.append("the restarted run's parameters differ from the uninterrupted run's")
        else:
            fails.append("the restarted run saved no parameters")
        left = leftovers(rec)
        if left:
            fails.append(f"left in /dev/shm: {left}")
        else:
            print(f"ok: nothing of the {len({r['pid'] for r in rec.values()})} workers is left in /dev/shm")
    if fails:
        sys.exit("FAILED:\n" + "\n".join(fails))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2:])
    else:
        main()
