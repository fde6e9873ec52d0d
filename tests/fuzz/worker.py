"""A long-lived process that runs many fuzz cases, one after another, and reports each.

Starting a Python process per case (numpy, protobuf, Pillow: about 0.3 s) would make
10000 cases per reader take hours; in-process in pytest there is no way to measure one
case's peak memory. So the long pass keeps a few of these workers busy (test_fuzz_long.py
is the other end). For each case a worker:
  - builds the input from (reader, family, index, run) alone (hostile.py), so any case
    is reproduced with `python tests/fuzz/worker.py replay READER FAMILY INDEX RUN`;
  - runs the command line in-process on it (runner.run_cli: one-line error, exit code,
    nothing written outside out/, the watchdog at CASE_SECONDS, 1 GiB of address space);
  - measures the case's peak resident memory: glibc gives back what earlier cases freed
    (malloc_trim), /proc/self/clear_refs resets VmHWM to the current RSS, and VmHWM is
    read again afterwards; more than MAX_PEAK_MB is a failure;
  - saves a misbehaving input under FAILURES/long/ and answers with one JSON line.

Protocol: one JSON object per line on stdin (a case) and stdout (its result); the
worker's own fd 1 is /dev/null so that nothing a case prints can garble a reply.
"""

import ctypes
import json
import os
import random
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import hostile  # noqa: E402
import seeds as seedlib  # noqa: E402
from runner import new_work, run_cli, scratch_dir  # noqa: E402

CASE_SECONDS = float(os.environ.get("MNISTCONV_FUZZ_SECONDS", 20))
MAX_PEAK_MB = int(os.environ.get("MNISTCONV_FUZZ_PEAK_MB", 300))
BUDGET = 1 << 30
COMMANDS = ["info", "npz", "idx", "gdmnist", "tfrecord"]


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    return 0


# The worker's footprint with mnistconv and numpy imported, before any case: what a fresh
# `mnistconv` process starts from (37 MB measured for one that imports the same).
START_RSS_MB = _status("VmRSS")


def _reset_peak():
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


# The views a case may ask for (Case.commands, the budget family): each reads the input
# its own way (a gather, a shrink, two readers in lockstep, a shuffled order).
VIEWS = {
    "show": lambda path, out: ["show", path, "--per-class", "2"],
    "preview": lambda path, out: ["preview", path, "-o", f"{out}/sheet.png", "-q"],
    "compare": lambda path, out: ["compare", path, path, "-q"],
    "shuffle": lambda path, out: ["convert", path, f"{out}/o.npz", "--shuffle", "-q"],
    "per-class": lambda path, out: ["convert", path, f"{out}/o.npz", "--per-class", "3",
                                    "-q"],
}


def command(rng, reader, case, out):
    """The command line for a case: info, a conversion to each writer, a view, or verify
    for a pack (Case.commands narrows the choice); the reader named or detected."""
    choices = list(case.commands) if case.commands else \
        COMMANDS + (["verify"] if os.path.isfile(os.path.join(case.path,
                                                              "manifest.json")) else [])
    which = rng.choice(choices)
    source = ["--from", reader] if rng.random() < 0.5 else []
    if which in VIEWS:
        if which == "compare" and source:
            source = ["--from-a", reader, "--from-b", reader]
        return VIEWS[which](case.path, out) + source + case.extra_args, which
    if which == "verify":
        return ["verify", case.path, "--json"], which
    if which == "info":
        return ["info", case.path, "--json"] + source + case.extra_args, which
    target = {"npz": f"{out}/o.npz", "idx": f"{out}/o", "gdmnist": f"{out}/o",
              "tfrecord": f"{out}/o.tfrecord", "imagefolder": f"{out}/o"}[which]
    args = ["convert", case.path, target, "--to", which, "--quiet"] + source + \
        case.extra_args
    if which == "tfrecord":
        args += ["--label-format", rng.choice(["onehot", "index"])]
    return args, which


def run_case(spec, top):
    reader, family, index, run = spec["reader"], spec["family"], spec["index"], spec["run"]
    rng = random.Random(f"{run}/{reader}/{family}/{index}")
    name = f"{reader}-{family}-{index}"
    shutil.rmtree(top, ignore_errors=True)
    # Deep enough that '../' chains from out/ stay inside top, where they are seen.
    work = new_work(os.path.join(top, *"abcdefgh"), "case")
    result = {"reader": reader, "family": family, "index": index, "run": run}
    try:
        case = hostile.FAMILIES[family][reader](rng, work, top)
    except Exception as e:  # a bug of the generator, not of mnistconv: still reported
        import traceback
        result.update(problems=[f"generator failed: {traceback.format_exc()[-1500:]}"],
                      what=repr(e), args=[], code=None, stderr="", peak_mb=0, seconds=0)
        return result
    args, which = command(rng, reader, case, os.path.join(work, "out"))
    expect = case.expect_code if which != "verify" else None
    _reset_peak()
    # The case's peak as a fresh process would have it: what it added to this
    # long-lived worker (whose resident memory drifts up over thousands of cases:
    # allocator arenas, caches) on top of the worker's own start-up footprint.
    resident_before = _status("VmRSS")
    started = time.monotonic()
    code, out, err, problems = run_cli(args, work, top=top, seconds=CASE_SECONDS,
                                       budget=BUDGET, expect_code=expect)
    seconds = time.monotonic() - started
    peak = _status("VmHWM") - resident_before + START_RSS_MB
    if peak > MAX_PEAK_MB:
        problems.append(f"memory: peak resident {peak} MB, over {MAX_PEAK_MB} MB")
    result.update(what=case.what, args=args, code=code, stderr=err[-2000:],
                  problems=problems, peak_mb=peak, seconds=round(seconds, 2))
    if problems:
        saved = harness.FAILURES / "long" / name
        shutil.rmtree(saved, ignore_errors=True)
        shutil.copytree(os.path.join(work, "in"), saved, symlinks=True)
        result["saved"] = str(saved)
    shutil.rmtree(top, ignore_errors=True)
    return result


def serve(top):
    replies = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    for reader in seedlib.readers():  # build every seed once, before the first case
        seedlib.seeds(reader)
    replies.write(json.dumps({"ready": os.getpid()}) + "\n")
    replies.flush()
    for line in sys.stdin:
        spec = json.loads(line)
        replies.write(json.dumps(run_case(spec, top)) + "\n")
        replies.flush()


def main(argv):
    if argv[:1] == ["serve"]:
        serve(argv[1])
    elif argv[:1] == ["replay"]:
        reader, family, index, run = argv[1], argv[2], int(argv[3]), argv[4]
        top = scratch_dir("mnistconv-fuzz-replay-")
        result = run_case({"reader": reader, "family": family, "index": index, "run": run},
                          top)
        print(json.dumps(result, indent=2))
    else:
        sys.exit("usage: worker.py serve TOP | replay READER FAMILY INDEX RUN")


if __name__ == "__main__":
    main(sys.argv[1:])
