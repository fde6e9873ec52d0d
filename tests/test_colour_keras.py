"""Keras learns CIFAR-10 from mnistconv's TFRecords as it does from the arrays (issue 37).

No internet: a small CIFAR-10 is built in the publisher's binary layout (five
data_batch_N.bin and test_batch.bin, records of a label byte then the R, G and B planes;
batches.meta.txt), with classes a CNN can learn (each class its own colour and stripe
direction, plus noise, from a fixed numpy seed). mnistconv converts it to TFRecord with
PNG images (--preset tfds), and the same tiny CNN, seeded and with deterministic ops, is
trained three times: from mnistconv.tf.dataset, from TensorFlow's own
TFRecordDataset + parse_single_example + decode_png, and from the arrays numpy reads at
the published offsets. The decoded tensors equal those arrays exactly, and the three
test accuracies agree within half a point, each well above chance.
"""

import numpy as np
import pytest

from helpers import run_main
from test_cifar import CIFAR10_NAMES, records

TRAIN_PER_BATCH, BATCHES, TEST = 400, 5, 500
RECORD = 1 + 3 * 32 * 32
# A half-point agreement between runs means little if the model learned nothing: it
# must at least double chance (10 classes).
LEARNED = 0.5


# Each class's colour: the same in every batch file and in the test batch.
PALETTE = np.random.default_rng(10).integers(40, 216, (10, 3))


def learnable_cifar(n, rng):
    """n 32x32x3 images whose class sets a base colour and a stripe direction, under
    noise strong enough that one pixel does not give the class away."""
    labels = rng.integers(0, 10, n).astype(np.uint8)
    rows, cols = np.mgrid[0:32, 0:32]
    stripes = np.stack([np.sin((rows * np.cos(a) + cols * np.sin(a)) / 2.0)
                        for a in np.linspace(0, np.pi, 10, endpoint=False)])
    images = PALETTE[labels][:, None, None, :] + 30 * stripes[labels][..., None] + \
        rng.normal(0, 40, (n, 32, 32, 3))
    return np.clip(np.rint(images), 0, 255).astype(np.uint8), labels


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keras") / "cifar-10-batches-bin"
    folder.mkdir()
    rng = np.random.default_rng(37)
    for b in range(1, BATCHES + 1):
        x, y = learnable_cifar(TRAIN_PER_BATCH, rng)
        (folder / f"data_batch_{b}.bin").write_bytes(records(x, y))
    x, y = learnable_cifar(TEST, rng)
    (folder / "test_batch.bin").write_bytes(records(x, y))
    (folder / "batches.meta.txt").write_text("\n".join(CIFAR10_NAMES) + "\n\n")
    return folder


def published_arrays(folder):
    """(images N x 32 x 32 x 3, labels) of the binary files, read with numpy alone at
    the published offsets: each 3073-byte record a label byte, then 1024 bytes of each
    of R, G and B."""
    def load(names):
        raw = np.concatenate([np.frombuffer((folder / n).read_bytes(), np.uint8)
                              .reshape(-1, RECORD) for n in names])
        return raw[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), raw[:, 0]
    return (load([f"data_batch_{b}.bin" for b in range(1, BATCHES + 1)]),
            load(["test_batch.bin"]))


def tensorflow_own(tf, path):
    """TensorFlow's own reading: TFRecordDataset, parse_single_example, decode_png."""
    spec = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}

    def decode(record):
        example = tf.io.parse_single_example(record, spec)
        return tf.io.decode_png(example["image"], channels=3), example["label"]
    return tf.data.TFRecordDataset(str(path)).map(decode)


def accuracy(tf, train, test):
    """Test accuracy of a tiny CNN after two epochs; the same weights, data order and
    ops on every call, so only the input pipeline differs."""
    tf.keras.utils.set_random_seed(7)
    model = tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)),
        tf.keras.layers.Rescaling(1 / 255),
        tf.keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
        tf.keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(10)])
    model.compile(tf.keras.optimizers.Adam(0.003),
                  tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(train.batch(50), epochs=2, verbose=0)
    return model.evaluate(test.batch(100), verbose=0)[1]


def as_arrays(ds):
    pairs = list(ds.as_numpy_iterator())
    return np.stack([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def test_keras_learns_cifar_from_mnistconvs_png_tfrecords_as_from_the_arrays(
        tmp_path, capsys, cifar):
    import tensorflow as tf
    import mnistconv.loaders.tf
    tf.config.experimental.enable_op_determinism()
    code, _, err = run_main(capsys, "convert", cifar, tmp_path / "c.tfrecord",
                            "--preset", "tfds")
    assert code == 0, err
    (x_train, y_train), (x_test, y_test) = published_arrays(cifar)
    assert len(y_train) == TRAIN_PER_BATCH * BATCHES and len(y_test) == TEST
    pipelines = {
        "mnistconv.tf.dataset": {s: mnistconv.tf.dataset(tmp_path / "c.tfrecord", s)
                                 for s in ("train", "test")},
        "TFRecordDataset": {s: tensorflow_own(tf, tmp_path / f"c-{s}.tfrecord")
                            for s in ("train", "test")},
    }
    for name, splits in pipelines.items():
        for split, (x, y) in (("train", (x_train, y_train)), ("test", (x_test, y_test))):
            images, labels = as_arrays(splits[split])
            assert images.dtype == np.uint8 and images.shape == x.shape, (name, split)
            assert np.array_equal(images, x), (name, split)
            assert np.array_equal(labels, y.astype(np.int64)), (name, split)
    results = {name: accuracy(tf, s["train"], s["test"]) for name, s in pipelines.items()}
    results["arrays"] = accuracy(tf, tf.data.Dataset.from_tensor_slices((x_train, y_train)),
                                 tf.data.Dataset.from_tensor_slices((x_test, y_test)))
    print("test accuracy:", results)
    for name, value in results.items():
        assert value >= LEARNED, (name, results)
        assert abs(value - results["arrays"]) <= 0.005, (name, results)
