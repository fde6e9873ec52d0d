"""A/B: two checkouts of mnistconv on the same commands, whole processes interleaved run
by run, each output's bytes checked equal between the two. Issue 25 asks that a change of
the code's shape leave every bench within 5%; this measures exactly the change, on the
commands the benches time (the official MNIST files, decompressed).

    git worktree add --detach /tmp/old <commit>
    python benchmarks/ab_trees.py /tmp/old . [rounds]   # medians, new/old ratios
    python benchmarks/ab_trees.py /tmp/old . 9 webdataset idx-to-npz   # some commands
"""

import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

# name: (arguments after `mnistconv`, with {src} the IDX folder and {out} the output)
COMMANDS = {
    "idx-to-tfrecord": ["idx-to-tfrecord", "{src}", "{out}/m.tfrecord"],
    "idx-to-npz": ["convert", "{src}", "{out}/m.npz"],
    "idx --gzip": ["convert", "{src}", "{out}/idx/", "--to", "idx", "--gzip"],
    "gdmnist --gzip": ["convert", "{src}", "{out}/g/", "--to", "gdmnist", "--gzip"],
    "tfds": ["convert", "{src}", "{out}/tfds/", "--to", "tfds"],
    "parquet": ["convert", "{src}", "{out}/pq/", "--to", "parquet"],
    "webdataset": ["convert", "{src}", "{out}/wds/", "--to", "webdataset"],
    "arrayrecord": ["convert", "{src}", "{out}/m.array_record", "--to", "arrayrecord"],
    "caffe-lmdb": ["convert", "{src}", "{out}/lmdb/", "--to", "caffe-lmdb"],
    "caffe-hdf5": ["convert", "{src}", "{out}/h5/", "--to", "caffe-hdf5"],
    "info": ["info", "{src}", "--json"],
    "browser pack": ["pack", "browser", "{src}", "{out}/pack/"],
}


def tree_digest(root: Path) -> str:
    """One SHA-256 over every file's relative path and bytes (none: the empty digest)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")) if root.exists() else ():
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def timed(tree: Path, args, out: Path):
    """(wall, cpu) of one whole command run with tree's code, out emptied first. The CPU
    is the process tree's from wait4 (microseconds): GNU time's 10 ms steps are 3% of a
    0.3 s command."""
    common.remove(out)
    out.mkdir(parents=True)
    env = dict(common.env(), PYTHONPATH=str(tree))
    quiet = [] if args[0] == "info" else ["-q"]  # info prints its summary, quiet or not
    start = time.perf_counter()
    proc = subprocess.Popen([common.PY, "-m", "mnistconv", *args, *quiet], env=env, cwd=out,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    proc.stderr.close()
    if proc.returncode:
        sys.exit(f"{tree}: mnistconv {' '.join(args)}: {err.decode()[-800:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main():
    old, new = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    with tempfile.TemporaryDirectory(prefix="mnistconv-ab-") as tmp:
        src = common.decompressed_copy(Path(tmp) / "mnist")
        times: dict = {}
        wanted = sys.argv[4:] or list(COMMANDS)
        for name, template in ((n, t) for n, t in COMMANDS.items() if n in wanted):
            digests = {}
            for r in range(rounds + 1):  # the first round warms up, untimed
                pair = (("old", old), ("new", new))
                for label, tree in pair if r % 2 else pair[::-1]:  # neither always first
                    out = Path(tmp) / "out"  # one path: some outputs name their folder
                    args = [a.format(src=src, out=out) for a in template]
                    wall_cpu = timed(tree, args, out)
                    digests[label] = tree_digest(out)
                    if r:
                        times.setdefault((name, label), []).append(wall_cpu)
            same = "same bytes" if digests["old"] == digests["new"] else "BYTES DIFFER"
            o, n = times[(name, "old")], times[(name, "new")]
            ow, nw = (statistics.median(w for w, _ in t) for t in (o, n))
            oc, nc = (statistics.median(c for _, c in t) for t in (o, n))
            # The best run too: on a shared host one command's CPU time spreads by 50%
            # within a set, and the medians move by 10% between sets; the least CPU a run
            # took is the steadiest estimate of what the code costs.
            ob, nb = (min(c for _, c in t) for t in (o, n))
            print(f"{name:16} old {ow:6.3f} s  new {nw:6.3f} s  wall {nw / ow:5.3f}x  "
                  f"cpu {oc:6.3f} -> {nc:6.3f} s {nc / oc:5.3f}x  best cpu {ob:6.3f} -> "
                  f"{nb:6.3f} s {nb / ob:5.3f}x  {same}", flush=True)
    print(f"(medians of {rounds} interleaved runs; load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
