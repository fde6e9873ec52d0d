"""Why CIFAR-10's TFRecord and WebDataset ratios cannot reach 0.8 of MNIST's (issue 37):
the deflate floor of a colour PNG.

bench_cifar holds mnistconv's CIFAR ratio (baseline time / mnistconv time) to 0.8 of
MNIST's. MNIST's TFRecord is JPEG, its WebDataset PNG of digits that are mostly zeros;
CIFAR's are PNGs of colour rows, whose deflate costs far more a byte. This bench measures,
in one process on the same generated images bench_cifar uses (common.write_cifar10_bin),
the zlib calls alone that any writer of these bytes must make:

- TFRecord: tf.image.encode_png's bytes (TFDS reads them; tests/test_tfds.py compares)
  are zlib level 6, memLevel 9, Z_FILTERED on libpng's filtered rows: the filtering is
  done first and left out of the figure, so it is zlib's time alone;
- WebDataset: codecs/png.py's unfiltered rows at zlib level 6;

and mnistconv's whole encoder for the same images beside it. It then takes the baselines'
CPU seconds from bench_cifar's last results (results.json) and prints the best CPU ratio a
writer could reach if it did nothing but those zlib calls (no start-up, no reading, no
framing), against 0.8 of MNIST's CPU ratio from the same run.

    python benchmarks/floor_colour_png.py          # 50,000 images, as bench_cifar
"""

import json
import os
import sys
import time
import zlib

import numpy as np

import common

COUNT = int(os.environ.get("FLOOR_COUNT", "50000"))
CIFAR_TRAIN = 50000  # the images bench_cifar's baselines wrote
ROUNDS = 3


def best_of(function):
    """The least CPU seconds of ROUNDS runs (process time: the machine's load aside)."""
    times = []
    for _ in range(ROUNDS):
        start = time.process_time()
        function()
        times.append(time.process_time() - start)
    return min(times)


def main():
    sys.path.insert(0, str(common.REPO))
    from mnistconv.codecs import png, tfpng

    # bench_cifar's CIFAR-10 training images (common.write_cifar10_bin: five batches).
    per = COUNT // 5
    images = np.concatenate([common.smooth_noise_images(per, common.CIFAR_SIDE, 1050 + i)
                             for i in range(5)])
    rows = np.concatenate([tfpng.filter_rows(images[i:i + 1000])
                           for i in range(0, COUNT, 1000)]).reshape(COUNT, -1)
    unfiltered = np.zeros((COUNT, 32, 1 + 96), np.uint8)
    unfiltered[:, :, 1:] = images.reshape(COUNT, 32, 96)
    unfiltered = unfiltered.reshape(COUNT, -1)
    bits = 12  # tfpng's window for 3,104 filtered bytes

    def tf_zlib():
        for r in rows:
            c = zlib.compressobj(6, zlib.DEFLATED, bits, 9, zlib.Z_FILTERED)
            c.compress(r)
            c.flush()

    def wds_zlib():
        for r in unfiltered:
            zlib.compress(r, png.LEVEL)

    figures = {
        "TFRecord": (best_of(tf_zlib), best_of(
            lambda: [tfpng.encode_batch(images[i:i + 1000]) for i in range(0, COUNT, 1000)])),
        "WebDataset": (best_of(wds_zlib), best_of(
            lambda: [png.encode_batch(images[i:i + 1000]) for i in range(0, COUNT, 1000)])),
    }

    results = json.loads((common.BENCH_DIR / "results.json").read_text())
    tables = results["benches"]["bench_cifar"]["tables"]

    def cpu(title, row):
        table = next(t for t in tables if t["title"].startswith(title))
        return float(table["rows"][row][3])
    names = {"TFRecord": "TFRecord", "WebDataset": "WebDataset"}
    print(f"{COUNT:,} CIFAR-like 32 x 32 x 3 images, CPU seconds (best of {ROUNDS}) for "
          f"bench_cifar's {CIFAR_TRAIN:,}")
    print("| format | zlib alone | mnistconv's encoder | CIFAR baseline CPU | best CPU ratio "
          "(zlib alone) | MNIST CPU ratio | 0.8 of it |")
    print("|---|---|---|---|---|---|---|")
    for fmt, (floor, encoder) in figures.items():
        floor, encoder = floor * CIFAR_TRAIN / COUNT, encoder * CIFAR_TRAIN / COUNT
        mnist_base, mnist_ours = cpu(f"{names[fmt]}, MNIST", 0), cpu(f"{names[fmt]}, MNIST", 1)
        cifar_base = cpu(f"{names[fmt]}, CIFAR-10", 0)
        mnist_ratio = mnist_base / mnist_ours
        print(f"| {fmt} | {floor:.2f} s ({floor / CIFAR_TRAIN * 1e6:.0f} us an image) | "
              f"{encoder:.2f} s | {cifar_base:.2f} s | {cifar_base / floor:.1f}x | "
              f"{mnist_ratio:.1f}x | {0.8 * mnist_ratio:.1f}x |")


if __name__ == "__main__":
    main()
