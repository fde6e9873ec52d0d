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


# Buffers glibc keeps in the heap for reuse, up to this size (larger ones get a mapping
# of their own, given back when freed, and faulted in again when made again): a batch
# (32 MiB) and its temporaries are made again every batch.
_heap_buffer = 64 << 20
# Images from this size (MedMNIST's 128 and 224 px in colour) are written in batches of
# varied sizes and PNGs of their own; kept in the heap, what they freed stayed there,
# fragmented, and the process grew past the budget (benchmarks/README.md).
LARGE_IMAGE_BYTES = 32 << 10
_tuned = False


def reuse_freed_memory():
    """Keep freed buffers up to _heap_buffer in the heap, not given back and faulted in
    again each batch (otherwise a batch's arrays are mapped and faulted anew, at a cost
    in system time that grows with the input: benchmarks/README.md)."""
    global _tuned
    try:
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt  # glibc; elsewhere there is nothing to do
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, _heap_buffer)
    mallopt(m_trim_threshold, 2 * _heap_buffer)  # (glibc's own ratio)
    _tuned = True


def fit_heap_to_images(image_bytes: int) -> None:
    """In the program, once a write's images are known: for large ones a buffer of half
    a piece's share of the budget or more gets its own mapping, given back when freed
    (bench_medmnist224); forked workers inherit it. Not in a library caller's process
    (rule 11)."""
    global _heap_buffer
    if not _tuned or image_bytes < LARGE_IMAGE_BYTES:
        return
    from ..io.budget import BATCH_BYTES, PIECES_IN_FLIGHT
    _heap_buffer = min(_heap_buffer, BATCH_BYTES // PIECES_IN_FLIGHT // 2)
    reuse_freed_memory()


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
