"""Shard plans for the TFDS directory (formats/tfds/format.py (TfdsWrite)) and WebDataset
(formats/webdataset/writer.py): every task one by one, in reverse, as a job array,
through Beam's DirectRunner and resumed after kill -9 gives the bytes of one local run;
TFDS and the webdataset library read what a plan wrote."""

import hashlib
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

import mnistconv
from mnistconv.runners import plan as plans
from mnistconv.model.stream import RangeSplit
from helpers import tree_hashes
from plan_helpers import BEAM_MODES, beam_args, cli as _cli, in_order, job_array_slices, kill_and_resume, \
    last_error as _last_error, run_tasks
from mnistconv.model.records import ArraySplit, Dataset, Split

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TFDS = ["--to", "tfds", "--name", "digits", "--shards", "3"]
WDS = ["--to", "webdataset", "--shard-size", "500"]
NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def _dataset(train=2300, test=700, seed=0):
    rng = np.random.default_rng(seed)
    # Digit-like images (a noise square on black) compress as MNIST does.
    splits = {}
    for name, n in (("train", train), ("test", test)):
        images = np.zeros((n, 28, 28), np.uint8)
        images[:, 6:22, 8:20] = rng.integers(0, 256, (n, 16, 12), np.uint8)
        split = ArraySplit(name, images, rng.integers(0, 10, n).astype(np.uint8))
        split.header = split.header.with_(class_names=tuple(NAMES))
        splits[name] = split
    return Dataset("npz", splits)


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "small.npz"
    mnistconv.write(_dataset(), str(path), "npz")
    return str(path)


def _reference(src, root, out, args):
    r = _cli("convert", src, root / out, *args, "--json", check=0)
    return tree_hashes(root), json.loads(r.stdout)["stats"]


TFDS_FILES = ["tf/digits/1.0.0/" + n for n in (
    "dataset_info.json", "features.json", "label.labels.txt")] + [
    f"tf/digits/1.0.0/digits-{s}.tfrecord-0000{i}-of-00003"
    for s in ("test", "train") for i in range(3)]
WDS_FILES = [f"w/m-test-00000{i}.tar" for i in range(2)] + [
    f"w/m-train-00000{i}.tar" for i in range(5)]


@pytest.fixture(scope="module")
def tfds_reference(src, tmp_path_factory):
    tree, stats = _reference(src, tmp_path_factory.mktemp("tfref"), "tf", TFDS)
    assert sorted(tree) == sorted(TFDS_FILES)
    return tree, stats


@pytest.fixture(scope="module")
def wds_reference(src, tmp_path_factory):
    tree, stats = _reference(src, tmp_path_factory.mktemp("wref"), "w/m.tar", WDS)
    assert sorted(tree) == sorted(WDS_FILES)
    return tree, stats


def test_tfds_plan_cuts_as_tfds_and_writes_nothing(src, tmp_path):
    """TFDS' rounded bounds (766.7 -> 767), the shards under <name>/<version>/."""
    r = _cli("convert", src, tmp_path / "tf", *TFDS, "--plan", check=0)
    plan = json.loads(r.stdout)
    # (named from the output folder, where the progress record is)
    shard = "digits/1.0.0/digits-{}.tfrecord-0000{}-of-00003"
    assert [(t["split"], t["start"], t["stop"], t["shard"]) for t in plan["tasks"]] == [
        ("train", 0, 767, shard.format("train", 0)),
        ("train", 767, 1533, shard.format("train", 1)),
        ("train", 1533, 2300, shard.format("train", 2)),
        ("test", 0, 233, shard.format("test", 0)),
        ("test", 233, 467, shard.format("test", 1)),
        ("test", 467, 700, shard.format("test", 2))]
    assert plan["options"] == {"name": "digits", "shards": 3}
    assert plan["splits"]["train"]["class_names"] == NAMES
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_tfds_tasks_one_by_one_give_the_local_bytes(src, tfds_reference, tmp_path, order):
    tree, stats = tfds_reference
    out = tmp_path / "tf"

    def metadata_last(results):
        # The metadata comes last: until then no reader takes the folder for TFDS.
        assert (out / "digits/1.0.0/dataset_info.json").exists() == (len(results) == 6)
    results = run_tasks(src, out, TFDS, in_order(order), after_each=metadata_last)
    assert [r["finished"] for r in results] == [False] * 5 + [True]
    assert results[-1]["stats"] == stats == {"records": 3000, "shards": 6}
    assert tree_hashes(tmp_path) == tree
    record = json.loads((out / ".mnistconv-plan.json").read_text())
    assert record["finished"] is True and len(record["shards"]) == 6


def test_tfds_job_array_gives_the_local_bytes(src, tfds_reference, tmp_path):
    """--num-tasks 4 slices in any order."""
    out = tmp_path / "a" / "tf"
    slices = job_array_slices(src, out, TFDS, (3, 1, 0, 2))
    assert slices == {0: [0, 4], 1: [1, 5], 2: [2], 3: [3]}
    assert tree_hashes(tmp_path / "a") == tfds_reference[0]


@pytest.mark.parametrize("mode", BEAM_MODES)
def test_tfds_through_beam_gives_the_local_bytes(src, tfds_reference, tmp_path, mode):
    pytest.importorskip("apache_beam")
    out = tmp_path / "b" / "tf"
    r = _cli("convert", src, out, *TFDS, *beam_args(mode), "--json", check=0)
    result = json.loads(r.stdout)
    assert result["finished"] and result["stats"] == tfds_reference[1]
    assert tree_hashes(tmp_path / "b") == tfds_reference[0]


@pytest.mark.parametrize("args", [[], ["--file-format", "array_record", "--shards", "2"]],
                         ids=["tfds-rule", "array-record"])
def test_tfds_default_shard_count_and_array_record_plan(tmp_path, args):
    """Without --shards, TFDS' rule gives one shard whatever the images' encoding (the
    plan decides it from the header); ArrayRecord shards plan too. Library calls."""
    if args:
        pytest.importorskip("array_record")
    ds = _dataset(1500, 300, seed=1)
    opts = {"name": "digits", **({"file_format": "array_record", "shards": 2} if args else {})}
    local = mnistconv.write(ds, str(tmp_path / "a" / "tf"), "tfds", **opts)
    n = 2 if args else 1
    with plans.PlanRun(ds, str(tmp_path / "b" / "tf"), "tfds", dict(opts, workers=2)) as run:
        assert [t["stop"] for t in run.plan["tasks"]] == ([750, 1500, 150, 300] if args
                                                          else [1500, 300])
        for number in reversed(range(len(run.plan["tasks"]))):
            run.prepare()
            run.run_task(number)
        assert run.finish() == (True, [])
        assert run.totals() == local.stats == {"records": 1800, "shards": 2 * n}
    assert tree_hashes(tmp_path / "a") == tree_hashes(tmp_path / "b")


def test_tfds_shard_count_that_follows_the_encoding_is_refused(src, tmp_path):
    r = _cli("convert", src, tmp_path / "tf", "--to", "tfds", "--shard-size", "64KiB",
             "--plan", check=2)
    assert _last_error(r) == (
        f"Error: {tmp_path / 'tf'}/: split train: --shard-size 64KiB gives 3 to 40 shards "
        "for 2,300 images, depending on how well they compress, so a plan cannot be cut "
        "from the header; give --shards N to plan it")
    assert os.listdir(tmp_path) == []


_READ_TFDS = """
import hashlib, json, sys
import numpy as np
import tensorflow_datasets as tfds
builder = tfds.builder_from_directory(sys.argv[1])
config = tfds.ReadConfig(interleave_cycle_length=1)
out = {"names": builder.info.features["label"].names}
for split in ("train", "test"):
    images, labels = [], []
    for image, label in tfds.as_numpy(builder.as_dataset(
            split=split, as_supervised=True, shuffle_files=False, read_config=config)):
        images.append(image[..., 0])
        labels.append(label)
    out[split] = [hashlib.sha256(np.stack(images).tobytes()).hexdigest(),
                  hashlib.sha256(np.array(labels, np.uint8).tobytes()).hexdigest(),
                  builder.info.splits[split].shard_lengths]
print(json.dumps(out))
"""


def test_tfds_reads_a_planned_directory(src, tmp_path):
    """tfds.builder_from_directory reads the set written task by task (in reverse)."""
    pytest.importorskip("tensorflow_datasets")
    out = tmp_path / "tf"
    for i in range(5, -1, -1):
        _cli("convert", src, out, *TFDS, "--num-tasks", 6, "--task-index", i, "-q",
             check=0)
    r = subprocess.run([sys.executable, "-c", _READ_TFDS, str(out / "digits/1.0.0")],
                       capture_output=True)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    read = json.loads(r.stdout.decode().strip().splitlines()[-1])
    ds = _dataset()
    sha = lambda a: hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()  # noqa
    assert read == {"names": NAMES, **{
        name: [sha(s.take(np.arange(s.header.count))), sha(s.labels()), lengths]
        for (name, s), lengths in zip(ds.splits.items(),
                                      ([767, 766, 767], [233, 234, 233]))}}


# --- WebDataset ---

def test_webdataset_plan_cuts_by_samples(src, tmp_path):
    r = _cli("convert", src, tmp_path / "w" / "m.tar", *WDS, "--plan", check=0)
    plan = json.loads(r.stdout)
    assert [(t["split"], t["start"], t["stop"], t["shard"]) for t in plan["tasks"]] == [
        ("train", 0, 500, "m-train-000000.tar"), ("train", 500, 1000, "m-train-000001.tar"),
        ("train", 1000, 1500, "m-train-000002.tar"),
        ("train", 1500, 2000, "m-train-000003.tar"),
        ("train", 2000, 2300, "m-train-000004.tar"), ("test", 0, 500, "m-test-000000.tar"),
        ("test", 500, 700, "m-test-000001.tar")]
    assert plan["options"] == {"shard_size": "500"}
    assert not (tmp_path / "w").exists()


def test_webdataset_tasks_in_reverse_give_the_local_bytes(src, wds_reference, tmp_path):
    tree, stats = wds_reference
    out = tmp_path / "a" / "w" / "m.tar"
    results = run_tasks(src, out, WDS, in_order("reverse", 7), num_tasks=7)
    assert [r["finished"] for r in results] == [False] * 6 + [True]
    assert results[-1]["stats"] == stats == {"samples": 3000, "shards": 7}
    assert tree_hashes(tmp_path / "a") == tree
    assert (tmp_path / "a" / "w" / ".m.tar.mnistconv-plan.json").is_file()


@pytest.mark.parametrize("mode", BEAM_MODES)
def test_webdataset_through_beam_gives_the_local_bytes(src, wds_reference, tmp_path,
                                                        mode):
    tree, stats = wds_reference
    pytest.importorskip("apache_beam")
    r = _cli("convert", src, tmp_path / "b" / "w" / "m.tar", *WDS, *beam_args(mode),
             "--json", check=0)
    assert json.loads(r.stdout)["stats"] == stats
    assert tree_hashes(tmp_path / "b") == tree


def test_webdataset_default_size_and_an_empty_split(tmp_path):
    """The default 100000 samples a shard, a directory output; an empty split gets its
    one empty shard, as write() gives it."""
    ds = _dataset(1200, 0, seed=3)
    local = mnistconv.write(ds, str(tmp_path / "a") + "/", "webdataset")
    result = plans.run(ds, str(tmp_path / "b") + "/", "webdataset", {"workers": 2})
    assert result["finished"] and result["stats"] == local.stats == {"samples": 1200,
                                                                      "shards": 2}
    assert sorted(tree_hashes(tmp_path / "b")) == ["b-test-000000.tar", "b-train-000000.tar"]
    assert tree_hashes(tmp_path / "a") == {n.replace("b-", "a-"): h
                                     for n, h in tree_hashes(tmp_path / "b").items()}


def test_webdataset_library_reads_a_planned_set(src, tmp_path):
    wds = pytest.importorskip("webdataset")
    out = tmp_path / "w" / "m.tar"
    for i in (4, 0, 6, 2, 1, 5, 3):
        _cli("convert", src, out, *WDS, "--num-tasks", 7, "--task-index", i, "-q",
             check=0)
    ds = _dataset()
    for name, shards in (("train", "{000000..000004}"), ("test", "{000000..000001}")):
        samples = list(wds.WebDataset(str(tmp_path / "w" / f"m-{name}-{shards}.tar"),
                                      shardshuffle=False).decode("l8"))
        split = ds.splits[name]
        assert [s["__key__"] for s in samples] == [f"{i:06d}" for i in
                                                   range(split.header.count)]
        assert np.array_equal(np.stack([s["png"] for s in samples]),
                              split.take(np.arange(split.header.count)))
        assert [s["cls"] for s in samples] == split.labels().tolist()
        assert [s["json"] for s in samples] == [
            {"index": i, "class": NAMES[y]} for i, y in enumerate(split.labels().tolist())]


def test_webdataset_cut_by_bytes_is_refused(src, tmp_path):
    r = _cli("convert", src, tmp_path / "m.tar", "--to", "webdataset", "--shard-size",
             "100MB", "--resume", check=2)
    assert _last_error(r) == (
        "Error: --shard-size 100MB cuts WebDataset shards by bytes: where each starts "
        "follows every sample's encoded size, so they cannot be planned; plan with a "
        "number of samples per shard, e.g. --shard-size 10000")
    assert os.listdir(tmp_path) == []


# --- kill -9 and --resume, both formats ---

@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "big.npz"
    mnistconv.write(_dataset(12000, 3000, seed=2), str(path), "npz")
    return path


@pytest.mark.parametrize("fmt", ["tfds", "webdataset"])
def test_resume_after_kill_9_at_several_points(big, tmp_path, fmt):
    if fmt == "tfds":
        opts = ["--to", "tfds", "--shards", "6", "--workers", "1"]
        out_name, record_name = "tf", "tf/.mnistconv-plan.json"
    else:
        opts = ["--to", "webdataset", "--shard-size", "1500", "--workers", "1"]
        out_name, record_name = "w/m.tar", "w/.m.tar.mnistconv-plan.json"
    ref = tmp_path / "ref"
    _cli("convert", big, ref / out_name, *opts, "-q", check=0)
    expected = tree_hashes(ref)
    assert len(expected) == (15 if fmt == "tfds" else 10)
    rng = random.Random(17)
    points = [("shards", 1), ("shards", 4), ("shards", 9),
              ("time", round(rng.uniform(0.5, 2.5), 2)),
              ("time", round(rng.uniform(0.5, 2.5), 2))]
    assert kill_and_resume(tmp_path, big, expected, out_name, record_name, opts,
                           points) >= 3


def test_tfds_tampered_shard_found_when_finishing(src, tfds_reference, tmp_path):
    """A shard changed after its task recorded it: the last task does not finish the
    set (no dataset_info.json), --resume redoes that shard and finishes it."""
    out = tmp_path / "tf"
    _cli("convert", src, out, *TFDS, "--num-tasks", 2, "--task-index", 0, "-q", check=0)
    shard = out / "digits/1.0.0/digits-train.tfrecord-00002-of-00003"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1
    shard.write_bytes(bytes(data))
    r = _cli("convert", src, out, *TFDS, "--num-tasks", 2, "--task-index", 1, "--json",
             check=0)
    result = json.loads(r.stdout)
    assert (result["finished"], result["missing"]) == (
        False, ["digits/1.0.0/digits-train.tfrecord-00002-of-00003"])  # as the plan names it
    assert not (out / "digits/1.0.0/dataset_info.json").exists()
    r = _cli("convert", src, out, *TFDS, "--resume", "--json", check=0)
    assert [t["task"] for t in json.loads(r.stdout)["tasks"]
            if t["status"] == "written"] == [2]
    assert tree_hashes(tmp_path) == tfds_reference[0]


def test_tfds_an_earlier_set_is_refused_then_replaced_with_force(src, tfds_reference,
                                                                 tmp_path):
    """An earlier 2-shard write is refused (its dataset_info.json exists); with --force
    the plan writes the 3-shard set and, once finished, removes the 2-shard files, as a
    local --force write does."""
    out = tmp_path / "tf"
    _cli("convert", src, out, "--to", "tfds", "--name", "digits", "--shards", "2", "-q",
         check=0)
    before = tree_hashes(tmp_path)
    r = _cli("convert", src, out, *TFDS, "--resume", check=2)
    assert _last_error(r) == (f"Error: {out / 'digits/1.0.0/dataset_info.json'}: already "
                              "exists; use --force to overwrite it")
    assert tree_hashes(tmp_path) == before
    _cli("convert", src, out, *TFDS, "--num-tasks", 2, "--task-index", 0, "--force", "-q",
         check=0)
    assert len(tree_hashes(tmp_path)) == 3 + 4 + 3  # the old set stays until the new one is whole
    _cli("convert", src, out, *TFDS, "--num-tasks", 2, "--task-index", 1, "-q", check=0)
    assert tree_hashes(tmp_path) == tfds_reference[0]


class _Stream(ArraySplit):
    """A split that cannot seek (Split's default take), in batches of 333 whatever is
    asked: a shard's records are read up to its end and cut out of them."""

    take = Split.take
    can_seek = False  # declared: take() is Split's, which spools

    def batches(self, batch_size=None):
        for batch in ArraySplit.batches(self, 333):
            yield batch


@pytest.mark.parametrize("fmt, opts", [("tfds", {"shards": 3}),
                                       ("webdataset", {"shard_size": "400"})])
def test_a_split_that_cannot_seek_plans_the_same_bytes(tmp_path, fmt, opts):
    base = _dataset(1300, 200, seed=4)
    ds = Dataset("npz", {})
    for name, split in base.splits.items():
        ds.splits[name] = _Stream(name, split.take(np.arange(split.header.count)),
                                  split.labels())
        ds.splits[name].header = split.header
    assert RangeSplit(ds.splits["train"], 0, 10).can_seek is False
    path = "tf" if fmt == "tfds" else "w/m.tar"
    local = mnistconv.write(base, str(tmp_path / "a" / path), fmt, **opts)
    with plans.PlanRun(ds, str(tmp_path / "b" / path), fmt, opts) as run:
        run.prepare()
        for number in reversed(range(len(run.plan["tasks"]))):
            run.run_task(number)
        assert run.finish() == (True, [])
        assert run.totals() == local.stats
    assert tree_hashes(tmp_path / "a") == tree_hashes(tmp_path / "b")


def test_the_finishing_task_lists_the_metadata_it_wrote(src, tfds_reference, tmp_path):
    """The task that completes the set says what it wrote beside the shards, with the
    hashes of a one-machine run's files."""
    tree, _ = tfds_reference
    out = tmp_path / "tf"
    first = _cli("convert", src, out, *TFDS, "--num-tasks", 2, "--task-index", 0, check=0)
    assert "dataset_info.json" not in first.stderr.decode()
    last = _cli("convert", src, out, *TFDS, "--num-tasks", 2, "--task-index", 1, check=0)
    lines = last.stderr.decode().splitlines()
    at = lines.index(next(line for line in lines if "finished:" in line))
    listed = lines[at - 3:at]
    for line, name in zip(listed, ("dataset_info.json", "features.json",
                                   "label.labels.txt")):
        path = out / "digits/1.0.0" / name
        assert line == (f"  {path}  {path.stat().st_size:,} bytes  sha256 "
                        f"{tree['tf/digits/1.0.0/' + name]}")
