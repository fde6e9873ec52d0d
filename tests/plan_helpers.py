"""What the shard-plan tests (test_plan.py, test_plan_tfds_webdataset.py) run: the CLI
as a subprocess, and a plan's tasks one by one."""

import json
import os
import signal
import subprocess
import sys
import time

from helpers import tree_hashes


def cli(*args, cwd=None, check=None):
    """`python -m mnistconv ARGS`; with check, its exit code must be that."""
    r = subprocess.run([sys.executable, "-m", "mnistconv", *map(str, args)],
                       capture_output=True, cwd=cwd)
    if check is not None:
        assert r.returncode == check, r.stderr.decode()
    return r


# Beam's DirectRunner in the launcher's process, and in worker processes: what a
# distributed runner pickles, and whether its workers find their files and limits.
BEAM_MODES = ["in_memory", "multi_processing"]


def beam_args(mode):
    """--runner beam on the DirectRunner in `mode`, with two workers."""
    return ["--runner", "beam", "--beam-option", "runner=DirectRunner", "--beam-option",
            f"direct_running_mode={mode}", "--beam-option", "direct_num_workers=2"]


def last_error(r):
    return r.stderr.decode().strip().splitlines()[-1]


def run_tasks(src, out, args, indices, num_tasks=6, after_each=None):
    """`convert src out ARGS --num-tasks N --task-index i --json` for each i in turn,
    each exiting 0: their JSON reports. after_each(reports so far) runs after each."""
    results = []
    for i in indices:
        r = cli("convert", src, out, *args, "--num-tasks", num_tasks, "--task-index", i,
                "--json", check=0)
        results.append(json.loads(r.stdout))
        if after_each:
            after_each(results)
    return results


def in_order(order, count=6):
    """Task indices forward or in reverse."""
    return list(range(count)) if order == "forward" else list(range(count - 1, -1, -1))


def job_array_slices(src, out, args, indices):
    """--num-tasks 4 over a 6-task plan, run as slices in the order given: {slice: the
    plan tasks it ran}."""
    reports = run_tasks(src, out, args, indices, num_tasks=4)
    return {i: [t["task"] for t in r["tasks"]] for i, r in zip(indices, reports)}


def kill_and_resume(tmp_path, src, expected, out_name, record_name, opts, points):
    """For each point, ("shards", n) or ("time", seconds): `convert src OUT OPTS
    --resume` killed with SIGKILL once its progress record lists n shards, or after
    that long; then resumed to the end, which must give `expected` (tree_hashes of an
    uninterrupted run), no staging leftovers, and at least n shards kept. Returns how
    many runs the kill stopped mid-way."""
    killed = 0
    for kind, at in points:
        top = tmp_path / f"out-{kind}-{at}"
        out, record = top / out_name, top / record_name
        proc = subprocess.Popen([sys.executable, "-m", "mnistconv", "convert", str(src),
                                 str(out), *opts, "--resume", "-q"],
                                stderr=subprocess.DEVNULL)
        started = time.monotonic()
        while proc.poll() is None:
            if kind == "time" and time.monotonic() - started >= at:
                break
            if kind == "shards" and record.exists():
                try:
                    if len(json.loads(record.read_text())["shards"]) >= at:
                        break
                except ValueError:
                    pass
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        killed += proc.wait() == -signal.SIGKILL
        if kind == "shards":  # killed mid-set: not the set yet
            assert tree_hashes(top) != expected
        r = cli("convert", src, out, *opts, "--resume", "--json", check=0)
        result = json.loads(r.stdout)
        assert result["finished"]
        assert tree_hashes(top) == expected
        leftovers = [os.path.join(root, n) for root, _, names in os.walk(top)
                     for n in names if "mnistconv-tmp" in n]
        assert leftovers == []
        if kind == "shards":
            assert len([t for t in result["tasks"] if t["status"] == "kept"]) >= at
    return killed
