"""A planned folder output keeps its progress record inside itself (issue 39):
`<folder>/.mnistconv-plan.json`, so a planned, sliced or resumed run writes nothing
outside the folder the user named; --resume and --force find it there, mnistconv's
readers pass over it, and a link in its place is refused as beside a file output."""

import json
import os

import numpy as np
import pytest

import mnistconv
from mnistconv.model.records import ArraySplit, Dataset
from helpers import tree_hashes
from plan_helpers import cli

RECORD = ".mnistconv-plan.json"
# (DST as the user names it, format options): a folder output of each kind of writer.
CASES = {"parquet": ("hf/", ["--to", "parquet", "--shards", "2", "--workers", "1"]),
         "tfds": ("tf", ["--to", "tfds", "--shards", "2", "--workers", "1"])}


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    rng = np.random.default_rng(11)
    path = tmp_path_factory.mktemp("src") / "small.npz"
    mnistconv.write(Dataset("npz", {
        name: ArraySplit(name, rng.integers(0, 256, (k, 28, 28), np.uint8),
                         rng.integers(0, 10, k).astype(np.uint8))
        for name, k in (("train", 90), ("test", 30))}), str(path), "npz")
    return str(path)


def _every_file(top):
    """Every file under top, hidden ones too, by its path from top."""
    return sorted(os.path.relpath(os.path.join(root, n), top)
                  for root, _, names in os.walk(top) for n in names)


def _reference(src, tmp_path, dst, args):
    """The tree a plain local run writes."""
    top = tmp_path / "local"
    top.mkdir()
    cli("convert", src, dst, *args, "-q", cwd=top, check=0)
    return tree_hashes(top)


@pytest.mark.parametrize("case", list(CASES))
def test_a_planned_folder_output_leaves_nothing_outside_it(src, tmp_path, case):
    dst, args = CASES[case]
    expected = _reference(src, tmp_path, dst, args)
    top = tmp_path / "planned"
    top.mkdir()
    for i in (1, 0):
        cli("convert", src, dst, *args, "--num-tasks", "2", "--task-index", i, "-q",
            cwd=top, check=0)
    name = dst.rstrip("/")
    # The parent folder holds the folder the user named and nothing else.
    assert os.listdir(top) == [name]
    assert _every_file(top) == sorted([*expected, f"{name}/{RECORD}"])
    assert tree_hashes(top) == expected
    record = json.loads((top / name / RECORD).read_text())
    assert record["finished"] is True and len(record["shards"]) == 4
    # The shards are named from the folder the record is in: the output's own.
    assert all((top / name / shard).is_file() for shard in record["shards"])

    # --resume finds the record inside, keeps every shard and writes nothing new.
    r = cli("convert", src, dst, *args, "--resume", cwd=top, check=0)
    assert "complete: every shard of plan" in r.stderr.decode()
    assert r.stderr.decode().count("(kept)") == 4 and "(written)" not in r.stderr.decode()
    assert os.listdir(top) == [name] and tree_hashes(top) == expected

    # mnistconv's readers pass over the hidden record: the same dataset, the same info.
    planned = mnistconv.read(str(top / name))
    local = mnistconv.read(str(tmp_path / "local" / name))
    assert list(planned.splits) == list(local.splits)
    for split in local.splits:
        a, b = planned.splits[split], local.splits[split]
        assert a.header.count == b.header.count > 0
        assert np.array_equal(a.take(np.arange(a.header.count)),
                              b.take(np.arange(b.header.count)))
        assert np.array_equal(a.labels(), b.labels())
    said = [json.loads(cli("info", name, "--json", cwd=where, check=0).stdout)
            for where in (top, tmp_path / "local")]
    assert said[0] == said[1]


def test_force_replaces_a_planned_folder_output_and_its_record(src, tmp_path):
    dst, args = CASES["parquet"]
    top = tmp_path / "planned"
    top.mkdir()
    cli("convert", src, dst, *args, "--resume", "-q", cwd=top, check=0)
    record = top / "hf" / RECORD
    first = json.loads(record.read_text())["plan_hash"]
    # Another plan (3 shards) is refused without --force, naming the record inside.
    other = [a if a != "2" else "3" for a in args]
    r = cli("convert", src, dst, *other, "--resume", cwd=top, check=2)
    assert r.stderr.decode().startswith(
        f"Error: {record}: holds the progress of another plan ({first[:12]}; ")
    # With --force it starts over: the earlier shards go, the record is the new plan's.
    cli("convert", src, dst, *other, "--resume", "--force", "-q", cwd=top, check=0)
    again = json.loads(record.read_text())
    assert again["plan_hash"] != first and again["finished"] is True
    assert tree_hashes(top) == _reference(src, tmp_path, dst, other)
    assert os.listdir(top) == ["hf"]
    # A plain --force run replaces the planned set: its record goes with it.
    cli("convert", src, dst, *args, "--force", "-q", cwd=top, check=0)
    assert not os.path.lexists(record) and os.listdir(top) == ["hf"]
    assert [f for f in _every_file(top) if os.path.basename(f).startswith(".")] == []


def test_a_link_in_place_of_the_record_inside_is_refused(src, tmp_path):
    dst, args = CASES["parquet"]
    top = tmp_path / "planned"
    (top / "hf").mkdir(parents=True)
    record = top / "hf" / RECORD
    record.symlink_to("/dev/zero")
    r = cli("convert", src, dst, *args, "--resume", cwd=top, check=2)
    assert r.stderr.decode() == (
        f"Error: {record}: is a symlink inside the output; mnistconv never reads an "
        "output back through a link; remove the link, or use --force to start over\n")
    cli("convert", src, dst, *args, "--resume", "--force", "-q", cwd=top, check=0)
    assert not record.is_symlink() and json.loads(record.read_text())["finished"] is True
