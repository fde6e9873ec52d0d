"""Process-wide tuning for the processes mnistconv owns (the command line, parallel.py's
forked workers), never a library caller's (DESIGN.md rule 11)."""

import os
import signal
import sys


def tune_command_line():
    """What the `mnistconv` program sets up before anything else."""
    single_blas_thread()
    reuse_freed_memory()


def single_blas_thread():
    """Ask numpy's OpenBLAS for one thread unless the user chose a number (before numpy
    is imported): mnistconv multiplies no matrices, and a thread per core makes
    `import numpy` dearer (benchmarks/README.md)."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def reuse_freed_memory():
    """Keep freed buffers in the heap for the next batch: conversions allocate the same
    few large buffers over and over, which glibc would hand back to the kernel and
    fault in again (benchmarks/README.md)."""
    try:
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt  # glibc; elsewhere there is nothing to do
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 64 << 20)
    mallopt(m_trim_threshold, 128 << 20)


def is_the_program() -> bool:
    """True in the `mnistconv` program (its console script, or `python -m mnistconv`),
    False in any other process that imports the package."""
    argv = getattr(sys, "orig_argv", sys.argv)
    if sys.argv and os.path.basename(sys.argv[0]) == "mnistconv":
        return True
    return any(a == "-m" and b == "mnistconv" for a, b in zip(argv, argv[1:]))


def end_at_start_up(signum, frame):
    """SIGINT or SIGTERM before the command line installs its own handling: nothing is
    written yet, so end at once as a later signal would (exit 130 and "Interrupted.",
    or 143), not with a traceback."""
    if signum == signal.SIGINT:
        os.write(2, b"Interrupted.\n")
    os._exit(128 + signum)


def guard_start_up():
    """In the program only, as the package is first imported: end_at_start_up for
    SIGINT (unless ignored, as for a background job) and SIGTERM, until cli.main
    installs its handlers."""
    if not is_the_program():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, end_at_start_up)
