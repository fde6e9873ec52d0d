"""The users' current data-prep recipe, kept as the baseline for bench_tfrecord.py and
bench_cifar.py: numpy reads the images, OpenCV encodes each image, and TensorFlow
builds and writes one tf.train.Example per image.

    python benchmarks/recipe_tfrecord.py IMAGES_IDX[.gz] LABELS_IDX[.gz] OUT.tfrecord
    python benchmarks/recipe_tfrecord.py --cifar10 CIFAR_BIN_DIR OUT.tfrecord

MNIST's images as JPEG; CIFAR-10's training batches (common.load_arrays) as PNG, each
turned to OpenCV's BGR order first, as a colour recipe must (cv2 takes BGR).
"""

import gzip
import sys
from pathlib import Path

import cv2
import numpy as np
import tensorflow as tf


def read_idx(path, offset):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def write_examples(images, labels, out_path, ext=".jpg"):
    """The recipe's loop: encode, one-hot label, Example, write."""
    with tf.io.TFRecordWriter(out_path) as writer:
        for img, label in zip(images, labels):
            if img.ndim == 3:
                img = cv2.cvtColor(img, cv2.COLOR_RGB2BGR)
            ok, jpg = cv2.imencode(ext, img)
            onehot = np.zeros(10, np.int64)
            onehot[label] = 1
            example = tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpg.tobytes()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=onehot)),
            }))
            writer.write(example.SerializeToString())


def main(images_path, labels_path, out_path):
    images = read_idx(images_path, 16).reshape(-1, 28, 28)
    labels = read_idx(labels_path, 8)
    write_examples(images, labels, out_path)


if __name__ == "__main__":
    if sys.argv[1] == "--cifar10":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import common
        images, labels, _ = common.load_arrays("cifar10", sys.argv[2])
        write_examples(images, labels, sys.argv[3], ".png")
    else:
        main(*sys.argv[1:4])
