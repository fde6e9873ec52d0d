"""Every runner of a shard plan (mnistconv/plan.py, mnistconv/beam.py) writes the tree of
one local run at the place a local run writes it: the output named as write() names it
(`bm` and `bm/` a folder, `.gz` gzip), made absolute for Beam's workers without losing
the '/' that makes a name a folder, and nothing written in the working directory."""

import json
import os

import numpy as np
import pytest

import mnistconv
from helpers import tree_hashes
from plan_helpers import cli
from mnistconv.records import ArraySplit, Dataset

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# (output as the user names it, relative to an empty working directory; options)
CASES = {
    "tfrecord": ("m.tfrecord", ["--shards", "2"]),
    "tfrecord-gz": ("m.tfrecord.gz", ["--shards", "2"]),
    "tfrecord-tfds-folder": ("bm/", ["--to", "tfrecord", "--preset", "tfds", "--shards",
                                     "8", "--split", "train"]),
    "tfrecord-bare-name": ("bm", ["--to", "tfrecord", "--shards", "2"]),
    "parquet": ("hf", ["--to", "parquet", "--shards", "2"]),
    "tfds": ("tf", ["--to", "tfds", "--name", "digits", "--shards", "2"]),
    "webdataset": ("w/m.tar", ["--to", "webdataset", "--shard-size", "150"]),
}


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    rng = np.random.default_rng(7)
    splits = {name: ArraySplit(name, rng.integers(0, 256, (n, 28, 28), np.uint8),
                               rng.integers(0, 10, n).astype(np.uint8))
              for name, n in (("train", 240), ("test", 80))}
    path = tmp_path_factory.mktemp("src") / "small.npz"
    mnistconv.write(Dataset("npz", splits), str(path), "npz")
    return str(path)


def _all_files(folder):
    """Every file under folder, hidden ones too (the progress record, any leftover)."""
    return sorted(os.path.relpath(os.path.join(root, name), folder)
                  for root, _, names in os.walk(folder) for name in names)


def _record_name(dst):
    """The progress record beside the output (plan.record_path)."""
    folder, name = os.path.split(dst.rstrip("/"))
    return os.path.join(folder, f".{name}.mnistconv-plan.json")


def _run(src, top, dst, args, *extra):
    """`convert SRC ../<top>/DST ARGS EXTRA` run from an empty working directory, which
    must stay empty."""
    cwd = top.parent / "cwd"
    cwd.mkdir(exist_ok=True)
    r = cli("convert", src, os.path.join("..", top.name, dst), *args, *extra, "-q",
            cwd=cwd, check=0)
    assert os.listdir(cwd) == []
    return r


@pytest.mark.parametrize("case", list(CASES))
def test_every_runner_writes_the_local_tree_in_its_place(src, tmp_path, case):
    dst, args = CASES[case]
    _run(src, tmp_path / "local", dst, args)
    tree = tree_hashes(tmp_path / "local")
    assert _all_files(tmp_path / "local") == sorted(tree)
    listed = _run(src, tmp_path / "listed", dst, args, "--list-outputs")
    assert sorted(os.path.relpath(n, os.path.join("..", "listed"))
                  for n in listed.stdout.decode().splitlines()) == sorted(tree)
    plan = json.loads(_run(src, tmp_path / "planned", dst, args, "--plan").stdout)
    assert not (tmp_path / "planned").exists()
    record = _record_name(dst)
    shards = {os.path.normpath(os.path.join(os.path.dirname(record), t["shard"]))
              for t in plan["tasks"]}
    assert shards <= set(tree) and len(shards) == len(plan["tasks"])
    runs = {"plan": [["--num-tasks", "1", "--task-index", "0"]],
            "slices": [["--num-tasks", "2", "--task-index", i] for i in ("1", "0")]}
    pytest.importorskip("apache_beam")
    runs["beam"] = [["--runner", "beam"]]
    for runner, calls in runs.items():
        for extra in calls:
            _run(src, tmp_path / runner, dst, args, *extra)
        assert tree_hashes(tmp_path / runner) == tree, runner
        assert _all_files(tmp_path / runner) == sorted([*tree, record]), runner
