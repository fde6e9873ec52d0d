"""The Hugging Face recipe for MNIST to Parquet, as its documentation shows it: numpy
arrays into datasets.Dataset.from_dict, cast_column("image", Image()) and a ClassLabel,
then to_parquet. Reads the official .gz files with gzip and numpy.

    python hf_datasets_to_parquet.py MNIST_DIR OUT.parquet
"""

import gzip
import sys

import numpy as np
from datasets import ClassLabel, Dataset, Image

src, out = sys.argv[1], sys.argv[2]
with gzip.open(f"{src}/train-images-idx3-ubyte.gz") as f:
    images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
with gzip.open(f"{src}/train-labels-idx1-ubyte.gz") as f:
    labels = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
ds = Dataset.from_dict({"image": list(images), "label": labels})
ds = ds.cast_column("image", Image())
ds = ds.cast_column("label", ClassLabel(names=[str(i) for i in range(10)]))
ds.to_parquet(out)
