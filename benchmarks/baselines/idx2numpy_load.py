"""idx2numpy (PyPI `idx2numpy`): convert_from_file on the training images and labels.
Usage: idx2numpy_load.py DIR (uncompressed files)."""
import sys

import idx2numpy

src = sys.argv[1]
x_train = idx2numpy.convert_from_file(f"{src}/train-images-idx3-ubyte")
y_train = idx2numpy.convert_from_file(f"{src}/train-labels-idx1-ubyte")
print(x_train.shape, y_train.shape)
