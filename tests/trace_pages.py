#!/usr/bin/env python3
"""ringtree-trace's pages in a real browser (Debian's chromium, headless).

    trace_pages.py RINGTREE_TRACE OUT_DIR

For ring, tree, recursive doubling and Rabenseifner all-reduce at 4 and 8
ranks: makes the page (--html) and its story (--json), opens the page at
#step=K in headless Chromium, reads the DOM it drew (--dump-dom), and checks
that the arrows and the cells' colors of step K are the story's: every
message of the step and no other, every rank's every element with the
story's set of contributors. Ring at 4 ranks is also checked against the
textbook by hand: step 0 sends from every rank to the next, and after the
last step every element holds all four ranks' contributions. Saves a
screenshot of the ring page at step 3 (OUT_DIR/ring-allreduce-4-step3.png).
Exits 77 (meson's skip) where no browser can run.
"""
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile

BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                 "--hide-scrollbars"]


def browser():
    for b in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(b):
            return shutil.which(b)
    return None


class Drawn(html.parser.HTMLParser):
    """What the page drew: the step of its picture, its arrows and its cells."""

    def __init__(self):
        super().__init__()
        self.step, self.body_step, self.msgs, self.cells = None, None, [], {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class", "")
        if tag == "body":
            self.body_step = a.get("data-step")
        elif tag == "svg" and cls == "step":
            self.step = int(a["data-step"])
        elif tag == "g" and cls == "msg":
            self.msgs.append((int(a["data-from"]), int(a["data-to"]), int(a["data-first"]), int(a["data-count"])))
        elif tag == "rect" and cls == "cell":
            self.cells[(int(a["data-rank"]), int(a["data-index"]))] = int(a["data-mask"], 16)


def run_browser(exe, profile, url, extra):
    r = subprocess.run([exe] + BROWSER_FLAGS + ["--user-data-dir=" + profile] + extra + [url],
                       capture_output=True, text=True, timeout=90)
    return r


def drawn(exe, profile, page, step):
    r = run_browser(exe, profile, "file://" + page + "#step=%d" % step, ["--dump-dom"])
    if r.returncode != 0 or "<svg" not in r.stdout:
        raise SystemExit("FAIL: %s: chromium drew nothing (exit %d): %s" % (page, r.returncode, r.stderr[-2000:]))
    d = Drawn()
    d.feed(r.stdout)
    return d


def expected(story, k):
    st = story["steps"][k]
    msgs = sorted((m["from"], m["to"], m.get("first", 0) if m.get("in_buffer") else -1, m.get("count", 0)) for m in st["messages"])
    cells = {(r, i): int(h, 16) for r, row in enumerate(st["masks"]) for i, h in enumerate(row)}
    return msgs, cells


def main():
    tool, out = sys.argv[1], os.path.abspath(sys.argv[2])
    exe = browser()
    if exe is None:
        print("SKIP: no chromium (Debian: apt-get install chromium)")
        return 77
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        profile = os.path.join(tmp, "profile")
        probe = run_browser(exe, profile, "about:blank", ["--dump-dom"])
        if probe.returncode != 0:
            print("SKIP: chromium cannot run here (exit %d): %s" % (probe.returncode, probe.stderr[-500:]))
            return 77
        checked = 0
        for algo in ("ring", "tree", "recursive_doubling", "rabenseifner"):
            for n in (4, 8):
                page, story_file = os.path.join(tmp, "%s-%d.html" % (algo, n)), os.path.join(tmp, "%s-%d.json" % (algo, n))
                subprocess.run([tool, "--collective", "allreduce", "--algo", algo, "--ranks", str(n), "--count", "8",
                                "--html", page, "--json", story_file], check=True, capture_output=True)
                story = json.load(open(story_file))
                steps = len(story["steps"])
                for k in sorted({steps // 2, steps - 1}):
                    d = drawn(exe, profile, page, k)
                    want_msgs, want_cells = expected(story, k)
                    what = "%s at %d ranks, step %d" % (algo, n, k)
                    if d.step != k or d.body_step != str(k):
                        raise SystemExit("FAIL: %s: the page shows step %s (#step=%d)" % (what, d.step, k))
                    if sorted(d.msgs) != want_msgs:
                        raise SystemExit("FAIL: %s: arrows %s, the story's messages %s" % (what, sorted(d.msgs), want_msgs))
                    if d.cells != want_cells:
                        bad = sorted(c for c in set(d.cells) | set(want_cells) if d.cells.get(c) != want_cells.get(c))[:5]
                        raise SystemExit("FAIL: %s: cells differ at %s" % (what, bad))
                    checked += 1
                if algo == "ring" and n == 4:  # the textbook, by hand
                    d = drawn(exe, profile, page, 0)
                    if sorted((f, t) for f, t, _, _ in d.msgs) != [(r, (r + 1) % 4) for r in range(4)]:
                        raise SystemExit("FAIL: ring step 0 does not send from every rank to the next: %s" % d.msgs)
                    d = drawn(exe, profile, page, steps - 1)
                    if len(d.cells) != 32 or any(m != 0xF for m in d.cells.values()):
                        raise SystemExit("FAIL: ring's last step does not show every element with all four ranks' data")
                    shot = os.path.join(out, "ring-allreduce-4-step3.png")
                    r = run_browser(exe, profile, "file://" + page + "#step=3", ["--screenshot=" + shot, "--window-size=1100,560"])
                    if r.returncode != 0 or not os.path.exists(shot) or os.path.getsize(shot) < 2000:
                        raise SystemExit("FAIL: no screenshot of the ring page (exit %d)" % r.returncode)
                    checked += 2
        print("ok: %d pages' steps drawn as their stories say (arrows and cells), in %s; screenshot %s"
              % (checked, os.path.basename(exe), os.path.join(out, "ring-allreduce-4-step3.png")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
