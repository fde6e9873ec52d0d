"""Not a baseline: the same read done through mnistconv's library API, so the comparison
with the recipes above is like for like (the training set into one array).
Usage: mnistconv_read.py DIR"""
import sys

import numpy as np

import mnistconv

train = mnistconv.read(sys.argv[1]).splits["train"]
x_train = np.concatenate([b.images for b in train.batches()])
y_train = train.labels()
print(x_train.shape, y_train.shape)
