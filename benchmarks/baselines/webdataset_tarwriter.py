"""What a WebDataset user writes today: the IDX files read with gzip and numpy, then
webdataset.TarWriter fed one sample at a time ({"__key__", "png": the image array,
"cls": the label, "json": original index and class}), the image PNG-encoded by
webdataset's own encoder (Pillow). mtime 0, mode 0644 and empty user and group names,
as mnistconv writes, so the two tars can be compared byte for byte.
Usage: webdataset_tarwriter.py IMAGES.gz LABELS.gz OUT.tar"""
import gzip
import sys

import numpy as np
import webdataset as wds

images_path, labels_path, out = sys.argv[1:4]
with gzip.open(images_path) as f:
    images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
with gzip.open(labels_path) as f:
    labels = np.frombuffer(f.read(), np.uint8, offset=8)

with wds.TarWriter(out, user="", group="", mode=0o644, mtime=0) as sink:
    for i, (image, label) in enumerate(zip(images, labels)):
        sink.write({"__key__": f"{i:06d}", "png": image, "cls": int(label),
                    "json": {"index": i, "class": str(label)}})
