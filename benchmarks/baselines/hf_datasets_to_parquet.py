"""The Hugging Face recipe for MNIST to Parquet, as its documentation shows it: numpy
arrays into datasets.Dataset.from_dict, cast_column("image", Image()) and a ClassLabel,
then to_parquet. Reads the training set with gzip and numpy (common.load_arrays: the
official MNIST .gz files, or with KIND cifar10 a cifar-10-batches-bin folder).

    python hf_datasets_to_parquet.py SOURCE OUT.parquet [mnist|cifar10]
"""

import sys
from pathlib import Path

import numpy as np
from datasets import ClassLabel, Dataset, Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402

src, out = sys.argv[1], sys.argv[2]
images, labels, names = common.load_arrays(sys.argv[3] if len(sys.argv) > 3 else "mnist", src)
ds = Dataset.from_dict({"image": list(images), "label": labels.astype(np.int64)})
ds = ds.cast_column("image", Image())
ds = ds.cast_column("label", ClassLabel(names=names))
ds.to_parquet(out)
