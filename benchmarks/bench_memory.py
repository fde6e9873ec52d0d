"""Bounded memory on a huge input: 2 million images (1.57 GB of pixels) as synthetic IDX,
raw and gzip, converted to every writer that streams; peak RSS from GNU time.

Target (issue 6): under 400 MB peak for IDX, GDMNIST1 and TFRecord outputs (npz streams
its images too and is held to the same bound). GNU time reports the largest peak among
the process and the children it waited for (a maximum, not a sum): for TFRecord, whose
encoding workers are separate processes, the figure is the largest single process.

The images are the bundled sample's 1000 training digits, each copy shifted by a few
pixels so that no two consecutive blocks are identical (compressors cannot shortcut
the way they would on repeated bytes). BENCH_MEMORY_IMAGES changes the count.

    python benchmarks/bench_memory.py
"""

import os
import sys
import zlib
from pathlib import Path

import numpy as np

from common import REPO, Targets, mnistconv, remove, require_gnu_time, run_once, workdir

sys.path.insert(0, str(REPO))
import mnistconv as lib  # noqa: E402  (the checkout's library, for the sample and registry)

IMAGES = int(os.environ.get("BENCH_MEMORY_IMAGES", 2_000_000))
LIMIT_MB = 400
SAMPLE = REPO / "examples" / "data" / "mnist-sample"
CHUNK = 50_000


def idx_header(code, dims):
    return bytes([0, 0, code, len(dims)]) + b"".join(int(d).to_bytes(4, "big") for d in dims)


def build_input(folder: Path, gz: bool):
    """train-images/labels-idx*-ubyte(.gz) with IMAGES examples, written chunk by chunk
    (this script's own memory stays small too)."""
    folder.mkdir()
    split = lib.read(str(SAMPLE), "idx").splits["train"]
    base = np.concatenate([b.images for b in split.batches()])
    base_labels = split.labels()
    ext = ".gz" if gz else ""
    with open(folder / f"train-images-idx3-ubyte{ext}", "wb") as images, \
            open(folder / f"train-labels-idx1-ubyte{ext}", "wb") as labels:
        # Level 1: the input's compression level does not matter to the reader.
        zi = zlib.compressobj(1, zlib.DEFLATED, 31) if gz else None
        zl = zlib.compressobj(1, zlib.DEFLATED, 31) if gz else None

        def put(f, z, data):
            f.write(z.compress(data) if z else data)
        put(images, zi, idx_header(0x08, (IMAGES, 28, 28)))
        put(labels, zl, idx_header(0x08, (IMAGES,)))
        for start in range(0, IMAGES, CHUNK):
            n = min(CHUNK, IMAGES - start)
            index = np.arange(start, start + n)
            shifted = np.roll(base, (start // len(base)) % 7 - 3, axis=2)
            put(images, zi, shifted[index % len(base)].tobytes())
            put(labels, zl, base_labels[index % len(base)].tobytes())
        if gz:
            images.write(zi.flush())
            labels.write(zl.flush())
    return folder


def output_name(fmt):
    if fmt.output_is_directory:
        return "out"
    return "out" + (fmt.extensions[0] if fmt.extensions else "")


def main():
    require_gnu_time()
    writers = [f for f in lib.formats().values() if f.can_write]
    targets = Targets()
    print(f"{IMAGES:,} images of 28x28 ({IMAGES * 784 / 1e6:,.0f} MB of pixels); "
          f"writers: {', '.join(f.name for f in writers)}")
    rows = []
    with workdir("mnistconv-bench-memory-") as work:
        for gz in (False, True):
            kind = "gzip" if gz else "raw"
            source = build_input(work / f"input-{kind}", gz)
            size = sum(p.stat().st_size for p in source.iterdir())
            print(f"\ninput {kind}: {size / 1e6:,.0f} MB on disk", flush=True)
            for fmt in writers:
                target = work / output_name(fmt)
                wall, cpu, peak_kb = run_once(mnistconv("convert", source, target, "-q",
                                                        "--to", fmt.name))
                written = sum(p.stat().st_size for p in
                              ([target] if target.is_file() else target.rglob("*"))
                              if p.is_file())
                peak_mb = peak_kb * 1024 / 1e6
                rows.append((kind, fmt.name, wall, cpu, peak_mb, written))
                print(f"  {kind:>4} -> {fmt.name:<9} {wall:7.1f} s  cpu {cpu:7.1f} s  "
                      f"peak {peak_mb:6.1f} MB  wrote {written / 1e6:8,.0f} MB", flush=True)
                remove(target)
            remove(source)
    print("\nPeak memory (whole process tree, GNU time 'Maximum resident set size'):")
    for kind, name, wall, cpu, peak_mb, written in rows:
        targets.check(peak_mb < LIMIT_MB, f"{kind} IDX -> {name}: {peak_mb:.0f} MB peak "
                                          f"< {LIMIT_MB} MB for {IMAGES:,} images")
    targets.exit()


if __name__ == "__main__":
    main()
