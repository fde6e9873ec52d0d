"""The fuzz harness: run one reader on one input under a time and memory bound and say
whether it behaved.

Behaving means: the whole dataset is read (every split's labels, every batch, a random
access gather) and the examples add up to the header's count, or a MnistconvError with a
one-line message is raised. Anything else (another exception, a hang past the watchdog,
an allocation past the memory budget) is a failure.

Cases run in-process so that hypothesis can shrink them quickly:
- time: a watchdog thread sends SIGUSR1 to the main thread after CASE_SECONDS; the
  handler raises Hang (a BaseException, so `except Exception` in the code under test
  cannot swallow it). A signal also interrupts a blocking open() of a FIFO.
- memory: RLIMIT_AS is lowered to the current address space plus MEMORY_BUDGET for the
  duration of the case. Address space rather than resident memory is limited on
  purpose: np.empty(size the header declares) costs no resident memory until touched,
  but it is still an allocation a header dictated, and it fails outright on machines
  without overcommit. Exceeding the budget shows up as MemoryError.
"""

import contextlib
import io
import os
import resource
import shutil
import signal
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np

import mnistconv
from mnistconv.errors import MnistconvError

CASE_SECONDS = float(os.environ.get("MNISTCONV_FUZZ_SECONDS", 10))
MEMORY_BUDGET = 1 << 30
FAILURES = Path(os.environ.get("MNISTCONV_FUZZ_SAVE",
                               Path(__file__).resolve().parents[2] / ".pytest_cache"
                               / "mnistconv-fuzz-failures"))


class Hang(BaseException):
    """The case ran past the watchdog."""


def _on_watchdog(signum, frame):
    raise Hang()


def _address_space():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


class Bounded:
    """Context manager: the body runs under the watchdog and the memory limit."""

    def __init__(self, seconds=CASE_SECONDS, budget=MEMORY_BUDGET):
        self.seconds, self.budget = seconds, budget

    def __enter__(self):
        self.old_handler = signal.signal(signal.SIGUSR1, _on_watchdog)
        main = threading.main_thread().ident
        self.timer = threading.Timer(self.seconds, signal.pthread_kill, (main, signal.SIGUSR1))
        self.timer.daemon = True
        self.timer.start()
        self.old_limit = resource.getrlimit(resource.RLIMIT_AS)
        limit = _address_space() + self.budget
        hard = self.old_limit[1]
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        return self

    def __exit__(self, *exc):
        resource.setrlimit(resource.RLIMIT_AS, self.old_limit)
        self.timer.cancel()
        self.timer.join()
        signal.signal(signal.SIGUSR1, self.old_handler)
        return False


def read_everything(path, fmt, gather=True):
    """What `info` and a conversion do with an input: every label, every batch, a gather.
    Returns the number of examples read. (A gather memory-maps the file or a spool of
    it: address space, but file-backed pages rather than memory.)"""
    dataset = mnistconv.read(path, fmt)
    total = 0
    for split in dataset.splits.values():
        h = split.header
        labels = split.labels()
        split.indices()
        seen = 0
        for batch in split.batches():
            n = len(batch.labels)
            assert len(batch.images) == n and len(batch.indices) == n, \
                f"split {split.name}: batch arrays disagree ({len(batch.images)} images, " \
                f"{n} labels, {len(batch.indices)} indices)"
            assert tuple(batch.images.shape[1:]) == tuple(h.shape), \
                f"split {split.name}: batch images {batch.images.shape[1:]}, header {h.shape}"
            seen += n
        assert seen == h.count, \
            f"split {split.name}: read {seen} examples without an error, header says {h.count}"
        assert len(labels) == h.count, \
            f"split {split.name}: {len(labels)} labels, header says {h.count}"
        if h.count and gather:
            split.take(np.array([h.count - 1, 0], dtype=np.int64))
        if hasattr(split, "check"):
            split.check()
        total += seen
    return total


def outcome(path, fmt):
    """('ok', count) or ('error', message), or raise AssertionError describing the
    misbehaviour. fmt None means detection by content, as the CLI does by default."""
    try:
        with Bounded():
            count = read_everything(path, fmt)
        return "ok", count
    except MnistconvError as e:
        message = str(e)
        assert message and "\n" not in message, f"error message not one line: {message!r}"
        return "error", message
    except Hang:
        raise AssertionError(f"reading {path} as {fmt} took longer than {CASE_SECONDS} s") from None
    except MemoryError:
        raise AssertionError(f"reading {path} as {fmt} allocated more than "
                             f"{MEMORY_BUDGET >> 20} MiB (address space)") from None
    except AssertionError:
        raise
    except BaseException as e:
        raise AssertionError(f"reading {path} as {fmt} raised {type(e).__name__}: {e}") \
            from e


# Warnings a Python process does not print by default (outside __main__).
QUIET_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                  ResourceWarning)


def cli_outcome(path, fmt):
    """`mnistconv info PATH --from FMT` in-process, as a user would run it: exit 0, or
    exit 1/2 with one 'Error: ' line on stderr; never a traceback, a hang, a MemoryError
    or a warning Python would print (a line in a CI log). Returns the exit code."""
    from mnistconv.cli import main
    args = ["info", str(path), "--json"] + (["--from", fmt] if fmt else [])
    err, out = io.StringIO(), io.StringIO()
    try:
        with Bounded(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(out), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            main(args)
        code = 0
    except SystemExit as e:
        code = e.code
    except Hang:
        raise AssertionError(f"mnistconv {' '.join(args)} took longer than {CASE_SECONDS} s") from None
    except MemoryError:
        raise AssertionError(f"mnistconv {' '.join(args)} allocated more than "
                             f"{MEMORY_BUDGET >> 20} MiB (address space)") from None
    except BaseException as e:
        raise AssertionError(f"mnistconv {' '.join(args)} raised {type(e).__name__}: {e}") \
            from e
    shown = [w for w in caught if not issubclass(w.category, QUIET_WARNINGS)]
    assert not shown, f"mnistconv {' '.join(args)} printed a warning: {shown[0].message}"
    message = err.getvalue()
    if code == 0:
        return code
    assert code in (1, 2), f"mnistconv {' '.join(args)}: exit {code}: {message}"
    assert message.startswith("Error: ") and message.count("\n") == 1, \
        f"mnistconv {' '.join(args)}: exit {code} with {message!r}"
    return code


def save_failure(case_path, fmt):
    """Keep the latest failing input (hypothesis replays the shrunk one last) for adding
    to tests/fuzz/corpus/."""
    dest = FAILURES / (fmt or "detect")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / Path(case_path).name
    if os.path.isdir(case_path):
        shutil.copytree(case_path, target, symlinks=True)
    elif os.path.isfile(case_path):
        shutil.copyfile(case_path, target)
    return target


def check_case(case_path, fmt, cli=False):
    """outcome() (and cli_outcome() when asked), saving the input when it misbehaves."""
    try:
        result = outcome(case_path, fmt)
        if cli:
            cli_outcome(case_path, fmt)
        return result
    except AssertionError as e:
        saved = save_failure(case_path, fmt)
        raise AssertionError(f"{e}\n(input saved to {saved})") from None


def scratch_dir(prefix):
    """A new temporary directory, on /dev/shm when there is one: a case creates and
    removes a handful of directories, and rmdir on an overlay /tmp costs ~4 ms each
    (measured: most of a small case's time), on tmpfs microseconds."""
    shm = "/dev/shm"
    base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    return tempfile.mkdtemp(prefix=prefix, dir=base)


class Workspace:
    """A fresh temporary directory per case (hypothesis forbids function-scoped
    fixtures across examples)."""

    def __enter__(self):
        self.path = Path(scratch_dir("mnistconv-fuzz-"))
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
        return False
