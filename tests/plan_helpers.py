"""What the shard-plan tests (test_plan.py, test_plan_tfds_webdataset.py) run: the CLI
as a subprocess, and a plan's tasks one by one."""

import json
import subprocess
import sys


def cli(*args, cwd=None, check=None):
    """`python -m mnistconv ARGS`; with check, its exit code must be that."""
    r = subprocess.run([sys.executable, "-m", "mnistconv", *map(str, args)],
                       capture_output=True, cwd=cwd)
    if check is not None:
        assert r.returncode == check, r.stderr.decode()
    return r


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
