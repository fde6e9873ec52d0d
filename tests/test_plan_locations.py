"""Planned runs (mnistconv.runners.plan) to a URL and read back (issue 35): a planned, sliced,
resumed or Beam run to s3:// (moto's server on 127.0.0.1) writes its shards into the
bucket and nothing in the working folder, https:// is refused in one line; the progress
record, finished shards and metadata are read back through the guarded opener (a link,
a FIFO, a device: one line, bounded, no hang; a linked shard is never kept); --resume
checks what it keeps (the input's pixels, every metadata file)."""

import json
import os
import resource
import shutil
import subprocess
import sys

import numpy as np
import pytest

import mnistconv
from mnistconv.model.records import ArraySplit, Dataset
from helpers import REPO, run, stderr_of, tree_hashes
from plan_helpers import beam_args
from test_remote import s3_env, sha

TFR = ["--preset", "tfds", "--shards", "3", "--workers", "1"]


def _dataset(flip=None):
    """120 random digits; flip: (split, image, row, column) of a pixel inverted."""
    rng = np.random.default_rng(7)
    splits = {}
    for name, k in (("train", 90), ("test", 30)):
        images = rng.integers(0, 256, (k, 28, 28), np.uint8)
        if flip and flip[0] == name:
            images[flip[1:]] ^= 0xFF
        splits[name] = ArraySplit(name, images, rng.integers(0, 10, k).astype(np.uint8))
    return Dataset("npz", splits)


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "in" / "small.npz"
    path.parent.mkdir()
    mnistconv.write(_dataset(), str(path), "npz")
    return path


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    """An empty working folder, which must stay empty."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def _local_reference(src, tmp_path, dst, args):
    ref = tmp_path / "ref"
    r = run("convert", src, ref / dst, *args, "-q")
    assert r.returncode == 0, stderr_of(r)
    return tree_hashes(ref)


def _bucket_tree(fs, name, top=""):
    """{path below top: sha256} of every object under bucket/top."""
    fs.invalidate_cache()
    prefix = f"{name}/{top}/" if top else f"{name}/"
    return {p[len(prefix):]: sha(fs.cat(p)) for p in fs.find(prefix)}


# --- 1. plans to URLs write into the store -----------------------------------------------

def test_sliced_and_resumed_run_to_s3_writes_into_the_bucket(src, tmp_path, cwd, s3_server,
                                                             bucket):
    fs, name = bucket
    env = s3_env(s3_server)
    expected = _local_reference(src, tmp_path, "m.tfrecord", TFR)
    assert len(expected) == 6
    url = f"s3://{name}/sets/m.tfrecord"
    for i in (1, 0):
        r = run("convert", src, url, *TFR, "--num-tasks", "2", "--task-index", i, env=env)
        assert r.returncode == 0, stderr_of(r)
    assert f"s3://{name}/sets/m-train.tfrecord-00000-of-00003  " in stderr_of(r)
    assert "finished: every shard of plan" in stderr_of(r)
    found = _bucket_tree(fs, name, "sets")
    record = found.pop(".m.tfrecord.mnistconv-plan.json")
    assert found == expected and record
    assert os.listdir(cwd) == []  # no ./s3:/..., no record, no staging leftover
    r = run("convert", src, url, *TFR, "--resume", env=env)
    assert r.returncode == 0, stderr_of(r)
    assert "complete: every shard of plan" in stderr_of(r) and "(kept)" in stderr_of(r)
    # a shard changed in the bucket is written again, not kept
    fs.pipe(f"{name}/sets/m-test.tfrecord-00001-of-00003", b"not a shard")
    r = run("convert", src, url, *TFR, "--resume", env=env)
    assert r.returncode == 0, stderr_of(r)
    assert "m-test.tfrecord-00001-of-00003" in stderr_of(r).split("(written)")[0]
    found = _bucket_tree(fs, name, "sets")
    found.pop(".m.tfrecord.mnistconv-plan.json")
    assert found == expected and os.listdir(cwd) == []


def test_planned_folder_output_to_s3_writes_shards_and_metadata(src, tmp_path, cwd,
                                                               s3_server, bucket):
    fs, name = bucket
    args = ["--to", "parquet", "--shards", "2", "--workers", "1"]
    expected = _local_reference(src, tmp_path, "hf/", args)
    r = run("convert", src, f"s3://{name}/hf/", *args, "--resume", env=s3_env(s3_server))
    assert r.returncode == 0, stderr_of(r)
    found = _bucket_tree(fs, name)
    assert found.pop("hf/.mnistconv-plan.json") and found == expected  # inside it
    assert os.listdir(cwd) == []


def test_beam_run_to_s3_writes_into_the_bucket(src, tmp_path, cwd, s3_server, bucket):
    pytest.importorskip("apache_beam")
    fs, name = bucket
    expected = _local_reference(src, tmp_path, "m.tfrecord", TFR)
    r = run("convert", src, f"s3://{name}/b/m.tfrecord", *TFR, *beam_args("in_memory"),
            "-q", env=s3_env(s3_server))
    assert r.returncode == 0, stderr_of(r)
    found = _bucket_tree(fs, name, "b")
    found.pop(".m.tfrecord.mnistconv-plan.json")
    assert found == expected and os.listdir(cwd) == []


@pytest.mark.parametrize("runner", [["--resume"], ["--num-tasks", "2", "--task-index", "0"],
                                    ["--runner", "beam"]])
def test_https_output_of_a_planned_run_is_refused_in_one_line(src, cwd, runner):
    r = run("convert", src, "https://127.0.0.1:9/sets/m.tfrecord", *TFR, *runner)
    assert (r.returncode, stderr_of(r)) == (2, (
        "Error: https://127.0.0.1:9/sets/m.tfrecord: https:// takes no writes: a planned, sliced or "
        "Beam run writes its shards into a store; write to s3://, gs:// or a local "
        "path\n"))
    assert os.listdir(cwd) == []


# --- 2. what is read back is guarded ----------------------------------------------------

# What a hostile read back may take: a record linked to /dev/zero took gigabytes, a FIFO
# in place of a shard hung; here each is a failed test, not a machine out of memory.
LIMIT_BYTES = 3 << 30
LIMIT_SECONDS = 60


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def _planned(src, out, *extra):
    """`convert SRC OUT` planned, in a process of bounded memory and time."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "mnistconv", "convert", str(src), str(out),
                           *TFR, *extra], capture_output=True, env=env,
                          timeout=LIMIT_SECONDS, preexec_fn=_limited)


def test_a_record_linked_to_dev_zero_is_refused_bounded(src, tmp_path, cwd):
    out = tmp_path / "o" / "m.tfrecord"
    out.parent.mkdir()
    record = tmp_path / "o" / ".m.tfrecord.mnistconv-plan.json"
    record.symlink_to("/dev/zero")
    r = _planned(src, out, "--resume")
    assert (r.returncode, stderr_of(r)) == (2, (
        f"Error: {record}: is a symlink inside the output; mnistconv never reads an "
        "output back through a link; remove the link, or use --force to start over\n"))
    # --force starts over: the link is replaced, never followed
    r = _planned(src, out, "--resume", "--force", "-q")
    assert r.returncode == 0, stderr_of(r)
    assert not record.is_symlink() and json.loads(record.read_text())["finished"] is True


def test_a_record_of_gigabytes_is_read_only_as_far_as_its_plan_allows(src, tmp_path, cwd):
    out = tmp_path / "o" / "m.tfrecord"
    assert _planned(src, out, "--resume", "-q").returncode == 0
    record = tmp_path / "o" / ".m.tfrecord.mnistconv-plan.json"
    with open(record, "ab") as f:  # a valid start, then 2 GiB of zeros (sparse)
        f.truncate(2 << 30)
    r = _planned(src, out, "--resume")
    assert (r.returncode, stderr_of(r)) == (2, (
        f"Error: {record}: is damaged: it names no plan whose progress it holds; use "
        "--force to start over\n"))


@pytest.mark.parametrize("kind", ["fifo", "device", "link"])
def test_a_special_file_or_link_in_place_of_a_shard_is_refused(src, tmp_path, cwd, kind):
    out = tmp_path / "o" / "m.tfrecord"
    assert _planned(src, out, "--resume", "-q").returncode == 0
    shard = tmp_path / "o" / "m-train.tfrecord-00001-of-00003"
    copy = tmp_path / "outside"
    shutil.copyfile(shard, copy)
    shard.unlink()
    if kind == "fifo":
        os.mkfifo(shard)
    elif kind == "device":
        shard.symlink_to("/dev/null")  # a device node needs root; a link to one
    else:
        shard.symlink_to(copy)  # the same bytes, outside the output
    r = _planned(src, out, "--resume")
    said = "is not a regular file (device, FIFO or socket), where the output has a " \
        "file; remove it, or write to another output" if kind == "fifo" else \
        "is a symlink inside the output; mnistconv never reads an output back through " \
        "a link; remove the link, or use --force to start over"
    assert (r.returncode, stderr_of(r).splitlines()[-1]) == (2, f"Error: {shard}: {said}")
    assert f"{shard}  " not in stderr_of(r)  # never listed, kept or written


# --- 3. --resume checks what it keeps ---------------------------------------------------

def test_resume_with_changed_pixels_is_refused(src, tmp_path, cwd):
    out = tmp_path / "o" / "m.tfrecord"
    assert _planned(src, out, "--num-tasks", "2", "--task-index", "0", "-q").returncode == 0
    # labels and indices the same, one pixel not
    mnistconv.write(_dataset(flip=("train", 5, 3, 3)), str(src), "npz", force=True)
    r = _planned(src, out, "--num-tasks", "2", "--task-index", "1")
    assert r.returncode == 2
    assert stderr_of(r).startswith(f"Error: {tmp_path / 'o' / '.m.tfrecord.mnistconv-plan.json'}"
                                   ": holds the progress of another plan")
    r = _planned(src, out, "--resume")
    assert r.returncode == 2 and "holds the progress of another plan" in stderr_of(r)
    assert "complete" not in stderr_of(r)


@pytest.mark.parametrize("damage", ["missing", "garbled"])
@pytest.mark.parametrize("name", ["dataset_info.json", "features.json"])
def test_resume_writes_a_missing_or_garbled_tfds_metadata_file_again(src, tmp_path, cwd,
                                                                     damage, name):
    out = tmp_path / "tf"
    args = ["--to", "tfds", "--shards", "2", "--workers", "1"]
    r = run("convert", src, out, *args, "--resume", "-q")
    assert r.returncode == 0, stderr_of(r)
    expected = tree_hashes(out)
    target = next(out.rglob(name))
    if damage == "missing":
        target.unlink()
    else:
        target.write_text('{"garbled": ')
    r = run("convert", src, out, *args, "--resume")
    assert r.returncode == 0, stderr_of(r)
    assert f"  {target}: missing or changed since the set was finished; " \
        "written again\n" in stderr_of(r)
    assert "complete" not in stderr_of(r) and "  finished: every shard" in stderr_of(r)
    assert tree_hashes(out) == expected
    r = run("convert", src, out, *args, "--resume")  # now whole: nothing to do
    assert "complete: every shard of plan" in stderr_of(r) and "again" not in stderr_of(r)


def test_resume_writes_a_missing_parquet_card_again(src, tmp_path, cwd):
    out = tmp_path / "hf"
    args = ["--to", "parquet", "--shards", "2", "--workers", "1"]
    assert run("convert", src, out, *args, "--resume", "-q").returncode == 0
    expected = tree_hashes(out)
    for name in ("README.md", "croissant.json"):
        (out / name).unlink()
        r = run("convert", src, out, *args, "--resume")
        assert r.returncode == 0 and "written again" in stderr_of(r), stderr_of(r)
        assert tree_hashes(out) == expected
