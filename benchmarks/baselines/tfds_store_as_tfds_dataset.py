"""TFDS' own API for data already in memory, as bench_tfds.py and bench_cifar.py run it:
tfds.dataset_builders.store_as_tfds_dataset with the FeaturesDict TFDS' own builder
declares (Image of the images' shape, ClassLabel of the class names), everything else at
its defaults. The arrays are read with gzip and numpy (common.load_arrays).

    python tfds_store_as_tfds_dataset.py SOURCE OUT_DIR KIND NAME SPLIT...

e.g. `... MNIST_GZ_DIR out mnist mnist train test`, `... CIFAR_BIN_DIR out cifar10
cifar10 train`.
"""

import sys
from pathlib import Path

import tensorflow_datasets as tfds

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402

src, out, kind, name, *splits = sys.argv[1:]
arrays = {}
for split in splits:
    x, y, names = common.load_arrays(kind, src, split)
    arrays[split] = (x.reshape(len(x), x.shape[1], x.shape[2], -1), y)
features = tfds.features.FeaturesDict({
    "image": tfds.features.Image(shape=arrays[splits[0]][0].shape[1:]),
    "label": tfds.features.ClassLabel(names=names)})
tfds.dataset_builders.store_as_tfds_dataset(
    name=name, version="1.0.0", features=features, data_dir=out,
    split_datasets={split: [(i, {"image": x[i], "label": int(y[i])})
                            for i in range(len(y))]
                    for split, (x, y) in arrays.items()})
