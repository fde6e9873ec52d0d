"""The ten-line script people write instead of a converter: the four uncompressed IDX
files read with np.fromfile (header skipped by offset), reshaped, saved with np.savez
under Keras' keys. Usage: numpy_idx_to_npz.py DIR OUT.npz"""
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
