"""One contract over the registry: every format that writes, each its own test id (a
missing extra skips only that format, naming it), is held to the same promises:

- a write-read round trip gives the exact images, labels and split names back;
- the same input gives the same bytes for any number of workers;
- an output is not replaced without force, is replaced whole with it, and a write that
  fails (a refusal, a source that breaks half-way) leaves nothing behind;
- an empty split reads back empty, or is refused before anything is written;
- a format that streams writes to stdout the bytes it writes to a file.

The formats come from mnistconv.formats.registry, so a new format is held to all of it by
registering; the only hand-written table is which write options are lossless.
"""

import os

import numpy as np
import pytest

import mnistconv
from mnistconv.formats import registry
from mnistconv.errors import FormatError, MissingDependency, MnistconvError
from mnistconv.model.records import ArraySplit, Dataset
from helpers import run, stderr_of, tree_hashes

WRITERS = [f.name for f in registry.writers()]
# Options under which a writer keeps pixels exactly (its default is lossy: JPEG, or
# scaled float pixels). Checked below to name real options.
LOSSLESS = {"tfrecord": {"image_format": "png"}, "caffe-hdf5": {"pixel_type": "uint8"}}


def test_lossless_options_are_real_options():
    for name, options in LOSSLESS.items():
        declared = {o.name: o for o in registry.get(name).write_options}
        for option, value in options.items():
            assert declared[option].check(value) == value


def target(root, fmt):
    """Where a write of several splits goes: a directory, or npz's one file."""
    return str(root / ("out.npz" if fmt.output_is_one_file else "out")) + \
        ("" if fmt.output_is_one_file else os.sep)


def write(dataset, path, name, **options):
    """mnistconv.write with the format's lossless options; a missing extra skips this
    format alone, naming it."""
    try:
        return mnistconv.write(dataset, path, name, **{**LOSSLESS.get(name, {}), **options})
    except MissingDependency as e:
        pytest.skip(f"{name}: {e}")


def digits(counts=(("train", 30), ("test", 10)), shape=(28, 28), seed=0):
    rng = np.random.default_rng(seed)
    return Dataset("test", {
        name: ArraySplit(name, rng.integers(0, 256, (n,) + shape, dtype=np.uint8),
                         (np.arange(n) % 10).astype(np.uint8))
        for name, n in counts})


def images_of(split):
    parts = [b.images for b in split.batches()]
    return np.concatenate(parts) if parts else np.zeros((0,), np.uint8)


def files_under(root):
    return sorted(os.path.relpath(os.path.join(folder, name), root)
                  for folder, _, names in os.walk(root) for name in names)


@pytest.mark.parametrize("name", WRITERS)
def test_round_trip_is_exact(tmp_path, name):
    fmt = registry.get(name)
    ds = digits()
    path = target(tmp_path, fmt)
    write(ds, path, name)
    back = mnistconv.read(path, name)
    assert list(back.splits) == list(ds.splits)
    for split_name, split in ds.splits.items():
        got = back.splits[split_name]
        assert got.header.count == split.header.count
        assert np.array_equal(images_of(got), split._images), split_name
        assert np.array_equal(np.asarray(got.labels()), split._labels), split_name


@pytest.mark.parametrize("name", [n for n in WRITERS if any(
    o.name == "workers" for o in registry.get(n).write_options)])
def test_same_bytes_for_any_number_of_workers(tmp_path, name):
    fmt = registry.get(name)
    ds = digits((("train", 300), ("test", 40)))
    hashes = []
    for workers in (1, 3):
        root = tmp_path / f"w{workers}"
        write(ds, target(root, fmt), name, workers=workers)
        hashes.append(tree_hashes(root))
    assert hashes[0] == hashes[1] and hashes[0]


class BreaksHalfWay(ArraySplit):
    """A source that fails after its first batch, as a damaged input does."""

    def batches(self, batch_size=None):
        for i, batch in enumerate(super().batches(5)):
            if i:
                raise FormatError("broken-source", "fails half-way on purpose")
            yield batch


@pytest.mark.parametrize("name", WRITERS)
def test_force_replaces_whole_and_a_failed_write_leaves_nothing(tmp_path, name):
    fmt = registry.get(name)
    ds = digits()
    path = target(tmp_path / "out", fmt)
    write(ds, path, name)
    first = tree_hashes(tmp_path / "out")
    with pytest.raises(MnistconvError):
        write(digits(seed=1), path, name)  # no force: refused, nothing touched
    assert tree_hashes(tmp_path / "out") == first
    write(digits(seed=1), path, name, force=True)
    assert tree_hashes(tmp_path / "out") != first
    write(ds, path, name, force=True)
    assert tree_hashes(tmp_path / "out") == first  # replaced whole: nothing of seed 1
    # A source that breaks half-way: the earlier output stays, a new one never appears.
    rng = np.random.default_rng(2)
    broken = Dataset("test", {"train": BreaksHalfWay(
        "train", rng.integers(0, 256, (20, 28, 28), np.uint8),
        (np.arange(20) % 10).astype(np.uint8))})
    with pytest.raises(FormatError, match="fails half-way on purpose"):
        write(broken, path, name, force=True)
    assert tree_hashes(tmp_path / "out") == first
    with pytest.raises(FormatError, match="fails half-way on purpose"):
        write(broken, target(tmp_path / "fresh", fmt), name)
    assert not (tmp_path / "fresh").exists() or files_under(tmp_path / "fresh") == []


@pytest.mark.parametrize("name", WRITERS)
def test_an_empty_split_reads_back_empty_or_is_refused_with_nothing_written(tmp_path,
                                                                           name):
    fmt = registry.get(name)
    ds = digits((("train", 0),))
    path = target(tmp_path / "out", fmt)
    try:
        write(ds, path, name)
    except MnistconvError:
        assert files_under(tmp_path) == []
        return
    back = mnistconv.read(path, name)
    assert {n: s.header.count for n, s in back.splits.items()} == {"train": 0}
    assert len(images_of(back.splits["train"])) == 0


@pytest.mark.parametrize("name", [n for n in WRITERS if registry.get(n).stdio])
def test_stdout_holds_the_bytes_of_a_file(tmp_path, name):
    fmt = registry.get(name)
    src = str(tmp_path / "src.npz")
    mnistconv.write(digits(), src, "npz")
    options = [f"--{o.replace('_', '-')}={v}" for o, v in LOSSLESS.get(name, {}).items()]
    out = str(tmp_path / f"file{fmt.extensions[0]}")
    r = run("convert", src, out, "--to", name, "--split", "train", "-q", *options)
    assert r.returncode == 0, stderr_of(r)
    streamed = run("convert", src, "-", "--to", name, "--split", "train", "-q", *options)
    assert streamed.returncode == 0, stderr_of(streamed)
    with open(out, "rb") as f:
        assert streamed.stdout == f.read()
