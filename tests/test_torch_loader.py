"""mnistconv.torch.dataset: a torch DataLoader over npz, IDX and Parquet (and any other
format mnistconv reads) yields every sample with the right label; shard sets stream,
each DataLoader worker taking whole files; torch is imported only by mnistconv.loaders.torch."""

import subprocess
import sys

import numpy as np
import pytest

from helpers import REPO, make_idx_dir

torch = pytest.importorskip("torch")

import mnistconv  # noqa: E402
import mnistconv.loaders.torch as mtorch  # noqa: E402
from mnistconv.model.records import ArraySplit, Dataset  # noqa: E402


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, (1500, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 1500).astype(np.uint8)
    return images, labels


def _inputs(tmp_path, images, labels):
    ds = Dataset("t", {"train": ArraySplit("train", images, labels),
                       "test": ArraySplit("test", images[:100], labels[:100])})
    make_idx_dir(tmp_path / "idx", images, labels)
    mnistconv.write(ds, tmp_path / "m.npz")
    mnistconv.write(ds, tmp_path / "pq", "parquet")
    mnistconv.write(ds, tmp_path / "pq4", "parquet", shards=4, row_group_size=200)
    paths = {"idx": tmp_path / "idx", "npz": tmp_path / "m.npz", "parquet": tmp_path / "pq",
             "parquet shards": tmp_path / "pq4"}
    if "webdataset" in mnistconv.formats():  # another engineer's format, read generically
        mnistconv.write(Dataset("t", {"train": ds.splits["train"]}), tmp_path / "wds/",
                        "webdataset", shard_size=400)
        paths["webdataset"] = tmp_path / "wds"
    return paths


def _seen(loader):
    images, labels = [], []
    for x, y in loader:
        images.append(x)
        labels.append(y)
    return torch.cat(images), torch.cat(labels)


@pytest.mark.parametrize("kind", ["idx", "npz", "parquet", "parquet shards",
                                  "webdataset"])
@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_yields_every_sample_with_its_label(tmp_path, data, kind, workers):
    images, labels = data
    paths = _inputs(tmp_path, images, labels)
    if kind not in paths:
        pytest.skip(f"no {kind} format in this checkout")
    ds = mtorch.dataset(paths[kind], "train")
    streaming = kind in ("parquet shards", "webdataset")
    assert isinstance(ds, torch.utils.data.IterableDataset) == streaming
    assert len(ds) == 1500
    loader = torch.utils.data.DataLoader(ds, batch_size=128, num_workers=workers)
    x, y = _seen(loader)
    assert x.dtype == torch.float32 and x.shape == (1500, 1, 28, 28)
    assert y.dtype == torch.int64
    # Every sample once with its label: in order for one worker or a map-style dataset;
    # two workers streaming interleave whole files, so compare as sets of rows.
    want = torch.from_numpy(images).unsqueeze(1).float() / 255
    if streaming and workers:
        order = np.lexsort(np.c_[y.numpy(), (x.numpy() * 255).round().reshape(1500, -1)].T)
        ref = np.lexsort(np.c_[labels, images.reshape(1500, -1)].T)
        assert np.array_equal((x.numpy()[order] * 255).round().astype(np.uint8),
                              images[ref][:, None])
        assert np.array_equal(y.numpy()[order], labels[ref])
    else:
        assert torch.equal(x, want)
        assert torch.equal(y, torch.from_numpy(labels.astype(np.int64)))


def test_shuffled_training_loop_and_transforms(tmp_path, data):
    images, labels = data
    path = _inputs(tmp_path, images, labels)["parquet"]
    ds = mtorch.dataset(path, "test", transform=lambda p: torch.from_numpy(p.copy()),
                        target_transform=lambda label: label + 100)
    assert len(ds) == 100
    image, label = ds[3]
    assert image.dtype == torch.uint8 and torch.equal(image, torch.from_numpy(images[3]))
    assert label == int(labels[3]) + 100
    # The loop of docs/formats/parquet.md, a few steps.
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train = mtorch.dataset(path)
    seen = 0
    for x, y in torch.utils.data.DataLoader(train, batch_size=256, shuffle=True):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seen += len(y)
    assert seen == 1500


def test_errors_name_the_split(tmp_path, data):
    images, labels = data
    path = _inputs(tmp_path, images, labels)["npz"]
    with pytest.raises(mnistconv.UsageError, match="no split named validation; splits "
                                                   "present: train, test"):
        mtorch.dataset(path, "validation")


def test_import_mnistconv_never_loads_torch():
    code = ("import sys, mnistconv, mnistconv.formats.parquet\n"
            "mnistconv.read('examples/data/mnist-sample')\n"
            "assert 'torch' not in sys.modules and 'pyarrow' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True)
    assert r.returncode == 0, r.stderr
