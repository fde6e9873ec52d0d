"""What a WebDataset user writes today: the training set read with gzip and numpy
(common.load_arrays: the official MNIST .gz files, or with KIND cifar10 a
cifar-10-batches-bin folder), then webdataset.TarWriter fed one sample at a time
({"__key__", "png": the image array, "cls": the label, "json": original index and class
name}), the image PNG-encoded by webdataset's own encoder (Pillow). mtime 0, mode 0644
and empty user and group names, as mnistconv writes, so the two tars can be compared
byte for byte.
Usage: webdataset_tarwriter.py SOURCE OUT.tar [mnist|cifar10]"""
import sys
from pathlib import Path

import webdataset as wds

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402

src, out = sys.argv[1:3]
images, labels, names = common.load_arrays(sys.argv[3] if len(sys.argv) > 3 else "mnist", src)

with wds.TarWriter(out, user="", group="", mode=0o644, mtime=0) as sink:
    for i, (image, label) in enumerate(zip(images, labels)):
        sink.write({"__key__": f"{i:06d}", "png": image, "cls": int(label),
                    "json": {"index": i, "class": names[label]}})
