"""TFRecord record index files (--index-files: `<shard>.idx`, DALI's tfrecord2idx
format): read by the `tfrecord` package's indexed loader in parts, used by mnistconv's
reader for --limit, --per-class and `show --index` (reading only the records needed),
and refused in one line when they do not hold to their file. (Not the original-index
feature of test_tfrecord_index.py.)"""

import numpy as np
import pytest

import mnistconv
from mnistconv import ArraySplit, Dataset
from helpers import cli_fails, run, small_digits, stderr_of
from tfrecord_helpers import framed_sizes


def write_indexed(tmp_path, n=200, shards=3, image_format="png"):
    images, labels = small_digits(n, seed=4)
    ds = Dataset("t", {"train": ArraySplit("train", images, labels)})
    out = tmp_path / "m.tfrecord"
    files = mnistconv.write(ds, str(out), "tfrecord", image_format=image_format,
                            shards=shards, index_files=True)
    data = [f.path for f in files if not f.path.endswith(".idx")]
    return images, labels, data, files


def test_each_shard_gets_an_index_of_offset_length_lines(tmp_path):
    _, _, data, files = write_indexed(tmp_path)
    names = [f.path.rsplit("/", 1)[1] for f in files]
    assert names == ["m.tfrecord-00000-of-00003", "m.tfrecord-00000-of-00003.idx",
                     "m.tfrecord-00001-of-00003", "m.tfrecord-00001-of-00003.idx",
                     "m.tfrecord-00002-of-00003", "m.tfrecord-00002-of-00003.idx"]
    for path in data:
        lines = open(path + ".idx").read().splitlines()
        assert [tuple(map(int, line.split(" "))) for line in lines] == framed_sizes(path)


# The tfrecord package registers its own tensorflow.BytesList protos, which TensorFlow
# refuses to register again in the same process: it runs in a process of its own.
PARTS = """
import json, sys
import numpy as np
from tfrecord.reader import tfrecord_loader
out = []
for path in sys.argv[1:]:
    for part in range(4):
        for rec in tfrecord_loader(path, path + ".idx", {"image": "byte", "label": "int"},
                                   shard=(part, 4)):
            out.append([bytes(rec["image"]).hex(), int(np.argmax(rec["label"]))])
print(json.dumps(out))
"""

TORCH = """
import json, sys
import numpy as np
import torch
from tfrecord.torch.dataset import TFRecordDataset
path = sys.argv[1]
dataset = TFRecordDataset(path, path + ".idx", {"image": "byte", "label": "int"})
loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
workers = [[bytes(np.asarray(r["image"])).hex(), int(np.argmax(r["label"]))]
           for r in loader]
alone = [int(np.argmax(r["label"])) for r in dataset]
print(json.dumps([workers, alone]))
"""


def in_own_process(code, *args):
    import json
    import subprocess
    import sys
    import importlib.util
    if importlib.util.find_spec("tfrecord") is None:  # (not imported here: see above)
        pytest.skip("the tfrecord package is not installed (make test installs it)")
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return json.loads(r.stdout)


def test_the_tfrecord_package_reads_every_shard_in_parts(tmp_path):
    images, labels, data, _ = write_indexed(tmp_path, image_format="raw")
    got = in_own_process(PARTS, *data)
    assert [label for _, label in got] == labels.tolist()
    assert [bytes.fromhex(image) for image, _ in got] == [im.tobytes() for im in images]


def test_the_tfrecord_package_torch_dataset_splits_work_through_the_index(tmp_path):
    """Two DataLoader workers each read their part of the file through the index
    (without workers the package starts at a random record: a rotation)."""
    pytest.importorskip("torch")
    images, labels, data, _ = write_indexed(tmp_path, shards=1, image_format="raw")
    workers, alone = in_own_process(TORCH, data[0])
    assert sorted((bytes.fromhex(im), y) for im, y in workers) == \
        sorted((im.tobytes(), int(y)) for im, y in zip(images, labels))
    assert len(alone) == len(labels) and \
        (alone == labels.tolist() or any(alone[-k:] + alone[:-k] == labels.tolist()
                                         for k in range(1, len(alone))))


def corrupt_record(path, number):
    """Flip a byte inside record `number`'s data: a full read refuses the file."""
    offset, length = framed_sizes(path)[number]
    blob = bytearray(open(path, "rb").read())
    blob[offset + 20] ^= 0xFF
    open(path, "wb").write(bytes(blob))


def test_limit_and_per_class_read_only_the_records_they_need(tmp_path):
    images, labels, data, _ = write_indexed(tmp_path, shards=1)
    corrupt_record(data[0], 150)  # far past what the selections need
    out = tmp_path / "a.npz"
    r = run("convert", data[0], out, "--limit", "7", "-q")
    assert r.returncode == 0, stderr_of(r)
    got = np.load(out)
    assert got["y_train"].tolist() == labels[:7].tolist()
    assert np.array_equal(got["x_train"], images[:7])
    r = run("convert", data[0], tmp_path / "b.npz", "--per-class", "2", "-q")
    assert r.returncode == 0, stderr_of(r)
    got = np.load(tmp_path / "b.npz")
    firsts = [np.flatnonzero(labels == c)[:2] for c in range(10)]
    expected = np.stack(firsts, axis=1).reshape(-1)
    assert got["y_train"].tolist() == labels[expected].tolist()
    assert np.array_equal(got["x_train"], images[expected])
    r = run("show", data[0], "--index", "3,9", "--ascii")
    assert r.returncode == 0, stderr_of(r)
    assert f"{labels[3]} #3" in r.stdout.decode() and f"{labels[9]} #9" in r.stdout.decode()
    # Without the index the whole file is read, and the damage is found.
    (tmp_path / (data[0].rsplit("/", 1)[1] + ".idx")).unlink()
    r = run("convert", data[0], tmp_path / "c.npz", "--limit", "7", "-q")
    assert r.returncode == 1 and "record 150" in stderr_of(r)


def test_a_full_read_is_the_same_with_or_without_indexes(tmp_path):
    _, _, data, _ = write_indexed(tmp_path, shards=2)
    with_idx = run("convert", tmp_path / "m.tfrecord", tmp_path / "a.npz", "-q")
    for path in data:
        (tmp_path / (path.rsplit("/", 1)[1] + ".idx")).unlink()
    without = run("convert", tmp_path / "m.tfrecord", tmp_path / "b.npz", "-q")
    assert with_idx.returncode == without.returncode == 0
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()


@pytest.mark.parametrize("edit, message", [
    (lambda lines: lines[:-1], "its last record ends at byte"),
    (lambda lines: lines + ["999999999 20"], "leaves a gap after the record before"),
    (lambda lines: [lines[0], "10 " + lines[1].split()[1]] + lines[2:],
     "line 2: the record at offset 10 overlaps the record before"),
    (lambda lines: lines[:-1] + [lines[-1].split()[0] + " 99999999"],
     "past the end of"),
    (lambda lines: ["0 x"] + lines[1:], "line 1 is not '<offset> <length>'"),
    (lambda lines: ["0 4"] + lines[1:], "line 1: a record of 4 bytes is shorter"),
])
def test_a_wrong_index_is_one_line(tmp_path, edit, message):
    _, _, data, _ = write_indexed(tmp_path, shards=1)
    idx = tmp_path / "m.tfrecord.idx"
    idx.write_text("\n".join(edit(idx.read_text().splitlines())) + "\n")
    line = cli_fails(tmp_path, "convert", data[0], tmp_path / "o.npz", "--limit", "3")
    assert line.startswith(f"Error: {idx}: ") and message in line, line


def test_an_index_that_frames_other_records_is_refused(tmp_path):
    """Back to back and the right total, but not where the records start."""
    _, _, data, _ = write_indexed(tmp_path, shards=1)
    idx = tmp_path / "m.tfrecord.idx"
    pairs = [tuple(map(int, line.split())) for line in idx.read_text().splitlines()]
    (o1, n1), (o2, n2) = pairs[0], pairs[1]
    pairs[0:2] = [(o1, n1 + 1), (o2 + 1, n2 - 1)]
    idx.write_text("".join(f"{o} {n}\n" for o, n in pairs))
    line = cli_fails(tmp_path, "show", data[0], "--index", "1")
    assert "record 0 (counting from 0) (at byte 0, from" in line and \
        "no record starts there" in line, line


def test_index_files_refuse_compression_and_stdout(tmp_path):
    images, labels = small_digits(20)
    src = tmp_path / "s.npz"
    np.savez(src, x_train=images, y_train=labels)
    r = run("convert", src, tmp_path / "o.tfrecord.gz", "--index-files")
    assert r.returncode == 2 and "--index-files indexes uncompressed files" in stderr_of(r)
    r = run("convert", src, "-", "--to", "tfrecord", "--index-files")
    assert r.returncode == 2 and "--index-files" in stderr_of(r)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.npz"]


def test_rewriting_without_indexes_removes_the_stale_ones(tmp_path):
    _, _, data, _ = write_indexed(tmp_path, shards=1)
    images, labels = small_digits(30)
    ds = Dataset("t", {"train": ArraySplit("train", images, labels)})
    mnistconv.write(ds, data[0], "tfrecord", force=True)
    assert not (tmp_path / "m.tfrecord.idx").exists()
    assert mnistconv.read(data[0]).splits["train"].header.count == 30


def _fifo(path):
    import os
    os.mkfifo(path)


@pytest.mark.parametrize("replace, message", [
    (lambda idx: idx.symlink_to("/dev/zero"), "leads outside"),
    (lambda idx: idx.symlink_to("/etc/passwd"), "leads outside"),
    (_fifo, "is not a regular file (device, FIFO or socket)"),
    (lambda idx: idx.mkdir(), "is a directory"),
])
def test_an_index_that_is_no_regular_file_in_the_folder_is_refused_on_any_read(
        tmp_path, replace, message):
    """Whatever stands under an index's name is judged like any input, also by a full
    read that does not need the index (the fuzz pass found /dev/zero, FIFO and folder
    ones passed over, where a linked /etc/passwd was refused)."""
    _, _, data, _ = write_indexed(tmp_path, shards=1)
    idx = tmp_path / "m.tfrecord.idx"
    idx.unlink()
    replace(idx)
    r = run("convert", data[0], tmp_path / "o.npz", "-q")
    lines = stderr_of(r).strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"Error: {idx}: ") and message in lines[0], lines
    assert not (tmp_path / "o.npz").exists()
