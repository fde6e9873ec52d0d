"""Process-wide tuning for processes mnistconv owns: the command line (cli.console) and
the worker processes parallel.py forks when the caller asks for processes. The library
never calls this in a caller's process (DESIGN.md rule 11; tests/test_library_guest.py)."""

import os
import signal
import sys


def tune_command_line():
    """What the `mnistconv` program sets up before anything else: one BLAS thread
    (single_blas_thread) and malloc that keeps freed buffers (reuse_freed_memory)."""
    single_blas_thread()
    reuse_freed_memory()


def single_blas_thread():
    """Ask numpy's OpenBLAS for one thread, unless the user chose a number. mnistconv
    multiplies no matrices, and OpenBLAS starts a thread per core when numpy is
    imported: one thread makes `import numpy` cheaper (benchmarks/README.md), which
    every command pays before it starts. Only before numpy is imported; a no-op after."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def reuse_freed_memory():
    """Keep freed buffers in the heap for the next batch or chunk.

    Conversions allocate the same few large buffers over and over (a batch of pixels,
    a JPEG tile, joined records: megabytes each). glibc hands blocks that big straight
    back to the kernel when they are freed, so every batch page-faults them in again
    (benchmarks/README.md). Only processes mnistconv owns call
    this (the command line, parallel.py's forked workers), never a library caller's
    process."""
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
    """SIGINT or SIGTERM before the command line installs its own handling (imports
    take a second on a loaded machine): nothing is written yet, so end at once with
    what a later signal gives (exit 130 and "Interrupted.", or 143), where Python
    would print a KeyboardInterrupt traceback or die of SIGTERM."""
    if signum == signal.SIGINT:
        os.write(2, b"Interrupted.\n")
    os._exit(128 + signum)


def guard_start_up():
    """In the program only (is_the_program), as the package is first imported:
    end_at_start_up for SIGINT (unless the caller ignores it, as a shell does for a
    background job) and SIGTERM, until cli.main installs its handlers."""
    if not is_the_program():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, end_at_start_up)
