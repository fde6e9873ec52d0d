"""--list-outputs names a conversion's files from the input's headers (issue 39): for every
format mnistconv writes, the files a write then makes, with no image read and nothing
written; where the names follow the encoded bytes, one line saying so."""

import os

import numpy as np
import pytest

import mnistconv
from mnistconv.cli.convert import outputs_of
from mnistconv.formats import registry
from mnistconv.model.records import ArraySplit, Dataset
from helpers import refused_in_process


class NoPixels(ArraySplit):
    """A split whose images are never to be read: its labels and indices are there."""

    def batches(self, batch_size=None):
        raise AssertionError("--list-outputs read the images")

    def take(self, positions):
        raise AssertionError("--list-outputs read the images")


def _dataset(split_class):
    rng = np.random.default_rng(5)
    return Dataset("npz", {name: split_class(name, rng.integers(0, 256, (n, 28, 28), np.uint8),
                                             rng.integers(0, 10, n).astype(np.uint8))
                           for name, n in (("train", 30), ("test", 12))})


def _files(root):
    return sorted(os.path.join(folder, n) for folder, _, names in os.walk(root)
                  for n in names)


# Options that change which files a write makes (side files, more shards).
MORE = {"tfrecord": {"index_files": True, "shards": 2}, "parquet": {"shards": 3},
        "tfds": {"shards": 2}, "webdataset": {"shard_size": "7"},
        "imagefolder": {"image_format": "jpeg"}, "idx": {"gzip": True}}


@pytest.mark.parametrize("fmt, options", [
    pytest.param(f, options, id=f"{f.name}{'-' if options else ''}{'-'.join(options)}")
    for f in registry.writers() for options in ({}, MORE.get(f.name)) if options is not None])
def test_the_names_are_what_a_write_makes_and_no_image_is_read(tmp_path, fmt, options):
    # A folder for the formats that write one (and GDMNIST1, whose file holds one
    # split), else a file with the format's extension.
    dst = str(tmp_path / "out" / "x") + ("/" if fmt.output_is_directory or fmt.name in
                                         ("gdmnist",) or not fmt.extensions
                                         else fmt.extensions[0])
    names = outputs_of(_dataset(NoPixels), dst, fmt, dict(options))
    assert os.listdir(tmp_path) == []  # nothing written
    mnistconv.write(_dataset(ArraySplit), dst, fmt.name, **options)
    assert sorted(names) == _files(tmp_path) != []


@pytest.mark.parametrize("name", ["idx", "gdmnist"])
def test_a_names_file_written_beside_the_data_is_named_too(tmp_path, name):
    from mnistconv.codecs.classes import attach
    names = tuple("abcdefghij")
    dst = str(tmp_path / "out") + "/"
    listed = outputs_of(attach(_dataset(NoPixels), names, "test"), dst,
                        registry.get(name), {})
    assert os.listdir(tmp_path) == []
    mnistconv.write(attach(_dataset(ArraySplit), names, "test"), dst, name)
    assert sorted(listed) == _files(tmp_path) and listed[-1] == dst + "classes.txt"


def test_shards_cut_by_bytes_cannot_be_named_before_they_are_written(tmp_path, monkeypatch,
                                                                    capsys):
    src = tmp_path / "s.npz"
    mnistconv.write(_dataset(ArraySplit), str(src), "npz")
    monkeypatch.chdir(tmp_path)
    assert refused_in_process(["convert", str(src), "w/m.tar", "--shard-size", "1MB",
                               "--list-outputs"], capsys) == (
        2, "Error: --shard-size 1MB cuts WebDataset shards by bytes: how many there are "
           "follows every sample's encoded size, known only once written; give a number "
           "of samples per shard, e.g. --shard-size 10000")
    assert sorted(os.listdir(tmp_path)) == ["s.npz"]
    src = str(src)
    assert refused_in_process(["convert", src, "t/", "--to", "tfds", "--shard-size", "4KB",
                               "--list-outputs"], capsys) == (
        2, "Error: t/: split train gets 1 to 9 shards, depending on how "
           "well its images compress: their names are known only once written; give "
           "--shards N to name them")
    assert sorted(os.listdir(tmp_path)) == ["s.npz"]
