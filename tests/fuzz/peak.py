"""The peak resident memory of a command and every process it starts, measured from
outside: the rule the memory fixes answer to is "peak under 300 MB for the whole process
tree for any input under 1 MB", so the oracle is the kernel's count, never the budget's
own arithmetic.

Two views, the larger wins: the sum of Pss (resident memory, shared pages divided
among their sharers) over the child and all its descendants, sampled every few
milliseconds (workers that peak together), and the largest VmHWM seen (one process's
own peak, however short). Not wait4's ru_maxrss: a child forked from a large parent
keeps the parent's high-water mark across exec.
"""

import os
import subprocess
import sys
import threading
import time

PEAK_MB = 300  # the rule, for any input under 1 MB


def _children(pid):
    """The pids of a process's children (of each of its threads)."""
    found = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.extend(int(c) for c in f.read().split())
    except OSError:  # gone meanwhile
        pass
    return found


def _field_kb(path, name):
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(name):
                    return int(line.split()[1])
    except OSError:  # gone meanwhile
        pass
    return 0


def tree_kb(root):
    """(proportional resident kB of `root` and all its descendants now, the largest
    VmHWM among them). Pss: forked workers share their parent's pages, and counting
    each shared page once per process would charge the tree for memory it does not
    use. VmHWM: a process's own peak since its exec, however short."""
    total, hwm, todo = 0, 0, [root]
    while todo:
        pid = todo.pop()
        total += _field_kb(f"/proc/{pid}/smaps_rollup", b"Pss:")
        hwm = max(hwm, _field_kb(f"/proc/{pid}/status", b"VmHWM:"))
        todo.extend(_children(pid))
    return total, hwm


def run(args, env=None, cwd=None, seconds=300, kill_mb=4000):
    """Run `args` (argv); (exit code, stdout, stderr, peak MB of the whole tree, seconds).
    A tree past kill_mb is killed (the measure has then said all it needs)."""
    start = time.monotonic()
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env, cwd=cwd, start_new_session=True)
    out, err = [], []
    readers = [threading.Thread(target=lambda s, b: b.append(s.read()), args=(s, b),
                                daemon=True)
               for s, b in ((child.stdout, out), (child.stderr, err))]
    for t in readers:
        t.start()
    sampled = 0
    while child.poll() is None:
        total, hwm = tree_kb(child.pid)
        sampled = max(sampled, total, hwm)
        if sampled > kill_mb * 1024 or time.monotonic() - start > seconds:
            os.killpg(child.pid, 9)  # the group this call started, no other
            child.wait()
        time.sleep(0.01)
    for t in readers:
        t.join()
    elapsed = time.monotonic() - start
    peak_kb = sampled
    return (child.returncode, out[0].decode(errors="replace"),
            err[0].decode(errors="replace"), peak_kb / 1024, elapsed)


def cli(*args, cwd=None, env=None, **kwargs):
    """run() of `python -m mnistconv ARGS` with this checkout first on the path."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    return run([sys.executable, "-m", "mnistconv", *map(str, args)], env=env, cwd=cwd,
               **kwargs)
