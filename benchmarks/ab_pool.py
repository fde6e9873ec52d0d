"""A/B: the command line's fork pool against threads (processes=False), whole processes
interleaved run by run, official training set, workers=2, same output bytes checked.
Issue 25 asked whether threads or concurrent.futures come within 5% of the fork pool.

    python benchmarks/ab_pool.py [rounds]      # prints medians of wall and CPU time
"""

import hashlib
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import common

SCRIPT = """
import sys, mnistconv
full = mnistconv.read(sys.argv[1])
ds = mnistconv.Dataset(full.format, {"train": full.splits["train"]})
mnistconv.write(ds, sys.argv[2], "tfrecord", force=True, workers=2,
                processes=sys.argv[3] == "fork", **dict(a.split("=") for a in sys.argv[4:]))
"""
CASES = {"fork pool": ("fork",), "threads": ("threads",)}
FORMATS = {"jpeg": ["image_format=jpeg"], "png": ["image_format=png"]}


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        digests = {}
        for r in range(rounds + 1):  # the first round warms up, untimed
            for fmt, extra in FORMATS.items():
                for case, args in CASES.items():
                    out = Path(tmp) / f"{fmt}-{args[0]}.tfrecord"
                    wall, cpu = common_time([sys.executable, "-c", SCRIPT,
                                             str(common.OFFICIAL_MNIST), str(out),
                                             *args, *extra])
                    digests.setdefault(fmt, set()).add(
                        hashlib.sha256(out.read_bytes()).hexdigest())
                    if r:
                        times.setdefault((fmt, case), []).append((wall, cpu))
        assert all(len(d) == 1 for d in digests.values()), digests
    for (fmt, case), runs in times.items():
        print(f"{fmt:5} {case:10} wall {statistics.median(w for w, _ in runs):.3f} s  "
              f"cpu {statistics.median(c for _, c in runs):.3f} s  "
              f"(wall min {min(w for w, _ in runs):.3f}, n={len(runs)})")


def common_time(cmd):
    done = subprocess.run(["/usr/bin/time", "-f", "%e %U %S", *cmd], capture_output=True,
                          text=True, env=common.env())
    if done.returncode:
        sys.exit(done.stderr)
    wall, user, system = map(float, done.stderr.split()[-3:])
    return wall, user + system


if __name__ == "__main__":
    main()
