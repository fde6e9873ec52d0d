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
    """One OpenBLAS thread unless the user chose (mnistconv multiplies no matrices)."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def reuse_freed_memory():
    """Keep freed buffers in the heap, not given back and faulted in again each batch;
    but a buffer of half a piece's share of the budget or more gets a mapping of its
    own, given back when freed. Above that glibc's heap kept what large images' batches
    and PNGs had freed, fragmented, and let the process grow past the budget
    (benchmarks/README.md, bench_medmnist224); MNIST's buffers stay below it."""
    try:
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt  # glibc; elsewhere there is nothing to do
    except (OSError, AttributeError):
        return
    from ..io.budget import BATCH_BYTES, PIECES_IN_FLIGHT
    m_trim_threshold, m_mmap_threshold = -1, -3
    largest = BATCH_BYTES // PIECES_IN_FLIGHT // 2
    mallopt(m_mmap_threshold, largest)
    mallopt(m_trim_threshold, 2 * largest)  # (glibc's own ratio)


def is_the_program() -> bool:
    """True in the `mnistconv` program (console script or `python -m mnistconv`)."""
    argv = getattr(sys, "orig_argv", sys.argv)
    if sys.argv and os.path.basename(sys.argv[0]) == "mnistconv":
        return True
    return any(a == "-m" and b == "mnistconv" for a, b in zip(argv, argv[1:]))


def end_at_start_up(signum, frame):
    """SIGINT or SIGTERM before the CLI handles them: end as it would (130 or 143)."""
    if signum == signal.SIGINT:
        os.write(2, b"Interrupted.\n")
    os._exit(128 + signum)


def guard_start_up():
    """In the program only: end_at_start_up for SIGINT (unless ignored) and SIGTERM."""
    if not is_the_program():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, end_at_start_up)
