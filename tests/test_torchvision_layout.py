"""IDX --layout torchvision: ROOT/<Dataset>/raw/<canonical files> that torchvision's
MNIST, FashionMNIST, KMNIST, EMNIST and QMNIST load with download=False; the default
layout's bytes unchanged."""

import gzip

import numpy as np
import pytest

import mnistconv
from mnistconv.model.records import ArraySplit, Dataset
from helpers import OFFICIAL_SHA256, SAMPLE, run, small_digits, stderr_of


def sample_dataset():
    def load(name, offset):
        return np.frombuffer(gzip.decompress((SAMPLE / f"{name}.gz").read_bytes()),
                             np.uint8, offset=offset)
    x, y = load("train-images-idx3-ubyte", 16).reshape(-1, 28, 28), \
        load("train-labels-idx1-ubyte", 8)
    xt, yt = load("t10k-images-idx3-ubyte", 16).reshape(-1, 28, 28), \
        load("t10k-labels-idx1-ubyte", 8)
    return Dataset("t", {"train": ArraySplit("train", x, y),
                         "test": ArraySplit("test", xt, yt)}), (x, y, xt, yt)


def tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_official_mnist_loads_in_torchvision_with_its_own_bytes(tmp_path, official_dir,
                                                                 official_arrays):
    datasets = pytest.importorskip("torchvision.datasets")
    r = run("convert", official_dir, tmp_path / "root", "--to", "idx", "--layout",
            "torchvision", "-q")
    assert r.returncode == 0, stderr_of(r)
    raw = tmp_path / "root" / "MNIST" / "raw"
    assert tree(tmp_path / "root") == sorted(f"MNIST/raw/{n}" for n in OFFICIAL_SHA256)
    import hashlib
    for name, sha in OFFICIAL_SHA256.items():
        assert hashlib.sha256((raw / name).read_bytes()).hexdigest() == sha
    for train, x, y in ((True, "x_train", "y_train"), (False, "x_test", "y_test")):
        ds = datasets.MNIST(tmp_path / "root", train=train, download=False)
        assert len(ds) == len(official_arrays[y])
        assert np.array_equal(ds.data.numpy(), official_arrays[x])
        assert np.array_equal(ds.targets.numpy(), official_arrays[y])
        image, label = ds[123]
        assert np.array_equal(np.asarray(image), official_arrays[x][123])
        assert label == official_arrays[y][123]


@pytest.mark.parametrize("name,cls,kwargs", [
    ("MNIST", "MNIST", {}), ("FashionMNIST", "FashionMNIST", {}),
    ("KMNIST", "KMNIST", {}), ("EMNIST-balanced", "EMNIST", {"split": "balanced"}),
    ("QMNIST", "QMNIST", {}),
])
def test_each_torchvision_dataset_loads_the_bundled_sample(tmp_path, name, cls, kwargs):
    datasets = pytest.importorskip("torchvision.datasets")
    ds, (x, y, xt, yt) = sample_dataset()
    files = mnistconv.write(ds, tmp_path / "root", "idx", layout="torchvision",
                            torchvision_dataset=name)
    folder = cls
    assert all(f.path.startswith(str(tmp_path / "root" / folder / "raw")) for f in files)
    for train, images, labels in ((True, x, y), (False, xt, yt)):
        loaded = getattr(datasets, cls)(tmp_path / "root", train=train, download=False,
                                        **kwargs)
        assert len(loaded) == len(labels)
        assert np.array_equal(loaded.data.numpy(), images)
        for i in (0, len(labels) - 1):
            image, label = loaded[i]
            assert np.array_equal(np.asarray(image), images[i]) and label == labels[i]
    if name == "QMNIST":
        back = mnistconv.read(tmp_path / "root" / "QMNIST" / "raw" /
                              "qmnist-test-images-idx3-ubyte",
                              labels=tmp_path / "root" / "QMNIST" / "raw" /
                              "qmnist-test-labels-idx2-int")
        assert back.splits  # IDX itself reads the files back


def test_default_layout_is_unchanged(tmp_path):
    r = run("convert", SAMPLE, tmp_path / "flat", "--to", "idx", "-q")
    assert r.returncode == 0, stderr_of(r)
    for name in ("train-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        assert (tmp_path / "flat" / name).read_bytes() == \
            gzip.decompress((SAMPLE / f"{name}.gz").read_bytes())
    r = run("convert", SAMPLE, tmp_path / "a.npz", "--layout", "nhwc", "-q")
    assert r.returncode == 0, stderr_of(r)  # npz's --layout still takes its own choices


def test_refusals_are_one_line_and_write_nothing(tmp_path):
    r = run("convert", SAMPLE, tmp_path / "root", "--to", "idx", "--layout", "torchvision",
            "--gzip")
    assert r.returncode == 2
    assert stderr_of(r).strip() == ("Error: --layout torchvision writes uncompressed files "
                                    "(what torchvision reads with download=False); drop "
                                    "--gzip")
    images, labels = small_digits(10)
    ds = Dataset("t", {"validation": ArraySplit("validation", images, labels)})
    with pytest.raises(mnistconv.UsageError) as e:
        mnistconv.write(ds, tmp_path / "root", "idx", layout="torchvision")
    assert str(e.value) == ("torchvision's MNIST has no split 'validation' (it reads train "
                            "and test); choose splits with --split, or rename one with "
                            "--split-name")
    wide = Dataset("t", {"train": ArraySplit("train", images, labels.astype(np.int16) + 300)})
    with pytest.raises(mnistconv.FormatError, match="are not classes 0..255"):
        mnistconv.write(wide, tmp_path / "root", "idx", layout="torchvision")
    r = run("convert", SAMPLE, tmp_path / "root", "--to", "idx", "--layout", "nhwc")
    assert r.returncode == 2 and "--layout must be one of flat, torchvision" in stderr_of(r)
    assert not (tmp_path / "root").exists()
