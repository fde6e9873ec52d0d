"""Every runner drives one write contract (mnistconv/formats/contract.py): a local run, --plan
(then its tasks), a task slice and --runner beam refuse every bad option with the same
line and exit code, writing nothing, and write the same tree in the same place."""

import json
import os

import numpy as np
import pytest

import mnistconv
from mnistconv.model.records import ArraySplit, Dataset
from helpers import ACCEPTED, refused_in_process, tree_hashes
from plan_helpers import cli

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

RUNNERS = {"local": [], "plan": ["--plan"],
           "slice-0": ["--num-tasks", "2", "--task-index", "0"],
           "slice-1": ["--num-tasks", "2", "--task-index", "1"],
           "beam": ["--runner", "beam"]}
COMMON = [["--workers", "0"], ["--workers", "-1"], ["--split", "nope"], ["--shards", "0"]]
JPEG = [["--jpeg-quality", q] for q in ("0", "101", "200")]
# (format, DST, a good run's options, [bad options])
FORMATS = {
    "tfrecord": ("bm/", ["--preset", "tfds", "--shards", "8", "--split", "train"],
                 COMMON + JPEG + [["--shards", "10001"]]),
    "parquet": ("hf/", ["--shards", "2"], COMMON + [["--row-group-size", "0"]]),
    "tfds": ("tf", ["--shards", "2"], COMMON + [["--version", "1.x"]]),
    "webdataset": ("w/m.tar", ["--shard-size", "1000"],
                   [c for c in COMMON if c[0] != "--shards"] + JPEG
                   + [["--shard-size", "0"]]),
}
BAD = [pytest.param(fmt, bad, id=f"{fmt}{''.join(bad)}")
       for fmt, (_, _, bads) in FORMATS.items() for bad in bads]


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    rng = np.random.default_rng(7)
    path = tmp_path_factory.mktemp("src") / "small.npz"
    mnistconv.write(Dataset("npz", {
        name: ArraySplit(name, rng.integers(0, 256, (n, 28, 28), np.uint8),
                         rng.integers(0, 10, n).astype(np.uint8))
        for name, n in (("train", 2300), ("test", 700))}), str(path), "npz")
    return str(path)




@pytest.mark.parametrize("runner", list(RUNNERS))
@pytest.mark.parametrize("fmt, bad", BAD)
def test_every_runner_refuses_a_bad_option_as_a_local_run_does(src, tmp_path, monkeypatch,
                                                                capsys, fmt, bad, runner):
    monkeypatch.chdir(tmp_path)
    dst, good, _ = FORMATS[fmt]
    args = ["convert", src, dst, "--to", fmt, *good, *bad]
    local = refused_in_process(args, capsys)
    assert local[0] == 2, local
    assert refused_in_process(args + RUNNERS[runner], capsys) == local
    assert os.listdir(tmp_path) == []  # nothing written, no progress record


def test_the_messages_are_the_options_own(src, tmp_path, monkeypatch, capsys):
    """The words every runner now shares are the option's declaration's."""
    monkeypatch.chdir(tmp_path)
    for runner in RUNNERS.values():
        assert refused_in_process(["convert", src, "p/", "--to", "tfrecord", "--jpeg-quality", "200",
                         *runner], capsys) == (
            2, f"Error: --jpeg-quality must be between 1 and 100, not 200; {ACCEPTED}")
        assert refused_in_process(["convert", src, "p/", "--to", "tfrecord", "--workers", "0",
                         *runner], capsys) == (
            2, f"Error: --workers must be between 1 and 64, not 0; {ACCEPTED}")


def _planned_tasks(src, dst, args, cwd):
    """--plan (which writes nothing), then each of its tasks as its own slice."""
    r = cli("convert", src, dst, *args, "--plan", cwd=cwd, check=0)
    assert os.listdir(cwd) == []
    tasks = json.loads(r.stdout)["tasks"]
    for task in tasks:
        cli("convert", src, dst, *args, "--num-tasks", len(tasks), "--task-index",
            task["task"], cwd=cwd, check=0)


@pytest.mark.parametrize("runner", ["plan", "slices", "beam"])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_runner_writes_the_local_tree_in_the_same_place(src, tmp_path, fmt, runner):
    """Run from the folder DST is relative to: names and bytes of everything written
    there (the plan's hidden progress record aside) are the local run's."""
    dst, good, _ = FORMATS[fmt]
    args = ["--to", fmt, *good]
    local, other = tmp_path / "local", tmp_path / runner
    local.mkdir()
    other.mkdir()
    cli("convert", src, dst, *args, cwd=local, check=0)
    if runner == "plan":
        _planned_tasks(src, dst, args, other)
    elif runner == "slices":
        for i in (1, 0):
            cli("convert", src, dst, *args, *RUNNERS[f"slice-{i}"], cwd=other, check=0)
    else:
        cli("convert", src, dst, *args, "--runner", "beam", cwd=other, check=0)
    expected = tree_hashes(local)
    assert expected and tree_hashes(other) == expected
    # The progress record is the only other file: inside a folder output, beside a file's.
    folder, name = os.path.split(dst.rstrip("/"))
    hidden = [os.path.relpath(os.path.join(root, n), other)
              for root, _, names in os.walk(other) for n in names if n.startswith(".")]
    inside = dst.endswith("/") or "." not in name
    assert hidden == [os.path.join(dst, ".mnistconv-plan.json") if inside
                      else os.path.join(folder, f".{name}.mnistconv-plan.json")]
