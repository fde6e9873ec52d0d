"""Fuzz by mechanism (issue 35): for every point where a reader makes bytes from fewer
(expansion.MECHANISMS: values, dictionaries, records, labels, chunks, images), inputs
under 1 MB driven at random along that dimension up to deflate's 1032:1, each run
through a command in a child process.

The oracle is the rule, never the budget's own arithmetic: the whole process tree's
peak (peak.py) under 300 MB, an exit of 0, or 1 with one `Error:` line and no
traceback, within CASE_SECONDS. An input that came out at 1 MB or more is not judged
(the rule is for inputs under 1 MB) and is counted apart.

`make test` runs SHORT cases per mechanism; MNISTCONV_FUZZ_CASES sets how many (as
test_fuzz_long.py), MNISTCONV_FUZZ_RUN the run id (a case is replayed from its run id,
mechanism and number: `python -m tests.fuzz.test_fuzz_expansion replay READER DIMENSION
INDEX RUN`). `python -m tests.fuzz.test_fuzz_expansion long` runs every mechanism and
prints one JSON line per case and a summary per reader.
"""

import json
import math
import os
import random
import shutil
import sys
import tempfile
import time

import pytest

from . import expansion, peak

SHORT = 1  # cases per mechanism in the default pass
CASE_SECONDS = 300
COMMANDS = ("info", "npz", "card", "compare")
SMALLEST = 1 << 20  # bytes made: from 1 MB ...
LARGEST = expansion.MOST  # ... to what 1032:1 makes of 1 MB


def case_spec(reader, dimension, index, run):
    """(bytes made, command) of one case, from its run id alone."""
    rng = random.Random(f"{run}:{reader}:{dimension}:{index}")
    made = int(math.exp(rng.uniform(math.log(SMALLEST), math.log(LARGEST))))
    return made, rng.choice(COMMANDS)


def _argv(command, path, out):
    if command == "info":
        return ["info", path]
    if command == "npz":
        return ["convert", path, os.path.join(out, "o.npz")]
    if command == "card":
        return ["card", path, "-o", os.path.join(out, "card.html")]
    return ["compare", path, path]


def _size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path)
               for f in files)


def run_case(reader, dimension, index, run, work):
    """One case: a dict with what was built and run, and its problems (empty: clean)."""
    made, command = case_spec(reader, dimension, index, run)
    folder = os.path.join(work, "in")
    out = os.path.join(work, "out")
    for d in (folder, out):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    path = expansion.MECHANISMS[reader][dimension](folder, made)
    size = _size(path)
    result = {"reader": reader, "dimension": dimension, "index": index, "run": run,
              "made": made, "command": command, "input_bytes": size, "problems": []}
    if size >= 1 << 20:
        result["judged"] = False
        return result
    code, _, err, mb, seconds = peak.cli(*_argv(command, path, out), cwd=work,
                                         seconds=CASE_SECONDS)
    result.update(judged=True, exit=code, peak_mb=round(mb, 1), seconds=round(seconds, 1),
                  error=err.strip()[-300:] if code else "")
    problems = result["problems"]
    if mb >= peak.PEAK_MB:
        problems.append(f"peak {mb:.0f} MB, over {peak.PEAK_MB} MB")
    if seconds >= CASE_SECONDS:
        problems.append(f"ran past {CASE_SECONDS} s")
    elif code not in (0, 1):
        problems.append(f"exit {code}")
    if "Traceback" in err:
        problems.append("traceback")
    elif code == 1 and not (err.startswith("Error: ") and err.count("\n") == 1):
        problems.append(f"not one line: {err[:200]!r}")
    return result


MECHANISMS = [(r, d) for r, dims in sorted(expansion.MECHANISMS.items()) for d in dims]


@pytest.mark.parametrize("reader, dimension", MECHANISMS)
def test_every_mechanism_within_the_rule(reader, dimension, tmp_path):
    cases = int(os.environ.get("MNISTCONV_FUZZ_CASES", SHORT))
    run = os.environ.get("MNISTCONV_FUZZ_RUN", "short")
    failures = []
    for index in range(cases):
        result = run_case(reader, dimension, index, run, str(tmp_path))
        if result["problems"]:
            failures.append(result)
    assert not failures, json.dumps(failures, indent=1)


def _long(cases, run, readers=None):
    work = tempfile.mkdtemp(prefix="mnistconv-expansion-")
    summary = {}
    try:
        for index in range(cases):
            for reader, dimension in MECHANISMS:
                if readers and reader not in readers:
                    continue
                result = run_case(reader, dimension, index, run, work)
                print(json.dumps(result), flush=True)
                s = summary.setdefault(reader, {"cases": 0, "judged": 0, "failed": 0,
                                                "refused": 0, "peak_mb": 0.0})
                s["cases"] += 1
                if result.get("judged"):
                    s["judged"] += 1
                    s["failed"] += bool(result["problems"])
                    s["refused"] += result["exit"] == 1
                    s["peak_mb"] = max(s["peak_mb"], result["peak_mb"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
        print(json.dumps({"summary": summary, "run": run}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "replay":
        reader, dimension, index, run = sys.argv[2:6]
        with tempfile.TemporaryDirectory() as work:
            print(json.dumps(run_case(reader, dimension, int(index), run, work)))
    else:
        _long(int(os.environ.get("MNISTCONV_FUZZ_CASES", 100)),
              os.environ.get("MNISTCONV_FUZZ_RUN", f"x{int(time.time())}"),
              sys.argv[2:])
