"""mnistconv.tf.dataset: tf.data for every TFRecord preset and TFDS directory mnistconv
writes (labels and pixels against the source), and the Keras example of
docs/formats/tfrecord.md: one real epoch on the bundled sample with the loss falling."""

import numpy as np
import pytest

import mnistconv
from helpers import SAMPLE, run, stderr_of

tf = pytest.importorskip("tensorflow")
import mnistconv.loaders.tf  # noqa: E402  (after the skip: it needs TensorFlow)


@pytest.fixture(scope="module")
def sample():
    ds = mnistconv.read(SAMPLE)
    return {name: (np.concatenate([b.images for b in s.batches()]), np.asarray(s.labels()))
            for name, s in ds.splits.items()}


def _collect(ds):
    images, labels = [], []
    for x, y in ds:
        images.append(x.numpy())
        labels.append(y.numpy())
    return np.concatenate(images), np.concatenate(labels)


@pytest.mark.parametrize("out, args, exact", [
    ("m.tfrecord", [], False),                                   # recipe: JPEG, one-hot
    ("m.tfrecord", ["--preset", "tfds"], True),
    ("m.tfrecord", ["--preset", "slim", "--shards", "3"], True),
    ("m.tfrecord.gz", ["--image-format", "raw"], True),
    ("m.tfrecord.zz", ["--preset", "tfds", "--label-format", "onehot"], True),
])
def test_every_tfrecord_preset(tmp_path, sample, out, args, exact):
    result = run("idx-to-tfrecord", SAMPLE, tmp_path / out, *args)
    assert result.returncode == 0, stderr_of(result)
    src = str(tmp_path / out)
    if "--shards" in args:
        src = str(tmp_path / "m-test.tfrecord-00000-of-00003")
    elif not out.endswith(".tfrecord"):
        src = str(tmp_path / out.replace("m.", "m-test."))
    else:
        src = str(tmp_path / out)
    images, labels = _collect(mnistconv.tf.dataset(src, "test", batch_size=64))
    assert images.shape == (200, 28, 28, 1) and images.dtype == np.uint8
    assert labels.dtype == np.int64 and np.array_equal(labels, sample["test"][1])
    if exact:
        assert np.array_equal(images[..., 0], sample["test"][0])
    else:
        assert np.abs(images[..., 0].astype(int) - sample["test"][0]).mean() < 2


def test_tfds_directory_and_shuffle(tmp_path, sample):
    assert run("idx-to-tfds", SAMPLE, tmp_path / "d", "--shards", "2").returncode == 0
    images, labels = _collect(mnistconv.tf.dataset(tmp_path / "d", "train",
                                                   batch_size=100))
    assert np.array_equal(images[..., 0], sample["train"][0])
    assert np.array_equal(labels, sample["train"][1])
    shuffled = _collect(mnistconv.tf.dataset(tmp_path / "d", "train", shuffle=1000,
                                             seed=1, batch_size=100, normalize=True))
    assert shuffled[0].dtype == np.float32 and shuffled[0].max() <= 1.0
    assert not np.array_equal(shuffled[1], labels)
    assert np.array_equal(np.sort(shuffled[1]), np.sort(labels))
    with pytest.raises(mnistconv.UsageError) as e:
        mnistconv.tf.dataset(tmp_path / "d", "validation")
    assert str(e.value).endswith("no split named validation; splits present: train, test")


def test_keras_trains_one_epoch_on_the_sample(tmp_path):
    assert run("idx-to-tfrecord", SAMPLE, tmp_path / "m.tfrecord").returncode == 0
    tf.keras.utils.set_random_seed(0)
    # The example of docs/formats/tfrecord.md.
    train = mnistconv.tf.dataset(tmp_path / "m-train.tfrecord", "train", normalize=True,
                                 shuffle=1000, seed=0, batch_size=32)
    model = tf.keras.Sequential([tf.keras.Input((28, 28, 1)), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(64, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    test = mnistconv.tf.dataset(tmp_path / "m-test.tfrecord", "test", normalize=True,
                                batch_size=100)
    before = model.evaluate(test, verbose=0)
    history = model.fit(train, epochs=1, verbose=0)
    after = model.evaluate(test, verbose=0)
    assert after < before * 0.7, (before, after, history.history)


@pytest.mark.parametrize("to, name", [("idx", "idx/"), ("npz", "s.npz"), ("parquet", "hf"),
                                      ("imagefolder", "tree")])
def test_any_format_mnistconv_reads(tmp_path, sample, to, name):
    # The formats tf.data has no reader for come through mnistconv's: the same pixels
    # and labels as the sample, H x W x 1, in order; batched and normalized alike.
    out = tmp_path / name
    r = run("convert", SAMPLE, out, "--to", to, "-q")
    assert r.returncode == 0, stderr_of(r)
    images, labels = sample["test"]
    got = list(mnistconv.tf.dataset(str(out), "test").as_numpy_iterator())
    assert np.array_equal(np.stack([g[0] for g in got]), images[..., None])
    assert [int(g[1]) for g in got] == labels.tolist()
    batch = next(iter(mnistconv.tf.dataset(str(out), "test", batch_size=64,
                                           normalize=True)))
    assert batch[0].shape == (64, 28, 28, 1) and batch[0].dtype.name == "float32"
    assert np.allclose(batch[0].numpy(), images[:64, :, :, None] / 255.0)
    with pytest.raises(mnistconv.UsageError, match="no split named dev"):
        mnistconv.tf.dataset(str(out), "dev")
