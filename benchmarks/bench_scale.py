"""Scale (issue 17): millions of 28x28 images to sharded TFRecord PNG and to WebDataset,
as whole processes (see common.py for how each figure is taken), against the same
conversions of the official 60000-image training set.

The input is the official training set repeated (image i is training image i mod 60000,
with its label), written as uncompressed IDX into a temporary directory under /tmp: the
same per-image work as the reference, so the per-core figures compare like with like.
It is written once, chunk by chunk (this script's own memory stays small), and grown in
place from one size to the next (more images appended, the count in both headers
rewritten): 5M images are 3.9 GB, written once rather than 1M + 2M + 5M. Every output is
deleted once measured (5M images are 15.4 GB of WebDataset tars: three 512-byte-aligned
members a sample, about 3 KB).

Commands, for N images:
    mnistconv convert IN OUT --to tfrecord --image-format png --shards ceil(N/100000)
    mnistconv convert IN OUT --to webdataset    (its default: 100000 samples a shard)
The 60000-image reference (one shard each) is the median of REPEAT interleaved runs after
a warm-up; each large size is one run (5M takes minutes), its page cache warm from the
writing.

Images per second per core is the count over the CPU time (user + system of the whole
process tree, GNU time): what one core converts, steady when other work shares the
machine. The wall-time figure, count / wall / cores, is printed beside it with the load.
Peak memory is the larger of GNU time's maximum RSS (the largest single process) and the
process tree's summed PSS, sampled every 0.2 s during the same run.

Targets (issue 17):
- TFRecord PNG shards at every size: at least 80% of the 60000-image per-core throughput;
- peak memory under 300 MB at every size, both formats;
- time linear in the count: the CPU time per million images at the largest size within
  10% of that at the smallest (the growth, and the wall-time growth, printed);
- memory flat in the count: the largest size's peak within 20% of the smallest's.

    python benchmarks/bench_scale.py                    # 1M, 2M, 5M (make bench)
    python benchmarks/bench_scale.py --sizes 100k,300k  # a quick run
BENCH_SCALE_SIZES sets the sizes when run through run.py.
"""

import argparse
import gzip
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

import common
from bench_tfrecord import _tree_pss_kb
from common import mnistconv

DEFAULT_SIZES = "1M,2M,5M"
REFERENCE = 60000
SHARD_IMAGES = 100_000  # TFRecord shards as WebDataset's default: 100000 images each
TARGET_SHARE = 0.80
TARGET_MB = 300
TARGET_GROWTH = 1.10
# "Flat in memory" (issue 17): the largest size's peak at most 20% above the smallest's
# (a few MB of sampling noise on a ~50 MB process pass; memory per image does not).
TARGET_MEMORY_GROWTH = 1.20
CHUNK = 60000  # images written at a time: one copy of the training set, 47 MB
FORMATS = {
    "tfrecord png": lambda n: ["--to", "tfrecord", "--image-format", "png", "--shards",
                               math.ceil(n / SHARD_IMAGES)],
    "webdataset": lambda n: ["--to", "webdataset"],
}
IMAGES = "train-images-idx3-ubyte"
LABELS = "train-labels-idx1-ubyte"


def parse_size(text):
    text = text.strip().lower()
    scale = {"k": 1000, "m": 1_000_000}.get(text[-1:], 1)
    number = float(text[:-1]) if scale > 1 else float(text)
    n = int(number * scale)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive count")
    return n


def sizes_arg(text):
    sizes = [parse_size(t) for t in text.split(",") if t.strip()]
    if not sizes or sizes != sorted(set(sizes)):
        raise argparse.ArgumentTypeError("give increasing counts, e.g. 1M,2M,5M or 100k,300k")
    return sizes


def official_train():
    gz = common.official_gz_dir()
    with gzip.open(gz / (IMAGES + ".gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16)
    with gzip.open(gz / (LABELS + ".gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return images.reshape(-1, 28 * 28), labels


def idx_header(dims):
    return bytes([0, 0, 0x08, len(dims)]) + b"".join(int(d).to_bytes(4, "big") for d in dims)


def grow_input(folder: Path, base, old, new):
    """Make folder's IDX pair hold `new` images (it holds `old`): append images
    old..new-1, then write the new count into both headers."""
    images, labels = base
    folder.mkdir(exist_ok=True)
    mode = "r+b" if old else "wb"
    with open(folder / IMAGES, mode) as fi, open(folder / LABELS, mode) as fl:
        fi.seek(0, os.SEEK_END)
        fl.seek(0, os.SEEK_END)
        if not old:
            fi.write(idx_header((new, 28, 28)))
            fl.write(idx_header((new,)))
        i = old
        while i < new:
            at = i % len(images)
            n = min(CHUNK, new - i, len(images) - at)
            fi.write(images[at:at + n].tobytes())
            fl.write(labels[at:at + n].tobytes())
            i += n
        fi.seek(0)
        fi.write(idx_header((new, 28, 28)))
        fl.seek(0)
        fl.write(idx_header((new,)))
    return folder


def outputs(work: Path, name):
    return sorted(work.glob(name + "*"))


def written_bytes(paths):
    return sum(p.stat().st_size for top in paths
               for p in ([top] if top.is_file() else top.rglob("*")) if p.is_file())


def run_sampled(cmd):
    """One run under GNU time with the process tree's PSS sampled alongside: (wall s,
    CPU s, peak MB = max(largest process's RSS, summed PSS of the tree))."""
    cmd = [common.GNU_TIME, "-v", *map(str, cmd)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=common.REPO, env=common.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    peak = [0]

    def sample():
        # 0.2 s, not bench_tfrecord's 10 ms: a run takes minutes here, and walking /proc
        # 100 times a second would take CPU from the run being measured.
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_pss_kb(proc.pid))
            time.sleep(0.2)
    sampler = threading.Thread(target=sample)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - started
    sampler.join()
    rss = common._MAX_RSS.search(err)
    if proc.returncode or not rss:
        raise common.CommandFailed(f"{' '.join(cmd[2:])} exited {proc.returncode}:\n"
                                   f"{err.split(chr(9) + 'Command being timed:')[0][-2000:]}")
    cpu = sum(map(float, common._CPU.findall(err)))
    return wall, cpu, max(int(rss.group(1)), peak[0]) * 1024 / common.MB


class Row:
    def __init__(self, fmt, n, wall, cpu, peak_mb, written, load):
        self.fmt, self.n, self.wall, self.cpu = fmt, n, wall, cpu
        self.peak_mb, self.written, self.load = peak_mb, written, load

    @property
    def per_core(self):
        return self.n / self.cpu

    @property
    def per_core_wall(self):
        return self.n / self.wall / os.cpu_count()

    def cells(self, ref=None):
        """The row as results.json keeps it: HEADER's columns, as text."""
        share = f"{self.per_core / ref.per_core:.0%}" if ref else "ref"
        return [self.fmt, f"{self.n:,}", f"{self.wall:.1f}", f"{self.cpu:.1f}",
                f"{self.per_core:,.0f}", share, f"{self.per_core_wall:,.0f}",
                f"{self.wall * 1e6 / self.n:.1f}", f"{self.cpu * 1e6 / self.n:.1f}",
                f"{self.peak_mb:.1f}", f"{self.written / 1e6:,.0f}", f"{self.load:.1f}"]

    def line(self, ref=None):
        share = f"{self.per_core / ref.per_core:6.0%}" if ref else "  ref "
        return (f"  {self.fmt:<13} {self.n:>10,} {self.wall:>8.1f} {self.cpu:>8.1f} "
                f"{self.per_core:>9,.0f} {share} {self.per_core_wall:>9,.0f} "
                f"{self.wall * 1e6 / self.n:>8.1f} {self.cpu * 1e6 / self.n:>8.1f} "
                f"{self.peak_mb:>7.1f} {self.written / 1e6:>9,.0f} {self.load:>5.1f}")


HEADER = (f"  {'format':<13} {'images':>10} {'wall s':>8} {'cpu s':>8} {'img/cpu-s':>9} "
          f"{'vs ref':>6} {'img/s/core':>9} {'wall s/M':>8} {'cpu s/M':>8} {'peak MB':>7} "
          f"{'wrote MB':>9} {'load':>5}")


def reference(work, base):
    """The 60000-image training set (uncompressed IDX, as the large inputs), median of
    REPEAT interleaved runs; the peak memory from one sampled run more."""
    source = grow_input(work / "input-60000", base, 0, REFERENCE)
    commands = {fmt: mnistconv("convert", source, work / f"ref-{fmt.split()[0]}", "-q",
                               *FORMATS[fmt](REFERENCE)) for fmt in FORMATS}

    def clean(fmt):
        for p in outputs(work, f"ref-{fmt.split()[0]}"):
            common.remove(p)
    results = common.measure(commands, before=clean)
    rows = {}
    for fmt, r in results.items():
        clean(fmt)
        sampled_peak = run_sampled(commands[fmt])[2]
        size = written_bytes(outputs(work, f"ref-{fmt.split()[0]}"))
        clean(fmt)
        rows[fmt] = Row(fmt, REFERENCE, r.seconds, r.cpu_seconds,
                        max(r.peak_mb, sampled_peak), size, max(r.load))
    common.remove(source)
    return rows


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=sizes_arg,
                        default=os.environ.get("BENCH_SCALE_SIZES", DEFAULT_SIZES),
                        help=f"image counts, increasing (default {DEFAULT_SIZES})")
    sizes = parser.parse_args(argv).sizes
    common.require_gnu_time()
    base = official_train()
    targets = common.Targets()
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; sizes "
          f"{', '.join(f'{n:,}' for n in sizes)} images (the official training set "
          f"repeated, uncompressed IDX); reference: the 60000-image set, median of "
          f"{common.REPEAT} runs; larger sizes one run each", flush=True)
    rows = {fmt: [] for fmt in FORMATS}
    # The temporary directory under /tmp (5M images: 3.9 GB in, up to 15.4 GB out).
    with common.workdir("mnistconv-bench-scale-") as work:
        ref = reference(work, base)
        print("\n" + HEADER)
        for fmt in FORMATS:
            print(ref[fmt].line(), flush=True)
        source, held = work / "input", 0
        for n in sizes:
            started = time.perf_counter()
            grow_input(source, base, held, n)
            held = n
            print(f"  (input of {n:,} images: {written_bytes([source]) / 1e6:,.0f} MB, "
                  f"written in {time.perf_counter() - started:.1f} s)", flush=True)
            for fmt in FORMATS:
                name = f"out-{fmt.split()[0]}"
                load = os.getloadavg()[0]
                wall, cpu, peak = run_sampled(mnistconv("convert", source, work / name, "-q",
                                                        *FORMATS[fmt](n)))
                row = Row(fmt, n, wall, cpu, peak, written_bytes(outputs(work, name)),
                          max(load, os.getloadavg()[0]))
                rows[fmt].append(row)
                print(row.line(ref[fmt]), flush=True)
                for p in outputs(work, name):
                    common.remove(p)
    common.record("table", title="The training set repeated, converted with --shards",
                  columns=["format", "images", "wall s", "cpu s", "img/cpu-s", "vs ref",
                           "img/s/core", "wall s/M", "cpu s/M", "peak MB", "wrote MB",
                           "load"],
                  rows=[ref[fmt].cells() for fmt in FORMATS] +
                  [row.cells(ref[fmt]) for fmt in FORMATS for row in rows[fmt]])
    print(f"  (img/cpu-s: images per CPU second, user + system of the whole process tree; "
          f"img/s/core: images / wall / {os.cpu_count()} cores; s/M: seconds per million; "
          f"load: the 1-minute load average, the higher of before and after)")

    print("\nTargets:")
    first = {fmt: r[0] for fmt, r in rows.items()}
    for row in rows["tfrecord png"]:
        share = row.per_core / ref["tfrecord png"].per_core
        targets.check(share >= TARGET_SHARE,
                      f"TFRecord PNG, {row.n:,} images: {row.per_core:,.0f} images per "
                      f"CPU-second = {share:.0%} of the 60000-image set's "
                      f"{ref['tfrecord png'].per_core:,.0f} (target: at least "
                      f"{TARGET_SHARE:.0%}; wall: {row.per_core_wall:,.0f} against "
                      f"{ref['tfrecord png'].per_core_wall:,.0f} images/s/core)")
    for fmt, fmt_rows in rows.items():
        for row in fmt_rows:
            targets.check(row.peak_mb < TARGET_MB,
                          f"{fmt}, {row.n:,} images: peak memory {row.peak_mb:.0f} MB "
                          f"(target: under {TARGET_MB} MB)")
        last = fmt_rows[-1]
        if last is first[fmt]:
            continue
        low, high = first[fmt], last
        growth = (high.cpu / high.n) / (low.cpu / low.n)
        wall_growth = (high.wall / high.n) / (low.wall / low.n)
        mem_growth = high.peak_mb / low.peak_mb
        targets.check(mem_growth <= TARGET_MEMORY_GROWTH,
                      f"{fmt}, {low.n:,} -> {high.n:,} images: peak memory "
                      f"{low.peak_mb:.0f} -> {high.peak_mb:.0f} MB, x{mem_growth:.2f} "
                      f"(target: at most x{TARGET_MEMORY_GROWTH:.2f}, flat)")
        targets.check(growth <= TARGET_GROWTH,
                      f"{fmt}, {low.n:,} -> {high.n:,} images: CPU time per million "
                      f"{low.cpu * 1e6 / low.n:.1f} s -> {high.cpu * 1e6 / high.n:.1f} s, "
                      f"x{growth:.2f} (target: at most x{TARGET_GROWTH:.2f}, linear); wall "
                      f"per million {low.wall * 1e6 / low.n:.1f} s -> "
                      f"{high.wall * 1e6 / high.n:.1f} s, x{wall_growth:.2f}")
    targets.exit()


if __name__ == "__main__":
    common.run(lambda: main(sys.argv[1:]))
