"""--force replaces the whole earlier set: after runs of one command with other shard
counts, compressions, layouts and side files (.idx indexes, SHA256SUMS, a card) on and
off, the output holds exactly the last run's files, SHA256SUMS lists exactly them, and
a user's files beside the output (and inside an output folder) are left alone."""

import hashlib
import json
import os

import pytest

from helpers import make_idx_dir, run, small_digits
from mnistconv.formats import registry

# Per writer: the output's name and runs (options) that change which files it writes.
RUNS = {
    "idx": ("out", [["--gzip"], [], ["--layout", "torchvision"], ["--gzip"]]),
    "npz": ("out.npz", [["--compress"], []]),
    "gdmnist": ("out", [["--gzip"], []]),
    "tfds": ("out", [["--shards", "3"], ["--shards", "2"],
                     ["--file-format", "array_record"], []]),
    "arrayrecord": ("out.array_record", [["--shards", "3"], ["--shards", "2"], []]),
    "parquet": ("out", [["--shards", "3"], ["--shards", "2"], ["--config", "other"], []]),
    "webdataset": ("out.tar", [["--shard-size", "7"], ["--shard-size", "11"], []]),
    "imagefolder": ("out", [["--image-format", "jpeg"], []]),
    "caffe-lmdb": ("out", [["--encoded"], []]),
    "caffe-hdf5": ("out", [["--compress"], []]),
    # The newcomer's sequence: shards and index files on and off.
    "tfrecord": ("out/mnist.tfrecord", [["--shards", "4", "--index-files"], ["--shards", "2"],
                                        ["--index-files"], ["--shards", "3", "--index-files"],
                                        ["--compression", "gzip"], []]),
}


def test_every_writer_is_covered():
    assert sorted(RUNS) == sorted(f.name for f in registry.writers())


def _files(folder):
    return {os.path.relpath(os.path.join(top, n), folder)
            for top, _, names in os.walk(folder) for n in names}


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("fmt", list(RUNS))
@pytest.mark.parametrize("side", ["sums-then-none", "none-then-sums"])
def test_force_leaves_exactly_the_last_runs_files(tmp_path, fmt, side):
    source = tmp_path / "in"
    make_idx_dir(source, *small_digits(30, seed=1))
    make_idx_dir(source, *small_digits(20, seed=2), split="test")
    work = tmp_path / "work"
    work.mkdir()
    dst, runs = RUNS[fmt]
    beside = work / os.path.dirname(dst) / "notes.txt" if os.path.dirname(dst) \
        else work / "notes.txt"
    beside.parent.mkdir(parents=True, exist_ok=True)
    beside.write_text("the user's\n")
    mine = {os.path.relpath(beside, work)}
    for n, options in enumerate(runs):
        last = n == len(runs) - 1
        # Side files on in turns, and on or off in the last run as `side` says.
        sides = (n % 2 == 0) != (side == "none-then-sums") if not last \
            else side == "none-then-sums"
        extra = ["--sha256sums", "--card"] if sides else []
        result = run("convert", source, dst, "--to", fmt, *options, *extra, "--json",
                     *(["--force"] if n else []), cwd=work)
        assert result.returncode == 0, (options, result.stderr)
        if n == 0 and os.path.isdir(work / dst):  # a user's file inside a folder output
            (work / dst / "keep.txt").write_text("also the user's\n")
            mine.add(os.path.join(dst, "keep.txt"))
    report = json.loads(result.stdout)
    expected = {os.path.relpath(os.path.join(work, f["path"]), work)
                for f in report["files"]}
    for key in ("sha256sums", "card"):
        if key in report:
            expected.add(os.path.relpath(os.path.join(work, report[key]), work))
    assert _files(work) - mine == expected, (fmt, sorted(_files(work) - mine - expected),
                                             sorted(expected - _files(work)))
    for name in mine:
        assert (work / name).read_text().endswith("user's\n")
    if "sha256sums" in report:
        sums = os.path.join(work, report["sha256sums"])
        folder = os.path.dirname(sums)
        listed = {}
        with open(sums, encoding="utf-8") as f:
            for line in f:
                digest, name = line.rstrip("\n").split("  ", 1)
                listed[os.path.relpath(os.path.join(folder, name), work)] = digest
        assert listed == {p: _sha256(work / p) for p in expected
                          if p != os.path.relpath(sums, work)
                          and not p.endswith(".card.html")}
