"""Can zlib-ng's threaded gzip writer (zlib_ng.gzip_ng_threaded, already a dependency)
replace mnistconv/io/parallel_gzip.py? Issue 39 asked for it if it keeps the same bytes for
any worker count. Two questions, answered on MNIST's test images (7,840,016 bytes):

1. Bytes: the same data written through gzip_ng_threaded.open() with 1, 2 and 4 threads
   and with different write sizes (one call; 16 bytes then 1 MiB + 5 at a time; 3 MB
   and 7 bytes alternating; 784,000 at a time), against parallel_gzip the same ways.
   An output whose bytes follow the caller's write sizes breaks "same input and
   options, same bytes" (DESIGN.md rule 5) for any writer that batches differently.
2. Time: each writer at level 9, interleaved A/B rounds in this one process (threads,
   so the figure is only meaningful on an otherwise quiet machine).

    python benchmarks/ab_gzip_ng.py [ROUNDS]
"""

import gzip
import hashlib
import io
import os
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from mnistconv.io.parallel_gzip import ParallelGzipWriter  # noqa: E402

SOURCE = os.path.join(ROOT, "..", "shared", "data", "mnist", "t10k-images-idx3-ubyte.gz")
PATTERNS = {"one call": [None], "16 then 1 MiB + 5": [16] + [(1 << 20) + 5] * 20,
            "3 MB, 7 B alternating": [3_000_000, 7], "784,000 each": [784_000]}


def write(make, data, steps):
    out = io.BytesIO()
    with make(out) as f:
        at, k = 0, 0
        while at < len(data):
            step = steps[k % len(steps)] or len(data)
            f.write(data[at:at + step])
            at, k = at + step, k + 1
    return out.getvalue()


def writers(threads):
    from zlib_ng import gzip_ng_threaded
    return {"gzip_ng_threaded": lambda f: gzip_ng_threaded.open(f, "wb", compresslevel=9,
                                                               threads=threads),
            "parallel_gzip": lambda f: ParallelGzipWriter(f, 9, threads)}


def main():
    if not os.path.exists(SOURCE):
        print(f"skipped: {SOURCE} is not there")
        return 0
    data = gzip.open(SOURCE).read()
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print("bytes: distinct outputs over threads 1, 2, 4 x write patterns")
    for name in ("gzip_ng_threaded", "parallel_gzip"):
        digests = {}
        for threads in (1, 2, 4):
            for pattern, steps in PATTERNS.items():
                blob = write(writers(threads)[name], data, steps)
                assert gzip.decompress(blob) == data
                digests[(threads, pattern)] = (hashlib.sha256(blob).hexdigest()[:12],
                                               len(blob))
        distinct = sorted(set(digests.values()))
        print(f"  {name:17} {len(distinct)} distinct: " +
              ", ".join(f"{d} ({n:,} B)" for d, n in distinct))
    print(f"time: level 9, 2 threads, one call, {rounds} interleaved rounds")
    times = {"gzip_ng_threaded": [], "parallel_gzip": []}
    for _ in range(rounds):
        for name, make in writers(2).items():
            start = time.perf_counter()
            write(make, data, [None])
            times[name].append(time.perf_counter() - start)
    for name, seconds in times.items():
        print(f"  {name:17} median {sorted(seconds)[len(seconds) // 2]:.2f} s "
              f"(all: {', '.join(f'{s:.2f}' for s in seconds)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
