"""The ten-line script people write instead of a converter: the four uncompressed IDX
files read with np.fromfile (header skipped by offset), reshaped, saved with np.savez
under Keras' keys. With --sha256 it also prints the output's SHA-256 afterwards, as a CI
job publishing the file would (mnistconv reports it for every file it writes).
Usage: numpy_idx_to_npz.py DIR OUT.npz [--sha256]"""
import sys

import numpy as np

src, out = sys.argv[1], sys.argv[2]


def load(name, offset, shape):
    return np.fromfile(f"{src}/{name}", np.uint8, offset=offset).reshape(shape)


np.savez(out,
         x_train=load("train-images-idx3-ubyte", 16, (-1, 28, 28)),
         y_train=load("train-labels-idx1-ubyte", 8, (-1,)),
         x_test=load("t10k-images-idx3-ubyte", 16, (-1, 28, 28)),
         y_test=load("t10k-labels-idx1-ubyte", 8, (-1,)))

if "--sha256" in sys.argv[3:]:
    import hashlib
    digest = hashlib.sha256()
    with open(out, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    print(digest.hexdigest(), out)
