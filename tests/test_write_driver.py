"""The one whole-set write driver (mnistconv.formats.contract.write): every format's
local write goes through it, with progress per split and one result, and a shard set
written locally holds the bytes its shards have written alone (one byte path)."""

import os

import pytest

import mnistconv
from mnistconv.errors import MissingDependency
from mnistconv.formats import contract, registry
from mnistconv.model.records import Progress
from helpers import tree_hashes
from test_contract_suite import WRITERS, digits, target

# Options each format's smallest write needs.
OPTIONS = {"caffe-hdf5": {"pixel_type": "uint8"}}


@pytest.mark.parametrize("name", WRITERS)
def test_every_local_write_goes_through_the_driver(tmp_path, monkeypatch, name):
    """Each format's writer is a ShardedWrite the driver drives: write() calls the
    driver once, and the driver stages and writes every target of the job."""
    fmt = registry.get(name)
    calls, shards, jobs, real = [], [], [], contract.write

    def counting(fmt, dataset, path, options, **kw):
        calls.append(fmt.name)
        return real(fmt, dataset, path, options, **kw)

    def preparing(dataset, path, options):
        job = prepare(dataset, path, options)
        jobs.append(job)
        written = job.write_shard
        job.write_shard = lambda i, p: shards.append(i) or written(i, p)
        return job

    module = contract.writer_module(fmt)
    prepare = module.prepare_write
    monkeypatch.setattr(contract, "write", counting)
    monkeypatch.setattr(module, "prepare_write", preparing)
    try:
        result = mnistconv.write(digits(), target(tmp_path, fmt), name,
                                 **OPTIONS.get(name, {}))
    except MissingDependency as e:
        pytest.skip(f"{name}: {e}")
    assert calls == [name]
    [job] = jobs
    assert shards == list(range(len(job.targets))) and shards
    assert result.counts == {"train": 30, "test": 10}
    for f in result.files:  # every file listed is there with the bytes it says
        assert os.path.getsize(f.path) == f.bytes


class Heard(Progress):
    def __init__(self):
        self.events = []

    def start(self, description, total):
        self.events.append(["start", description, total])

    def advance(self, n):
        self.events[-1].append(n) if self.events[-1][0] == "advance" else \
            self.events.append(["advance", n])

    def finish(self):
        self.events.append(["finish"])


def test_progress_is_heard_per_split_as_records_are_written(tmp_path):
    heard = Heard()
    result = mnistconv.write(digits(), str(tmp_path / "d.tfrecord"), shards=2,
                             progress=heard)
    assert result.counts == {"train": 30, "test": 10}
    starts = [e for e in heard.events if e[0] == "start"]
    assert starts == [["start", "train -> tfrecord", 30], ["start", "test -> tfrecord", 10]]
    # each split: its start, what was written (every record once), its finish
    at = [i for i, e in enumerate(heard.events) if e[0] == "start"] + [len(heard.events)]
    for (a, b), count in zip(zip(at, at[1:]), (30, 10)):
        part = heard.events[a:b]
        assert part[-1] == ["finish"]
        assert sum(n for e in part if e[0] == "advance" for n in e[1:]) == count


@pytest.mark.parametrize("name, out, options", [
    ("tfrecord", "d.tfrecord", {}), ("tfrecord", "d.tfrecord", {"shards": 3}),
    ("tfrecord", "d.tfrecord", {"shards": 3, "index_files": True}),
    ("webdataset", "d.tar", {"shard_size": "7"}), ("tfds", "d", {"shards": 3}),
    ("parquet", "d/", {"shards": 3})])
def test_the_set_written_whole_is_its_shards_written_alone(tmp_path, name, out, options):
    """The driver and a plan's task call the same write_shard: each shard written
    alone (a session of its own, its rows read alone) has the bytes the whole-set
    write gives it, where a split is read once for all its shards."""
    ds = digits()
    mnistconv.write(ds, str(tmp_path / "whole" / out), name, **options)
    fmt = registry.get(name)
    path, values = contract.checked_options(fmt, str(tmp_path / "alone" / out),
                                            dict(options))
    job = contract.writer_module(fmt).prepare_write(ds, path, fmt.options(values))
    alone = {}
    for i, t in enumerate(job.targets):
        os.makedirs(os.path.dirname(t.path), exist_ok=True)
        open(t.path, "wb").close()  # as staging leaves it
        written, _ = job.write_shard(i, t.path)
        alone[os.path.relpath(t.path, tmp_path / "alone")] = written.sha256
    whole = tree_hashes(str(tmp_path / "whole"))
    assert len(alone) >= 2 and {k: whole[k] for k in alone} == alone == \
        tree_hashes(str(tmp_path / "alone"))


def test_a_format_that_cannot_be_planned_is_refused_in_the_same_words():
    with pytest.raises(mnistconv.UsageError) as e:
        contract.prepare_write("npz", digits(), "x.npz", {})
    assert "writing npz cannot be planned, resumed or run on Beam (its writer does not " \
        "write one shard alone)" in str(e.value)


def test_a_tfds_split_cut_as_encoded_is_the_set_of_its_shard_count(tmp_path):
    """--shard-size leaves the count to the encoded size: the split is one target,
    encoded whole, then cut; its shards are the ones --shards of that count writes."""
    ds = digits(counts=(("train", 30),))
    fmt = registry.get("tfds")
    job = contract.writer_module(fmt).prepare_write(ds, str(tmp_path / "x"),
                                                    fmt.options({"shard_size": "4KiB"}))
    assert list(job.cut_later) == ["train"] and len(job.targets) == 1
    with pytest.raises(mnistconv.UsageError, match="so a plan cannot be cut from the header"):
        job.check_plannable()
    sized = mnistconv.write(ds, str(tmp_path / "sized"), "tfds", shard_size="4KiB",
                            name="digits")
    assert sized.counts == {"train": 30}
    n = sized.stats["shards"]
    assert n > 1 and len(sized.files) == n + 3  # the shards, then the metadata
    counted = mnistconv.write(ds, str(tmp_path / "counted"), "tfds", shards=n, name="digits")
    assert [(os.path.basename(f.path), f.sha256) for f in sized.files] == \
        [(os.path.basename(f.path), f.sha256) for f in counted.files]


def test_a_job_that_writes_nothing_is_refused_where_it_is_declared():
    with pytest.raises(TypeError, match="Idle defines neither write_shard nor write_targets"):
        class Idle(contract.ShardedWrite):
            pass
