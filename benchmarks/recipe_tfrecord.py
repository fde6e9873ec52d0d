"""The users' current data-prep recipe, kept verbatim as the baseline for
bench_tfrecord.py: numpy reads the IDX files, OpenCV encodes each image as JPEG, and
TensorFlow builds and writes one tf.train.Example per image.

    python benchmarks/recipe_tfrecord.py IMAGES_IDX[.gz] LABELS_IDX[.gz] OUT.tfrecord
"""

import gzip
import sys

import cv2
import numpy as np
import tensorflow as tf


def read_idx(path, offset):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def main(images_path, labels_path, out_path):
    images = read_idx(images_path, 16).reshape(-1, 28, 28)
    labels = read_idx(labels_path, 8)
    with tf.io.TFRecordWriter(out_path) as writer:
        for img, label in zip(images, labels):
            ok, jpg = cv2.imencode(".jpg", img)
            onehot = np.zeros(10, np.int64)
            onehot[label] = 1
            example = tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpg.tobytes()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=onehot)),
            }))
            writer.write(example.SerializeToString())


if __name__ == "__main__":
    main(*sys.argv[1:4])
