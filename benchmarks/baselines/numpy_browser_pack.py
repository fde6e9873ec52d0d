"""Baseline: the browser-v1 pack written by hand with gzip + numpy, the way a one-off
build script does it (sequential level-9 gzip through gzip.GzipFile, no checks, no
manifest). Usage: numpy_browser_pack.py MNIST_GZ_DIR OUT_DIR"""

import gzip
import os
import struct
import sys

import numpy as np

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)


def load(name, offset):
    with gzip.open(os.path.join(src, name + ".gz")) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


x_train = load("train-images-idx3-ubyte", 16).reshape(-1, 28, 28)
y_train = load("train-labels-idx1-ubyte", 8)
x_test = load("t10k-images-idx3-ubyte", 16).reshape(-1, 28, 28)
y_test = load("t10k-labels-idx1-ubyte", 8)

draws = np.random.RandomState(20260909).randint(0, 2 ** 32, 59999, np.uint32).tolist()
perm = list(range(60000))
for i, r in enumerate(draws):
    j = i + r % (60000 - i)
    perm[i], perm[j] = perm[j], perm[i]
perm = np.array(perm)


def balanced(labels, order, k):
    return np.stack([order[labels[order] == c][:k] for c in range(10)], 1).reshape(-1)


splits = {
    "train": (x_train, y_train, balanced(y_train, perm[:50000], 1000)),
    "validation": (x_train, y_train, balanced(y_train, perm[50000:], 200)),
    "test": (x_test, y_test, balanced(y_test, np.arange(10000), 200)),
    "test-full": (x_test, y_test, np.arange(10000)),
}
for name, (x, y, idx) in splits.items():
    n = len(idx)
    label_offset = 32 + n * 784
    index_offset = (label_offset + n + 3) // 4 * 4
    data = (b"GDMNIST1" + struct.pack("<6I", n, 28, 28, 32, label_offset, index_offset)
            + x[idx].tobytes() + y[idx].tobytes() + bytes(index_offset - label_offset - n)
            + idx.astype("<u4").tobytes())
    with open(os.path.join(out, name + ".bin"), "wb") as f:
        f.write(data)
    with open(os.path.join(out, name + ".bin.gz"), "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw,
                          mtime=0) as f:
        f.write(data)
