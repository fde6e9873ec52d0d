"""Every runner of a shard plan (mnistconv/runners/plan.py, mnistconv/runners/beam.py) does what a local
run does: the same tree at the same place (the output named as write() names it: `bm`
and `bm/` a folder, `.gz` gzip; made absolute for Beam's workers without losing the '/'
that makes a name a folder; nothing written in the working directory), the same
read-side limits (--max-image-size travels with the tasks to worker processes) and the
same one-line error for a damaged input that only a worker finds."""

import json
import os

import numpy as np
import pytest

import mnistconv
from helpers import tree_hashes
from plan_helpers import BEAM_MODES, beam_args, cli, last_error
from mnistconv.model.records import ArraySplit, Dataset

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
    """The progress record (plan.record_path): inside a folder output, beside a file's."""
    folder, name = os.path.split(dst.rstrip("/"))
    if dst.endswith("/") or "." not in name:
        return os.path.join(folder, name, ".mnistconv-plan.json")
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
    runs["beam"] = [beam_args("multi_threading")]
    if case == "tfrecord-tfds-folder":  # issue 25's command, its workers in processes
        runs["beam-processes"] = [beam_args("multi_processing")]
    for runner, calls in runs.items():
        for extra in calls:
            _run(src, tmp_path / runner, dst, args, *extra)
        assert tree_hashes(tmp_path / runner) == tree, runner
        assert _all_files(tmp_path / runner) == sorted([*tree, record]), runner


@pytest.mark.parametrize("runner", ["plan", "beam"])
def test_resume_adopts_a_local_run_in_every_runner(src, tmp_path, runner):
    """--resume over the complete output of a plain run keeps it (each shard written
    again aside and compared), whichever runner resumes."""
    if runner == "beam":
        pytest.importorskip("apache_beam")
    dst, args = CASES["tfrecord-tfds-folder"]
    _run(src, tmp_path / "out", dst, args)
    tree = tree_hashes(tmp_path / "out")
    _run(src, tmp_path / "out", dst, args, "--resume",
         *(beam_args("in_memory") if runner == "beam" else []))
    assert tree_hashes(tmp_path / "out") == tree
    assert _all_files(tmp_path / "out") == sorted([*tree, _record_name(dst)])


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """An IDX folder of two 4097 x 4097 images: over the default cap (4096 x 4096)."""
    images = np.zeros((2, 4097, 4097), np.uint8)
    images[0, 5, 5] = 200
    path = tmp_path_factory.mktemp("large") / "big"
    mnistconv.write(Dataset("npz", {"train": ArraySplit("train", images, np.array(
        [3, 4], np.uint8))}), str(path) + "/", "idx", gzip=True)
    return str(path)


RUNNERS = {"local": [], "tasks": ["--num-tasks", "2", "--task-index", "1"],
           **{f"beam-{mode}": beam_args(mode) for mode in BEAM_MODES}}


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_the_image_size_cap_holds_in_every_runner(large, tmp_path, runner):
    """Refused as a local run refuses it, and accepted with --max-image-size raised,
    giving the local bytes: a worker process applies the launcher's cap."""
    if runner.startswith("beam"):
        pytest.importorskip("apache_beam")
    args = ["--shards", "2", "--image-format", "png"]
    refused = cli("convert", large, tmp_path / "r" / "m.tfrecord", *args, *RUNNERS[runner],
                  check=1)
    assert last_error(refused) == (
        f"Error: {large}/train-images-idx3-ubyte.gz: image of 4097x4097 exceeds "
        "mnistconv's limit of 16,777,216 pixels per image; raise it with --max-image-size "
        "WxH if the images are really that large")
    assert not (tmp_path / "r").exists()
    cli("convert", large, tmp_path / "local" / "m.tfrecord", *args, "--max-image-size",
        "4097x4097", check=0)
    out = tmp_path / "run" / "m.tfrecord"
    for extra in ([RUNNERS[runner], ["--num-tasks", "2", "--task-index", "0"]]
                  if runner == "tasks" else [RUNNERS[runner]]):
        cli("convert", large, out, *args, *extra, "--max-image-size", "4097x4097", check=0)
    assert sorted(tree_hashes(tmp_path / "local")) == ["m.tfrecord-00000-of-00002",
                                                       "m.tfrecord-00001-of-00002"]
    assert tree_hashes(tmp_path / "run") == tree_hashes(tmp_path / "local")


@pytest.mark.parametrize("mode", BEAM_MODES)
def test_a_damaged_input_a_worker_finds_is_the_local_error(src, tmp_path, mode):
    """The pixels are not read to plan: a bad CRC in the images' member is found by the
    worker writing the shard, and reported as the local run reports it (one line, the
    input named as given, exit 1); the plan keeps what other tasks wrote (for --resume),
    never a shard of the damaged split."""
    pytest.importorskip("apache_beam")
    import zipfile
    data = bytearray(open(src, "rb").read())
    with zipfile.ZipFile(src) as z:
        member = z.getinfo("x_train.npy")
    data[member.header_offset + 30 + len(member.filename) + 100000] ^= 0xFF
    (tmp_path / "bad.npz").write_bytes(bytes(data))
    (tmp_path / "cwd").mkdir()
    results = [cli("convert", os.path.join("..", "bad.npz"),
                   os.path.join("..", out, "m.tfrecord"), "--shards", "2", *extra,
                   cwd=tmp_path / "cwd", check=1)
               for out, extra in (("local", []), ("beam", beam_args(mode)))]
    assert last_error(results[0]) == last_error(results[1]) == (
        "Error: ../bad.npz: not a valid npz (zip) file (Bad CRC-32 for file "
        "'x_train.npy'); check that numpy wrote it whole, or name its format with --from")
    if mode == "in_memory":  # (worker processes print Beam's own log to their stderr)
        assert b"Traceback" not in results[1].stderr
    assert not (tmp_path / "local").exists()
    assert not [name for name in tree_hashes(tmp_path / "beam") if "train" in name]
