"""Shard plans (mnistconv/runners/plan.py), resume and Beam (mnistconv/runners/beam.py): every way of
running a plan gives the bytes of one local run."""

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import mnistconv
from mnistconv.runners import plan as plans
from helpers import tree_hashes
from plan_helpers import BEAM_MODES, beam_args, cli as _cli, in_order, job_array_slices, kill_and_resume, \
    last_error as _last_error, run_tasks
from mnistconv.model.records import ArraySplit, Dataset

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

OPTS = ["--shards", "3", "--image-format", "jpeg"]


def _dataset(train=2300, test=700, seed=0):
    rng = np.random.default_rng(seed)
    return Dataset("npz", {
        "train": ArraySplit("train", rng.integers(0, 256, (train, 28, 28), np.uint8),
                            rng.integers(0, 10, train).astype(np.uint8)),
        "test": ArraySplit("test", rng.integers(0, 256, (test, 28, 28), np.uint8),
                           rng.integers(0, 10, test).astype(np.uint8))})


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "small.npz"
    mnistconv.write(_dataset(), str(path), "npz")
    return str(path)


def _files(folder):
    """{name: sha256} of the visible files of an output folder (the progress record is
    hidden: readers skip it, as they skip staging leftovers)."""
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
            for name in sorted(os.listdir(folder)) if not name.startswith(".")}


@pytest.fixture(scope="module")
def reference(src, tmp_path_factory):
    """One local run: its files and its stats."""
    out = tmp_path_factory.mktemp("ref")
    r = _cli("convert", src, out / "m.tfrecord", *OPTS, "--json", check=0)
    return _files(out), json.loads(r.stdout)["stats"]


def test_plan_prints_tasks_and_writes_nothing(src, tmp_path):
    r = _cli("convert", src, tmp_path / "out" / "m.tfrecord", *OPTS, "--plan", check=0)
    plan = json.loads(r.stdout)
    assert [(t["split"], t["start"], t["stop"], t["shard"]) for t in plan["tasks"]] == [
        ("train", 0, 766, "m-train.tfrecord-00000-of-00003"),
        ("train", 766, 1533, "m-train.tfrecord-00001-of-00003"),
        ("train", 1533, 2300, "m-train.tfrecord-00002-of-00003"),
        ("test", 0, 233, "m-test.tfrecord-00000-of-00003"),
        ("test", 233, 466, "m-test.tfrecord-00001-of-00003"),
        ("test", 466, 700, "m-test.tfrecord-00002-of-00003")]
    assert plan["options"] == {"image_format": "jpeg", "shards": 3}
    assert plan["splits"]["train"]["count"] == 2300
    assert not (tmp_path / "out").exists()
    # The library's call (only the options that differ) plans the same conversion.
    ds = mnistconv.read(src)
    assert plans.make_plan(ds, str(tmp_path / "out" / "m.tfrecord"), "tfrecord",
                           {"shards": 3, "image_format": "jpeg", "workers": 2}
                           )["hash"] == plan["hash"]


@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_every_task_one_by_one_gives_the_local_bytes(src, reference, tmp_path, order):
    files, stats = reference
    out = tmp_path / "out"
    results = run_tasks(src, out / "m.tfrecord", OPTS, in_order(order))
    assert [r["finished"] for r in results] == [False] * 5 + [True]
    assert results[-1]["stats"] == stats
    assert _files(out) == files
    record = json.loads((out / ".m.tfrecord.mnistconv-plan.json").read_text())
    assert record["finished"] is True
    assert {n: e["sha256"] for n, e in record["shards"].items()} == files


def test_slices_of_a_job_array(src, reference, tmp_path):
    """--num-tasks 4 over 6 tasks: slices hold 2, 2, 1, 1 tasks, run in any order."""
    out = tmp_path / "out"
    sizes = job_array_slices(src, out / "m.tfrecord", OPTS, (2, 0, 3, 1))
    assert sizes == {0: [0, 4], 1: [1, 5], 2: [2], 3: [3]}
    assert _files(out) == reference[0]


def test_slices_running_at_once(src, reference, tmp_path):
    """A job array on one machine: three slices at the same time share the record
    (under a lock) and exactly one of them finishes the set."""
    out = tmp_path / "out"
    procs = [subprocess.Popen([sys.executable, "-m", "mnistconv", "convert", src,
                               str(out / "m.tfrecord"), *OPTS, "--num-tasks", "3",
                               "--task-index", str(i), "--workers", "1", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(3)]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate()
        assert proc.returncode == 0, stderr.decode()
        results.append(json.loads(stdout))
    assert sum(r["finished"] for r in results) >= 1
    assert _files(out) == reference[0]
    record = json.loads((out / ".m.tfrecord.mnistconv-plan.json").read_text())
    assert record["finished"] is True and len(record["shards"]) == 6


def test_library_run_equals_write(tmp_path):
    """plan.run on a Dataset, PNG, gzip and with_index, 2 threads: the bytes and stats
    of mnistconv.write."""
    ds = _dataset(1500, 10, seed=1)
    opts = {"shards": 2, "preset": "tfds", "compression": "gzip", "with_index": True}
    local = mnistconv.write(ds, str(tmp_path / "a" / "m.tfrecord"), "tfrecord", **opts)
    result = plans.run(ds, str(tmp_path / "b" / "m.tfrecord"), "tfrecord",
                       dict(opts, workers=2))
    assert result["finished"] and result["stats"] == local.stats
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def _count_builds(monkeypatch) -> list:
    """The paths Parquet's prepare_write is called with from now on, one per job built."""
    from mnistconv.formats.parquet import writer
    built, real = [], writer.prepare_write
    monkeypatch.setattr(writer, "prepare_write",
                        lambda *args: built.append(args[1]) or real(*args))
    return built


@pytest.mark.parametrize("resume", [False, True])
def test_a_plan_run_here_builds_its_job_once(tmp_path, monkeypatch, resume):
    """A plan of 8 tasks run in one process: one ShardedWrite for the plan, its record,
    every task, the finish and the result (issue 39: it was built 13 times); --resume
    over the finished set (every shard hashed again and kept) builds it once too."""
    built = _count_builds(monkeypatch)
    ds = _dataset(800, 200, seed=3)
    out = str(tmp_path / "hf")
    if resume:
        plans.run(ds, out, "parquet", {"shards": 4})
        built.clear()
    result = plans.run(ds, out, "parquet", {"shards": 4},
                       plans.Tasks(resume=resume))
    assert len(result["tasks"]) == 8 and result["finished"]
    assert [t["status"] for t in result["tasks"]] == ["kept" if resume else "written"] * 8
    assert built == [out + "/"]  # (write()'s name for a folder output)


def test_beam_builds_the_job_once_per_element(tmp_path, monkeypatch):
    """On Beam a worker builds the job once per element it runs (each task, then the
    finish): a store output's private folder lives as long as the run holding it, and
    one job is not shared by a runner's threads. With the launcher's: T + 2."""
    pytest.importorskip("apache_beam")
    from mnistconv.runners import beam
    built = _count_builds(monkeypatch)
    mnistconv.write(_dataset(800, 200, seed=3), str(tmp_path / "s.npz"), "npz")
    built.clear()
    result = beam.run(plans.InputSpec(str(tmp_path / "s.npz"), "npz"), str(tmp_path / "hf"),
                      "parquet", {"shards": 4},
                      ["runner=DirectRunner", "direct_running_mode=in_memory"])
    assert result["finished"] and len(result["tasks"]) == 8
    assert len(built) == 8 + 2


@pytest.mark.parametrize("mode", BEAM_MODES)
def test_beam_direct_runner_gives_the_local_bytes(src, reference, tmp_path, mode):
    pytest.importorskip("apache_beam")
    out = tmp_path / "out"
    r = _cli("convert", src, out / "m.tfrecord", *OPTS, *beam_args(mode), "--json", check=0)
    result = json.loads(r.stdout)
    assert result["finished"] and result["stats"] == reference[1]
    assert _files(out) == reference[0]


def test_resume_after_kill_9_at_several_points(tmp_path):
    """A planned run killed outright (after 1, 4 and 9 shards, and at random times)
    and resumed gives the bytes of one uninterrupted run, and leaves no staging file."""
    src = tmp_path / "big.npz"
    mnistconv.write(_dataset(12000, 3000, seed=2), str(src), "npz")
    opts = ["--shards", "8", "--preset", "tfds", "--workers", "1"]
    ref = tmp_path / "ref"
    _cli("convert", src, ref / "m.tfrecord", *opts, "-q", check=0)
    expected = tree_hashes(ref)
    rng = random.Random(17)
    points = [("shards", 1), ("shards", 4), ("shards", 9),
              ("time", round(rng.uniform(0.5, 2.5), 2)),
              ("time", round(rng.uniform(0.5, 2.5), 2))]
    assert kill_and_resume(tmp_path, src, expected, "m.tfrecord",
                           ".m.tfrecord.mnistconv-plan.json", opts, points) >= 3


def test_a_tampered_shard_is_redone(src, reference, tmp_path):
    out = tmp_path / "out"
    _cli("convert", src, out / "m.tfrecord", *OPTS, "--resume", "-q", check=0)
    bad = out / "m-train.tfrecord-00001-of-00003"
    data = bytearray(bad.read_bytes())
    data[100] ^= 1
    bad.write_bytes(bytes(data))  # same size, one bit flipped
    (out / "m-test.tfrecord-00002-of-00003").unlink()
    r = _cli("convert", src, out / "m.tfrecord", *OPTS, "--resume", "--json", check=0)
    status = {os.path.basename(t["path"]): t["status"]
              for t in json.loads(r.stdout)["tasks"]}
    assert status == {name: "kept" for name in reference[0]} | {
        "m-train.tfrecord-00001-of-00003": "written",
        "m-test.tfrecord-00002-of-00003": "written"}
    assert _files(out) == reference[0]


def test_a_tampered_shard_found_when_finishing(src, reference, tmp_path):
    """The task that completes a set re-hashes every shard: one changed since its task
    recorded it is dropped from the record, the set is not finished, --resume redoes it."""
    out = tmp_path / "out"
    _cli("convert", src, out / "m.tfrecord", *OPTS, "--num-tasks", 2, "--task-index", 0,
         "-q", check=0)
    shard = out / "m-train.tfrecord-00000-of-00003"
    shard.write_bytes(shard.read_bytes()[:-1])
    r = _cli("convert", src, out / "m.tfrecord", *OPTS, "--num-tasks", 2,
             "--task-index", 1, "--json", check=0)
    result = json.loads(r.stdout)
    assert (result["finished"], result["missing"]) == (
        False, ["m-train.tfrecord-00000-of-00003"])
    _cli("convert", src, out / "m.tfrecord", *OPTS, "--resume", "-q", check=0)
    assert _files(out) == reference[0]


def test_another_plan_is_refused(src, tmp_path):
    out = tmp_path / "out"
    r = _cli("convert", src, out / "m.tfrecord", *OPTS, "--num-tasks", 2, "--task-index",
             0, "--json", check=0)
    first = json.loads(r.stdout)["plan_hash"]
    before = _files(out)
    r = _cli("convert", src, out / "m.tfrecord", "--shards", "4", "--image-format", "jpeg",
             "--num-tasks", 2, "--task-index", 1, check=2)
    second = json.loads(_cli("convert", src, out / "m.tfrecord", "--shards", "4",
                             "--image-format", "jpeg", "--plan").stdout)["hash"]
    assert _last_error(r) == (
        f"Error: {out / '.m.tfrecord.mnistconv-plan.json'}: holds the progress of another "
        f"plan ({first[:12]}; this one is {second[:12]}): a different input, options or "
        "shard count; run the same conversion, or use --force to start over")
    assert _files(out) == before
    # --resume does not get around it either; --force starts over.
    assert _cli("convert", src, out / "m.tfrecord", "--shards", "4", "--image-format",
                "jpeg", "--resume").returncode == 2
    _cli("convert", src, out / "m.tfrecord", "--shards", "4", "--image-format", "jpeg",
         "--resume", "--force", "-q", check=0)
    assert sorted(_files(out)) == [f"m-{s}.tfrecord-0000{i}-of-00004"
                                   for s in ("test", "train") for i in range(4)]


def test_files_no_record_owns_are_refused(src, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "m-test.tfrecord-00001-of-00003").write_bytes(b"mine")
    r = _cli("convert", src, out / "m.tfrecord", *OPTS, "--resume", check=2)
    assert _last_error(r) == (f"Error: {out / 'm-test.tfrecord-00001-of-00003'}: already "
                              "exists; use --force to overwrite it")
    assert os.listdir(out) == ["m-test.tfrecord-00001-of-00003"]
    # An old set of another size: refused too; replaced with --force once finished.
    (out / "m-test.tfrecord-00001-of-00003").unlink()
    (out / "m-train.tfrecord").write_bytes(b"old")
    r = _cli("convert", src, out / "m.tfrecord", *OPTS, "--resume", check=2)
    assert _last_error(r) == (f"Error: {out / 'm-train.tfrecord'}: already exists; use "
                              "--force to overwrite it")
    assert os.listdir(out) == ["m-train.tfrecord"]
    _cli("convert", src, out / "m.tfrecord", *OPTS, "--resume", "--force", "-q", check=0)
    assert "m-train.tfrecord" not in os.listdir(out)


@pytest.mark.parametrize("args, message", [
    (["--to", "npz", "--plan"], "Error: writing npz cannot be planned, resumed or run on "
     "Beam (its writer does not write one shard alone); plan one of: tfds, parquet, "
     "webdataset, tfrecord"),
    (["--to", "imagefolder", "--resume"], "Error: writing imagefolder cannot be planned, "
     "resumed or run on Beam (its writer does not write one shard alone); plan one of: "
     "tfds, parquet, webdataset, tfrecord"),
    (["--to", "tfrecord", "--task-index", "0"],
     "Error: --num-tasks and --task-index go together; pass both, or neither"),
    (["--to", "tfrecord", "--num-tasks", "2", "--task-index", "2"],
     "Error: --task-index must be 0..1, not 2; pass a value it accepts (see --help)"),
    (["--to", "tfrecord", "--beam-option", "runner=DirectRunner"],
     "Error: --beam-option needs --runner beam; add --runner beam, or drop "
     "--beam-option"),
    (["--to", "tfrecord", "--runner", "beam", "--num-tasks", "2", "--task-index", "0"],
     "Error: --runner beam runs every task of the plan, not a slice; leave out "
     "--num-tasks and --task-index"),
    (["--to", "tfrecord", "--runner", "beam", "--beam-option", "--runner"],
     "Error: --beam-option '--runner' is not K=V; e.g. --beam-option runner=DirectRunner"),
    (["--to", "tfrecord", "--resume", "--sha256sums"],
     "Error: --sha256sums does not apply to planned runs; drop it: the progress record "
     "holds every shard's SHA-256"),
])
def test_usage_errors(src, tmp_path, args, message):
    r = _cli("convert", src, tmp_path / "out" / "m.x", *args, check=2)
    assert _last_error(r) == message
    assert r.stdout == b""
    assert not (tmp_path / "out").exists()


def test_beam_missing_is_one_line(src, tmp_path):
    code = ("import sys; sys.modules['apache_beam'] = None; from mnistconv.cli import main; "
            f"main(['convert', {src!r}, {str(tmp_path / 'm.tfrecord')!r}, '--runner', 'beam'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert (r.returncode, _last_error(r)) == (2, (
        "Error: --runner beam needs the Python package 'apache-beam'; install it with: "
        "pip install 'mnistconv[beam]'"))
    assert os.listdir(tmp_path) == []


# --- Hugging Face Parquet (ParquetWrite, formats/parquet/writer.py): shards, the README.md card and
# croissant.json ---

PQ = ["--to", "parquet", "--shards", "3", "--row-group-size", "300"]


@pytest.fixture(scope="module")
def pq_reference(src, tmp_path_factory):
    pytest.importorskip("pyarrow")
    out = tmp_path_factory.mktemp("pqref") / "hf"
    r = _cli("convert", src, out, *PQ, "--json", check=0)
    tree = tree_hashes(out)
    assert sorted(tree) == ["README.md", "croissant.json"] + [
        f"data/{s}-0000{i}-of-00003.parquet" for s in ("test", "train") for i in range(3)]
    return tree, json.loads(r.stdout)["stats"]


def test_parquet_tasks_in_reverse_give_the_local_bytes_and_card(src, pq_reference,
                                                                  tmp_path):
    out = tmp_path / "hf"
    results = run_tasks(src, out, PQ, in_order("reverse"))
    assert [r["finished"] for r in results] == [False] * 5 + [True]
    assert results[-1]["stats"] == pq_reference[1]
    assert tree_hashes(out) == pq_reference[0]
    assert (out / ".mnistconv-plan.json").is_file()  # inside the folder output


@pytest.mark.parametrize("mode", BEAM_MODES)
def test_parquet_through_beam_gives_the_local_bytes(src, pq_reference, tmp_path, mode):
    pytest.importorskip("apache_beam")
    out = tmp_path / "hf"
    _cli("convert", src, out, *PQ, *beam_args(mode), "-q", check=0)
    assert tree_hashes(out) == pq_reference[0]


def test_parquet_resume_after_kill_and_a_tampered_shard(src, pq_reference, tmp_path):
    out = tmp_path / "hf"
    record = out / ".mnistconv-plan.json"
    proc = subprocess.Popen([sys.executable, "-m", "mnistconv", "convert", src, str(out),
                             *PQ, "--workers", "1", "--resume", "-q"],
                            stderr=subprocess.DEVNULL)
    while proc.poll() is None:
        try:
            if len(json.loads(record.read_text())["shards"]) >= 2:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "README.md").exists() or proc.returncode == 0
    _cli("convert", src, out, *PQ, "--resume", "-q", check=0)
    assert tree_hashes(out) == pq_reference[0]
    shard = out / "data" / "train-00002-of-00003.parquet"
    shard.write_bytes(shard.read_bytes()[:-8] + b"PAR1PAR1")
    r = _cli("convert", src, out, *PQ, "--resume", "--json", check=0)
    written = [os.path.basename(t["path"]) for t in json.loads(r.stdout)["tasks"]
               if t["status"] == "written"]
    assert written == ["train-00002-of-00003.parquet"]
    assert tree_hashes(out) == pq_reference[0]
