#!/usr/bin/env python3
"""examples/torch_ddp.py under "ringtree" and under "gloo": the same final
parameters, bitwise at 2 ranks and within float rounding at 3.

    test_example.py EXAMPLE BUILD/python --ranks N
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torch is not importable with {sys.executable}: {e}")
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("example")
    ap.add_argument("module_dir")
    ap.add_argument("--ranks", type=int, default=2)
    a = ap.parse_args()
    env = dict(os.environ, RINGTREE_TORCH_PATH=os.path.abspath(a.module_dir))
    params = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("ringtree", "gloo"):
            out = os.path.join(tmp, backend + ".pt")
            r = subprocess.run([sys.executable, a.example, backend, "--ranks", str(a.ranks), "--save", out],
                               env=env, capture_output=True, text=True, timeout=300)
            print(r.stdout, end="")
            if r.returncode != 0:
                print(r.stderr)
                sys.exit(f"FAILED: the example exited {r.returncode} under {backend}")
            params[backend] = torch.load(out)
    ours, theirs = params["ringtree"], params["gloo"]
    if a.ranks == 2:
        ok = torch.equal(ours, theirs)
        how = "bitwise equal"
    else:
        ok = torch.allclose(ours, theirs, rtol=1e-5, atol=1e-6)
        how = "equal within float rounding"
    diff = (ours - theirs).abs().max().item()
    if not ok:
        sys.exit(f"FAILED: {a.ranks} ranks: parameters differ from gloo's by up to {diff:g}")
    print(f"ok: {a.ranks} ranks: {ours.numel()} parameters {how} to gloo's (largest difference {diff:g})")


if __name__ == "__main__":
    main()
