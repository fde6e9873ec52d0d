"""The recipe most people copy: the training set read with np.fromfile, the IDX header
skipped by slicing. Usage: numpy_fromfile.py DIR (uncompressed files)."""
import sys

import numpy as np

src = sys.argv[1]
with open(f"{src}/train-images-idx3-ubyte", "rb") as f:
    x_train = np.fromfile(f, np.uint8)[16:].reshape(-1, 28, 28)
with open(f"{src}/train-labels-idx1-ubyte", "rb") as f:
    y_train = np.fromfile(f, np.uint8)[8:]
print(x_train.shape, y_train.shape)
