"""Data for the TFRecord tests: digit-like images (black background, bright smooth
strokes, like MNIST) so JPEG errors are those of real digits, not of noise."""

import numpy as np

import mnistconv
from mnistconv import ArraySplit, Dataset


def digit_like(n, seed=0, size=28):
    rng = np.random.default_rng(seed)
    images = np.zeros((n, size, size), np.float64)
    yy, xx = np.mgrid[0:size, 0:size]
    for i in range(n):
        for _ in range(3):
            (y0, x0), (y1, x1) = rng.uniform(5, size - 5, (2, 2))
            # distance from each pixel to the segment (y0,x0)-(y1,x1)
            dy, dx = y1 - y0, x1 - x0
            t = np.clip(((yy - y0) * dy + (xx - x0) * dx) / max(dy * dy + dx * dx, 1e-9),
                        0, 1)
            d = np.hypot(yy - (y0 + t * dy), xx - (x0 + t * dx))
            images[i] = np.maximum(images[i], np.clip(2.2 - d, 0, 1))
    return (images * 255).round().astype(np.uint8)


def dataset(n=300, seed=0, splits=("train",), classes=10):
    out = {}
    for k, name in enumerate(splits):
        images = digit_like(n, seed + k)
        labels = (np.random.default_rng(seed + k).permutation(n) % classes).astype(np.uint8)
        out[name] = ArraySplit(name, images, labels, source=f"generated {name}")
    return Dataset("generated", out)


def write(ds, path, **options):
    result = mnistconv.write(ds, str(path), "tfrecord", **options)
    return result, result.stats


def measured(count, shards=1):
    """The records whose JPEG error the writer measures by default (a boolean mask),
    computed here from its documented rule: the first sixteenth (rounded up) of every
    chunk, chunks starting at every multiple of CHUNK and at every shard's start."""
    from mnistconv.formats.tfrecord.writer import CHUNK
    starts = set(range(0, count, CHUNK)) | {count * i // shards for i in range(shards)}
    starts = sorted(s for s in starts if s < count)
    mask = np.zeros(count, bool)
    for start, end in zip(starts, starts[1:] + [count]):
        mask[start:start - (-(end - start) // 16)] = True
    return mask


def error_stats(decoded, source, mask=None):
    """The JPEG error figures the writer reports, computed from another decoder's pixels
    over the records in mask (all of them when None)."""
    diff = np.abs(decoded.astype(int) - source)
    if mask is not None:
        diff = diff[mask]
    return {"jpeg_mean_abs_error": round(diff.mean(), 4),
            "jpeg_max_abs_error": int(diff.max()), "jpeg_error_records": len(diff)}


def framed_sizes(path):
    """(offset, framed length) of each record of a TFRecord file, walked from the bytes
    alone (independently of mnistconv)."""
    blob = open(path, "rb").read()
    pos, out = 0, []
    while pos < len(blob):
        length = int.from_bytes(blob[pos:pos + 8], "little")
        out.append((pos, 16 + length))
        pos += 16 + length
    assert pos == len(blob), f"{path}: the last record runs past the file's end"
    return out
