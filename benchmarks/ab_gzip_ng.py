"""Can zlib-ng's threaded gzip writer (zlib_ng.gzip_ng_threaded, already a dependency)
replace mnistconv/io/parallel_gzip.py? Issue 39 allows it only if it keeps the same bytes
for any worker count. Three questions, on MNIST's images:

1. Write sizes: the test images through gzip_ng_threaded.open() in 4 write patterns x
   1, 2, 4 threads at levels 9 and 1, and through parallel_gzip the same ways. Its blocks follow the
   caller's write sizes (its io.BufferedWriter passes a large write straight through).
2. Worker count with the blocks fixed: Whole (below) feeds it whole 1 MiB blocks, the
   adapter a replacement would need. Slices of the training images (2 MiB and a random
   tail, every other tail starting with sparse noise) at levels 1..9, 1, 2 and 3
   threads: gzip_ng_threaded keeps one compressor per thread and reuses it after
   deflateReset, and what a compressor held before can change the bytes it writes
   (zlib-ng issue 2100), so the thread count may.
3. Time, interleaved rounds, CPU seconds of this process (one thread, so the figure
   holds on a busy machine): parallel_gzip as it is (CPython's zlib), Whole(zlib-ng's
   writer), and parallel_gzip with zlib-ng's deflate for each block (a fresh compressor
   per block, so nothing carries over). --processes adds whole `mnistconv convert DIR
   OUT --to idx --gzip` processes (GNU time, common.measure), parallel_gzip against
   Whole swapped into the IDX writer.

    python benchmarks/ab_gzip_ng.py [--cases N] [--levels 1,9] [--rounds N] [--processes]
"""

import argparse
import gzip
import hashlib
import io
import os
import random
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from mnistconv.io import parallel_gzip  # noqa: E402

MNIST = os.path.join(ROOT, "..", "shared", "data", "mnist")
BLOCK = parallel_gzip.BLOCK
PATTERNS = {"one call": [None], "16 then 1 MiB + 5": [16] + [BLOCK + 5] * 20,
            "3 MB, 7 B alternating": [3_000_000, 7], "784,000 each": [784_000]}


class Whole:
    """gzip_ng_threaded.open() fed whole BLOCK-byte blocks, whatever the write sizes."""

    def __init__(self, file, level=9, threads=None):
        from zlib_ng import gzip_ng_threaded
        sink = type("Sink", (), {"write": lambda _, d: file.write(d),
                                 "flush": lambda _: None})()
        self.out = gzip_ng_threaded.open(sink, "wb", compresslevel=level,
                                         threads=threads or os.cpu_count())
        self.pending = bytearray()

    def write(self, data):
        self.pending += data
        whole = len(self.pending) // BLOCK * BLOCK
        for at in range(0, whole, BLOCK):
            self.out.write(self.pending[at:at + BLOCK])
        del self.pending[:whole]
        return len(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.out.write(bytes(self.pending))
        self.out.close()


def ng_block(block, dictionary, level, last):
    """parallel_gzip.deflate_block with zlib-ng's deflate."""
    from zlib_ng import zlib_ng
    options = {"zdict": dictionary} if dictionary else {}
    c = zlib_ng.compressobj(level, zlib_ng.DEFLATED, -15, **options)
    return c.compress(block) + c.flush(zlib_ng.Z_FINISH if last else zlib_ng.Z_SYNC_FLUSH)


def write(make, data, steps=(None,)):
    out = io.BytesIO()
    with make(out) as f:
        at, k = 0, 0
        while at < len(data):
            step = steps[k % len(steps)] or len(data)
            f.write(data[at:at + step])
            at, k = at + step, k + 1
    blob = out.getvalue()
    assert gzip.decompress(blob) == data
    return blob


def threaded(threads, level):
    from zlib_ng import gzip_ng_threaded
    return lambda f: gzip_ng_threaded.open(f, "wb", compresslevel=level, threads=threads)


def write_sizes(data):
    print("1. distinct outputs over threads 1, 2, 4: for each write pattern, and over all")
    for level in (9, 1):
        for name, make in (("gzip_ng_threaded", threaded), ("parallel_gzip", lambda t, lv:
                           lambda f: parallel_gzip.ParallelGzipWriter(f, lv, t))):
            seen = {(t, p): hashlib.sha256(write(make(t, level), data, steps)).hexdigest()
                    for t in (1, 2, 4) for p, steps in PATTERNS.items()}
            each = [len({seen[t, p] for t in (1, 2, 4)}) for p in PATTERNS]
            print(f"   level {level} {name:17} {each}, {len(set(seen.values()))} in all")


def worker_counts(train, cases, levels):
    print(f"2. Whole blocks, threads 1, 2, 3: cases whose bytes differ ({cases} slices "
          "of the training images)")
    rng = random.Random(1)
    slices = []
    for k in range(cases):
        start = rng.randrange(len(train) - 3 * BLOCK)
        data = train[start:start + 2 * BLOCK + rng.randrange(1, BLOCK)]
        if k % 2:  # a tail that starts with 5,000 bytes of sparse noise
            noise = bytes(rng.randrange(256) if rng.random() < 0.3 else 0
                          for _ in range(5000))
            data = data[:2 * BLOCK] + noise + data[2 * BLOCK + 5000:]
        slices.append(data)
    for level in levels:
        differ = sum(len({write(lambda f: Whole(f, level, t), data) for t in (1, 2, 3)}) > 1
                     for data in slices)
        one = len({write(lambda f: parallel_gzip.ParallelGzipWriter(f, level, t), data)
                   for t in (1, 2, 3) for data in slices[:2]}) == 2
        print(f"   level {level}: zlib-ng {differ} of {cases}; parallel_gzip "
              f"{'one output per slice' if one else 'DIFFERS'}")


def timing(data, rounds):
    print(f"3. level 9, one thread, CPU s in this process, {rounds} interleaved rounds")
    real = parallel_gzip.deflate_block

    def with_block(deflate):
        def make(f):
            parallel_gzip.deflate_block = deflate
            return parallel_gzip.ParallelGzipWriter(f, 9, 1)
        return make
    sides = {"parallel_gzip (zlib)": with_block(real),
             "Whole(gzip_ng_threaded)": lambda f: Whole(f, 9, 1),
             "parallel_gzip, zlib-ng blocks": with_block(ng_block)}
    cpu = {name: [] for name in sides}
    sizes = {}
    for r in range(rounds):
        for name in list(sides)[r % 3:] + list(sides)[:r % 3]:
            start = time.process_time()
            sizes[name] = len(write(sides[name], data))
            cpu[name].append(time.process_time() - start)
    parallel_gzip.deflate_block = real
    for name, seconds in cpu.items():
        print(f"   {name:30} median {sorted(seconds)[len(seconds) // 2]:.2f} s "
              f"(min {min(seconds):.2f}), {sizes[name]:,} bytes")


def processes(rounds):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common
    common.require_gnu_time()
    swap = ("import sys; sys.argv[0] = 'mnistconv'; sys.path[:0] = [{!r}, {!r}]; "
            "import ab_gzip_ng; from mnistconv.formats.idx import format; "
            "format.ParallelGzipWriter = ab_gzip_ng.Whole; "
            "from mnistconv.cli import console; console()").format(
                ROOT, os.path.dirname(os.path.abspath(__file__)))
    with common.workdir() as work:
        raw = common.decompressed_copy(work / "raw")
        args = ["convert", str(raw), None, "--to", "idx", "--gzip", "-q"]
        outs = {"parallel_gzip": work / "a", "Whole(gzip_ng_threaded)": work / "b"}
        commands = {"parallel_gzip": common.mnistconv(*args[:2], outs["parallel_gzip"],
                                                      *args[3:]),
                    "Whole(gzip_ng_threaded)": [sys.executable, "-c", swap, *args[:2],
                                                str(outs["Whole(gzip_ng_threaded)"]),
                                                *args[3:]]}
        results = common.measure(commands, repeat=rounds,
                                 before=lambda name: common.remove(outs[name]))
        common.print_table("4. mnistconv convert DIR OUT --to idx --gzip (level 9), "
                           "whole processes", results, "parallel_gzip")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--levels", default="1,2,3,4,5,6,7,8,9")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--processes", action="store_true")
    o = parser.parse_args()
    if not os.path.isdir(MNIST):
        print(f"skipped: {MNIST} is not there")
        return 0
    test = gzip.open(os.path.join(MNIST, "t10k-images-idx3-ubyte.gz")).read()
    write_sizes(test)
    worker_counts(gzip.open(os.path.join(MNIST, "train-images-idx3-ubyte.gz")).read(),
                  o.cases, [int(n) for n in o.levels.split(",")])
    timing(test, o.rounds)
    if o.processes:
        processes(o.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
