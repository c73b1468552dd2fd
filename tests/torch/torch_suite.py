#!/usr/bin/env python3
"""PyTorch's own distributed test suite (torch/testing/_internal/distributed/
distributed_test.py, shipped with torch) against one backend, run the way
torch's test_distributed_spawn.py runs it for gloo: every test in fresh
processes (spawn), init_process_group(BACKEND, init_method=file://...).

    torch_suite.py BACKEND BUILD/python [--world-size 2] [--json OUT] [-k SUBSTRING ...] [-x SUBSTRING ...]
    torch_suite.py compare GLOO.json RINGTREE.json     (the cases one passes and the other does not)

For "ringtree" the module is imported first (it registers the backend in
every process: spawned children import this file again), and ringtree is
entered in the suite's own feature lists (DistTestCases: "plugin" for a
backend registered from outside, "ddp", "subgroup") as test_distributed_spawn
does for the backends it knows. Prints one line per test (ok / FAIL /
ERROR / skip: reason) and the counts; --json writes them.
"""
import argparse
import json
import os
import sys
import tempfile
import time
import unittest

# What gloo passes and ringtree cannot, and why (torch's test bodies or
# torch itself, not ringtree): listed in the comparison, not counted.
GLOO_ONLY = {
    **{f"test_accumulate_gradients_no_sync{v}": "the body picks the model by the backend's name (mpi, gloo, nccl): none for another"
       for v in ("", "_grad_is_view", "_allreduce_hook", "_allreduce_with_then_hook")},
    "test_ddp_logging_data_cpu": "expects DDP's log to name the backend; torch's ProcessGroup names every registered backend \"custom\"",
}


def compare(a_path, b_path):
    """Counts per outcome of two runs, and every test whose outcome differs."""
    runs = [json.load(open(p)) for p in (a_path, b_path)]
    a, b = (r["backend"] for r in runs)
    names = sorted(set(runs[0]["outcomes"]) | set(runs[1]["outcomes"]))
    out = lambda r, n: r["outcomes"].get(n, {"outcome": "-", "why": "not run"})
    for r in runs:
        counts = {}
        for o in r["outcomes"].values():
            counts[o["outcome"]] = counts.get(o["outcome"], 0) + 1
        print(f"{r['backend']}: {len(r['outcomes'])} tests: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    print(f"| test | {a} | {b} | {b}: why |\n|---|---|---|---|")
    worse = argued = 0
    for n in names:
        x, y = out(runs[0], n), out(runs[1], n)
        if x["outcome"] != y["outcome"]:
            lost = x["outcome"] == "ok" and y["outcome"] != "ok"
            gloo_only = lost and a == "gloo" and n in GLOO_ONLY
            why = f"gloo-only: {GLOO_ONLY[n]}" if gloo_only else y.get("why", "")[:160] if y["outcome"] != "ok" else ""
            print(f"| {n} | {x['outcome']} | {y['outcome']} | {why} |")
            argued += gloo_only
            worse += lost and not gloo_only
    print(f"# {worse} tests pass on {a} and not on {b}" + (f" (and {argued} gloo-only ones, above)" if argued else ""))
    return 1 if worse else 0


if __name__ == "__main__" and sys.argv[1:2] == ["compare"]:
    sys.exit(compare(sys.argv[2], sys.argv[3]))

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("backend")
    ap.add_argument("module_dir")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--json", default="")
    ap.add_argument("-k", action="append", default=[], help="run the tests whose name contains this (any of them)")
    ap.add_argument("-x", action="append", default=[], help="leave out the tests whose name contains this")
    args = ap.parse_args()
    os.environ["BACKEND"] = args.backend
    os.environ["WORLD_SIZE"] = str(args.world_size)
    os.environ["RINGTREE_TORCH_PATH"] = os.path.abspath(args.module_dir)
    if "TEMP_DIR" not in os.environ:  # (the suite's lock and barrier files; ringtree's cache too)
        import atexit
        import shutil
        os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="ringtree-torch-suite-")
        atexit.register(shutil.rmtree, os.environ["TEMP_DIR"], True)
    os.environ.setdefault("RINGTREE_CACHE_DIR", os.path.join(os.environ["TEMP_DIR"], "ringtree-cache"))

sys.path.insert(0, os.environ["RINGTREE_TORCH_PATH"])
if os.environ["BACKEND"] == "ringtree":
    import ringtree_torch  # noqa: F401  (registers "ringtree")

# The suite's base class comes from expecttest (its inline-expectation
# asserts, which these tests do not use), a test-only package that Debian
# does not ship: a stand-in with the same two names.
if "expecttest" not in sys.modules:
    try:
        import expecttest  # noqa: F401
    except ImportError:
        import types
        shim = types.ModuleType("expecttest")
        shim.ACCEPT = False

        class _TestCase(unittest.TestCase):
            def assertExpectedInline(self, *a, **kw):
                raise NotImplementedError("expecttest is not installed")
        shim.TestCase = _TestCase
        sys.modules["expecttest"] = shim
_argv, sys.argv = sys.argv, sys.argv[:1]  # (torch's test utilities parse sys.argv when imported)
import torch  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

if os.environ["BACKEND"] == "ringtree":
    # ("gpu" gates tests that gloo runs on the CPU too, the *_object
    # collectives among them; those that need GPUs skip here for lack of
    # them, for every backend)
    for feature in ("plugin", "ddp", "subgroup", "gpu"):
        DistTestCases.backend_feature[feature].add("ringtree")

from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402
sys.argv = _argv


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


# Tests the suite skips for every backend not named "gloo" (a literal in
# their decorators, decided when the file is imported, so no feature list
# reaches them), although they test CPU features ringtree has. Run for
# ringtree as for gloo: the skip is a mark on the test function (torch's
# sandcastle_skip/_skip_if set __unittest_skip__), cleared where its
# reason names gloo, on every function of the decorator chain; other
# skips (init method, world size, GPUs) stay.
GLOO_NAMED = [f"test_all_reduce_coalesced_{g}{o}" for g in ("", "group_", "full_group_") for o in ("sum", "product", "min", "max")]
# (test_barrier_timeout_global also skips unless INIT_METHOD is file://,
# for gloo too: its two skip marks share one function, so it stays out)
GLOO_NAMED += ["test_barrier_timeout_group", "test_barrier_timeout_full_group",
               "test_batch_isend_irecv_gloo", "test_batch_isend_irecv_gloo_tags", "test_scatter_object_list", "test_get_future"]
# torch 2.x: monitored_barrier and sparse all_reduce are Backend functions
# that gloo implements and ringtree too; a DDP case that names gloo only
GLOO_NAMED += ["test_monitored_barrier_gloo", "test_monitored_barrier_gloo_subgroup", "test_monitored_barrier_gloo_rank_0_timeout",
               "test_monitored_barrier_failure_order", "test_monitored_barrier_wait_all_ranks", "test_sparse_all_reduce_sum",
               "test_grads_same_across_ranks_with_no_sync"]
# (left gloo's: GLOO_ONLY, above)
if os.environ["BACKEND"] == "ringtree":
    for name in GLOO_NAMED:
        f = getattr(TestDistBackendWithSpawn, name, None)  # (not every torch has every case)
        while f is not None:
            if getattr(f, "__unittest_skip__", False) and "gloo" in getattr(f, "__unittest_skip_why__", "").lower():
                f.__unittest_skip__ = False
            f = getattr(f, "__wrapped__", None)


class Record(unittest.TextTestResult):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.outcomes = {}

    def _name(self, test):
        return test.id().rsplit(".", 1)[-1]

    def startTest(self, test):
        self._t0 = time.time()
        super().startTest(test)

    def _put(self, test, what, detail=""):
        name = self._name(test)
        self.outcomes[name] = {"outcome": what, "detail": detail[-2000:], "seconds": round(time.time() - self._t0, 1)}
        lines = [ln for ln in detail.strip().splitlines() if "Error" in ln or "error" in ln or what == "skip"]
        self.outcomes[name]["why"] = (lines[-1] if lines else detail.strip().splitlines()[-1] if detail else "").strip()[:300]
        print(f"{what:5} {name} ({self.outcomes[name]['seconds']} s){': ' + self.outcomes[name]['why'] if what != 'ok' else ''}",
              flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._put(test, "ok")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._put(test, "FAIL", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._put(test, "ERROR", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._put(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._put(test, "xfail")


def main():
    names = unittest.TestLoader().getTestCaseNames(TestDistBackendWithSpawn)
    names = [n for n in names if (not args.k or any(k in n for k in args.k)) and not any(x in n for x in args.x)]
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in names)
    runner = unittest.TextTestRunner(resultclass=Record, verbosity=0, stream=open(os.devnull, "w"))
    t0 = time.time()
    result = runner.run(suite)
    counts = {}
    for o in result.outcomes.values():
        counts[o["outcome"]] = counts.get(o["outcome"], 0) + 1
    print(f"# {args.backend}, {args.world_size} ranks, torch {torch.__version__}: {len(names)} tests in {time.time() - t0:.0f} s: " +
          ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": args.backend, "world_size": args.world_size, "outcomes": result.outcomes}, f, indent=1)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
