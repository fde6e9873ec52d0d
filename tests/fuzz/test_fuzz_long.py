"""Hostile names, label values and compression ratios against every reader, through the
command line, in worker processes (worker.py) that each run many cases.

Per case: no traceback, exit 0/1/2 with one `Error:` line, nothing written outside the
output directory, no hang past 20 s (the worker's watchdog; a worker silent for longer
than HARD_SECONDS is killed and the case counted as a hang), peak resident memory of
the worker within 300 MB (VmHWM, reset before each case), and exit 1 where a split name
that is not safe reached the reader.

`make test` runs SHORT cases per reader (fixed); `make fuzz` (--fuzz-long) runs 10000
per reader with a new random run id, printed with any failure: replay one case with
`python tests/fuzz/worker.py replay READER FAMILY INDEX RUN`. MNISTCONV_FUZZ_CASES sets
the count, MNISTCONV_FUZZ_JOBS the number of workers (default: one per core, at most 4),
MNISTCONV_FUZZ_RUN the run id. Each failure is also appended, as it happens, to
MNISTCONV_FUZZ_LOG (default: mnistconv-fuzz-RUN.jsonl in the temporary directory), so a
long run that is stopped early still says what failed.
"""

import collections
import json
import os
import secrets
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from .hostile import FAMILIES
from .runner import scratch_dir
from .seeds import readers

# Which families of hostile inputs each reader gets: every family that applies to its
# format (hostile.py, hostile_formats.py, hostile_trees.py, hostile_listings.py,
# hostile_links.py, hostile_budget.py build them).
HOSTILE_FAMILIES = {fmt: [f for f in ("names", "labels", "ratio", "listing", "links", "budget")
                          if fmt in FAMILIES[f]]
                    for fmt in sorted(set().union(*FAMILIES.values()))}
HOSTILE_READERS = sorted(HOSTILE_FAMILIES)

WORKER = Path(__file__).resolve().parent / "worker.py"
REPO = Path(__file__).resolve().parents[2]
SHORT = 8  # per reader in the default pass: two of each family that applies
HARD_SECONDS = 60  # the worker's own watchdog fires at 20 s; this catches what it cannot
START_SECONDS = 180  # a worker builds every seed before its first case


class Worker:
    def __init__(self, number, root):
        self.top = os.path.join(root, f"w{number}")
        self.log = open(os.path.join(root, f"w{number}.log"), "ab")
        self.proc = subprocess.Popen([sys.executable, str(WORKER), "serve", self.top],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, cwd=REPO)
        self.buffer = b""
        self.spec = None
        self.since = time.monotonic()
        self.ready = False

    def send(self, spec):
        self.spec, self.since = spec, time.monotonic()
        self.proc.stdin.write((json.dumps(spec) + "\n").encode())
        self.proc.stdin.flush()

    def lines(self):
        data = os.read(self.proc.stdout.fileno(), 1 << 16)
        if not data:
            return None
        self.buffer += data
        *complete, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in complete]

    def stop(self, kill=False):
        if kill:
            self.proc.kill()  # only this worker, by its own handle
        else:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


class _Logged(list):
    """A list of results that appends each failure to a JSON-lines file as it comes."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def append(self, result):
        super().append(result)
        if self.path and result["problems"]:
            with open(self.path, "a") as out:
                out.write(json.dumps(result) + "\n")


class Pool:
    """Workers fed one case at a time; a dead or silent worker is replaced."""

    def __init__(self, jobs):
        self.root = scratch_dir("mnistconv-fuzz-pool-")
        self.count = 0
        self.workers = [self._spawn() for _ in range(jobs)]

    def _spawn(self):
        self.count += 1
        return Worker(self.count, self.root)

    def _lost(self, worker, why):
        spec = worker.spec
        log = Path(worker.log.name)
        worker.stop(kill=True)
        tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
        return dict(spec, what="(the worker's own record was lost with it)", args=[],
                    code=None, stderr=tail, problems=[why], peak_mb=None, seconds=None)

    def run(self, specs, log=None):
        pending = collections.deque(specs)
        results = _Logged(log)
        selector = selectors.DefaultSelector()
        for w in self.workers:
            selector.register(w.proc.stdout, selectors.EVENT_READ, w)
        while pending or any(w.spec is not None for w in self.workers):
            for w in self.workers:
                if w.ready and w.spec is None and pending:
                    w.send(pending.popleft())
            for key, _ in selector.select(timeout=1):
                w = key.data
                lines = w.lines()
                if lines is None:  # the worker died: a crash of the case it ran
                    selector.unregister(w.proc.stdout)
                    code = w.proc.poll()
                    if w.spec is not None:
                        results.append(self._lost(w, f"worker died (exit {code})"))
                    elif not w.ready:
                        # The log's tail says why (a missing extra: conftest skips).
                        raise AssertionError(
                            f"fuzz worker failed to start (exit {code}); see {w.log.name}:\n"
                            + Path(w.log.name).read_text(errors="replace")[-1500:])
                    else:
                        w.stop(kill=True)
                    self._replace(w, selector)
                    continue
                for reply in lines:
                    if "ready" in reply:
                        w.ready = True
                    else:
                        results.append(reply)
                        w.spec = None
            now = time.monotonic()
            for w in list(self.workers):
                limit = HARD_SECONDS if w.ready else START_SECONDS
                if (w.spec is not None or not w.ready) and now - w.since > limit:
                    selector.unregister(w.proc.stdout)
                    if w.spec is None:
                        raise AssertionError(f"fuzz worker did not start in {limit} s")
                    results.append(self._lost(w, f"hang: no answer in {limit} s, worker "
                                                 "killed"))
                    self._replace(w, selector)
        selector.close()
        return results

    def _replace(self, old, selector):
        new = self._spawn()
        self.workers[self.workers.index(old)] = new
        selector.register(new.proc.stdout, selectors.EVENT_READ, new)

    def close(self):
        for w in self.workers:
            w.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def pool():
    jobs = int(os.environ.get("MNISTCONV_FUZZ_JOBS", 0)) or \
        max(1, min(4, len(os.sched_getaffinity(0))))
    p = Pool(jobs)
    yield p
    p.close()


@pytest.fixture(scope="module")
def run_id(fuzz_cases):
    _, derandomize = fuzz_cases
    return os.environ.get("MNISTCONV_FUZZ_RUN") or ("short" if derandomize
                                                     else secrets.token_hex(4))


def describe(r):
    return (f"{r['reader']} {r['family']} #{r['index']} (run {r['run']}): {r['what']}\n"
            f"  mnistconv {' '.join(map(repr, r['args']))}\n"
            f"  exit {r['code']}, peak {r['peak_mb']} MB, {r['seconds']} s, "
            f"stderr {r['stderr'][-600:]!r}\n  " + "\n  ".join(p[-1500:] for p in r['problems'])
            + (f"\n  input saved to {r['saved']}" if r.get("saved") else "")
            + f"\n  replay: python tests/fuzz/worker.py replay {r['reader']} {r['family']} "
              f"{r['index']} {r['run']}")


def test_hostile_generators_cover_every_reader():
    """Every reader gets every family that applies to its format. The one that does not:
    Quick, Draw! has no labels (a file holds drawings only; its class is its file name's
    rank, which the names family covers) and no ratio (plain .npy files, memory-mapped,
    nothing compressed). The budget family (hostile_budget.py) goes where a codec other
    than the ratio family's deflate expands (xz, HDF5 filters, Parquet dictionaries, zstd)
    or images come as PNGs of any size; each case runs a view or a conversion."""
    every = ["arrayrecord", "caffe-hdf5", "caffe-lmdb", "cifar", "cifar-python", "gdmnist",
             "idx", "imagefolder", "kmnist", "medmnist", "npz", "parquet", "quickdraw",
             "svhn", "tfds", "tfrecord", "webdataset"]
    assert HOSTILE_READERS == every
    assert sorted(readers()) == every
    budget = {"arrayrecord", "caffe-hdf5", "gdmnist", "idx", "imagefolder", "parquet",
              "webdataset"}
    assert HOSTILE_FAMILIES == {
        **{fmt: ["names", "labels", "ratio", "listing", "links"]
           + (["budget"] if fmt in budget else []) for fmt in every if fmt != "quickdraw"},
        "quickdraw": ["names", "listing", "links"]}


@pytest.mark.parametrize("fmt", HOSTILE_READERS)
def test_hostile_inputs(fmt, fuzz_cases, pool, run_id):
    cases, derandomize = fuzz_cases
    n = SHORT if derandomize else cases
    families = HOSTILE_FAMILIES[fmt]
    specs = [{"reader": fmt, "family": families[i % len(families)], "index": i,
              "run": run_id} for i in range(n)]
    log = os.environ.get("MNISTCONV_FUZZ_LOG") or os.path.join(
        tempfile.gettempdir(), f"mnistconv-fuzz-{run_id}.jsonl")
    results = pool.run(specs, None if derandomize else log)
    assert len(results) == n
    failures = [r for r in results if r["problems"]]
    kinds = collections.Counter((r["family"], r["problems"][0].split(":")[0])
                                for r in failures)
    peak = max((r["peak_mb"] or 0) for r in results)
    slowest = max((r["seconds"] or 0) for r in results)
    print(f"{fmt}: {n} cases, {len(failures)} failed, peak {peak} MB, slowest {slowest} s")
    assert not failures, (
        f"{len(failures)} of {n} hostile {fmt} inputs misbehaved "
        f"({', '.join(f'{f}/{k}: {c}' for (f, k), c in kinds.items())}); "
        f"peak {peak} MB, slowest {slowest} s (all failures in {log}). First ones:\n"
        + "\n".join(describe(r) for r in failures[:12]))
