"""In-process tests for rules of issues 35-39 that only process tests pinned before, each
found by planting a bug from tests/mutants.py that `make check` let through (the
mutant's name is in each test's docstring). Oracles come from the rule: the flag lasts
one command, a changed pixel is another plan, --force leaves exactly the last run's
files."""

import json
import os

import numpy as np
import pytest

import mnistconv
from helpers import make_idx_dir, run_main, small_digits
from mnistconv.model.records import ArraySplit, Dataset

LINKED = "train-images-idx3-ubyte"


def test_follow_links_lasts_one_command(tmp_path, capsys):
    """follow-links-leaks-past-its-block: --follow-links trusts the tree for its own
    command only; the next command in the same process refuses the link again."""
    tree, store = tmp_path / "tree", tmp_path / "annex"
    make_idx_dir(tree, *small_digits(12, seed=5))
    store.mkdir()
    os.replace(tree / LINKED, store / "blob")
    os.symlink(store / "blob", tree / LINKED)
    code, out, _ = run_main(capsys, "info", tree, "--follow-links")
    assert code == 0 and "12" in out
    code, _, err = run_main(capsys, "info", tree)
    assert code == 2
    assert err == (f"Error: {tree / LINKED}: leads outside {tree} (a symlink or '..'); "
                   "mnistconv reads only inside the tree it is given; copy the file into "
                   "the tree, or name it on its own\n")


def _digits(flip=None):
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, (90, 8, 8), np.uint8)
    if flip is not None:
        images[flip] ^= 0xFF
    return Dataset("npz", {"train": ArraySplit("train", images,
                                               (np.arange(90) % 10).astype(np.uint8))})


def test_resume_refuses_an_input_with_one_pixel_changed(tmp_path, capsys, monkeypatch):
    """resume-hashes-one-image-a-batch: the plan hashes every pixel, so an input whose
    sixth image differs by one pixel (labels and indices the same) is another plan."""
    src = tmp_path / "in.npz"
    out = tmp_path / "o" / "m.tfrecord"
    monkeypatch.chdir(tmp_path)
    mnistconv.write(_digits(), str(src), "npz")
    args = ("convert", src, out, "--shards", "2", "-q")
    assert run_main(capsys, *args, "--num-tasks", "2", "--task-index", "0")[0] == 0
    mnistconv.write(_digits(flip=(5, 3, 3)), str(src), "npz", force=True)
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 2
    assert err.startswith(f"Error: {tmp_path / 'o' / '.m.tfrecord.mnistconv-plan.json'}: "
                          "holds the progress of another plan")
    # The same input again is the same plan: the resume finishes it.
    mnistconv.write(_digits(), str(src), "npz", force=True)
    assert run_main(capsys, *args, "--resume")[0] == 0


def test_force_removes_the_index_files_of_the_earlier_shard_set(tmp_path):
    """force-keeps-old-side-files: a TFRecord set of 3 shards with .idx files, replaced
    with --force by 2 shards without them, leaves the 2 shards and nothing else."""
    ds = _digits()
    out = tmp_path / "out" / "m.tfrecord"
    mnistconv.write(ds, str(out), "tfrecord", shards=3, index_files=True)
    first = sorted(os.listdir(out.parent))
    assert len(first) == 6 and sum(n.endswith(".idx") for n in first) == 3
    mnistconv.write(ds, str(out), "tfrecord", shards=2, force=True)
    assert sorted(os.listdir(out.parent)) == ["m.tfrecord-00000-of-00002",
                                              "m.tfrecord-00001-of-00002"]


def test_the_door_takes_exactly_the_classes_a_format_holds(tmp_path):
    """door-max-classes-off-by-one: GDMNIST1 holds at most 256 classes (a label is one
    byte), so 256 named classes pass the door and read back; 257 are refused."""
    labels = np.arange(256, dtype=np.uint8)
    split = ArraySplit("train", np.zeros((256, 2, 2), np.uint8), labels)
    split.header = split.header.with_(class_names=tuple(f"c{i}" for i in range(256)))
    mnistconv.write(Dataset("npz", {"train": split}), str(tmp_path / "g.bin"))
    back, = mnistconv.read(tmp_path / "g.bin").splits.values()
    assert back.labels().tolist() == list(range(256))
    wide = ArraySplit("train", np.zeros((2, 2, 2), np.uint8), np.array([0, 1], np.uint16))
    wide.header = wide.header.with_(class_names=tuple(f"c{i}" for i in range(257)))
    try:
        mnistconv.write(Dataset("npz", {"train": wide}), str(tmp_path / "h.bin"))
    except mnistconv.CannotWrite as e:
        assert str(e).startswith("train: gdmnist cannot hold split train's 257 classes "
                                 "(it holds at most 256)")
    else:
        raise AssertionError("257 classes written to GDMNIST1")
    assert not (tmp_path / "h.bin").exists()


def test_grayscale_is_pillows_luma_to_the_byte():
    """grayscale-truncates: --grayscale is ITU-R 601-2 luma rounded as Pillow's
    convert('L') rounds it; Pillow is the oracle, over every RGB value class."""
    from PIL import Image

    from mnistconv.model.stream import to_grayscale
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, (64, 64, 3), np.uint8)
    rgb[0, :3] = [[0, 1, 0], [0, 0, 3], [255, 255, 255]]
    expected = np.asarray(Image.fromarray(rgb, "RGB").convert("L"))
    assert to_grayscale(rgb[None])[0].tolist() == expected.tolist()
    assert to_grayscale(rgb[None])[0, 0, :3].tolist() == [1, 0, 255]  # (38470 + 32768) >> 16
    rgba = np.dstack([rgb, rng.integers(0, 256, (64, 64), np.uint8)])
    assert to_grayscale(rgba[None])[0].tolist() == \
        np.asarray(Image.fromarray(rgba, "RGBA").convert("L")).tolist()


def test_a_cifar10_python_label_of_ten_is_past_the_classes(tmp_path, capsys):
    """cifar-python-label-limit-off-by-one: CIFAR-10's labels are 0..9; 9 reads, 10 is
    the first refused."""
    from test_cifar import images_and_labels
    from test_cifar_python import planes, py2_pickle
    folder = tmp_path / "c"
    folder.mkdir()
    x, _ = images_and_labels(3, 10, 0)
    (folder / "test_batch").write_bytes(py2_pickle({"labels": [0, 9, 9], "data": planes(x)}))
    assert mnistconv.read(folder).splits["test"].labels().tolist() == [0, 9, 9]
    (folder / "test_batch").write_bytes(py2_pickle({"labels": [0, 9, 10], "data": planes(x)}))
    code, _, err = run_main(capsys, "info", folder)
    assert code == 1
    assert err == (f"Error: {folder / 'test_batch'}: labels[2] is 10, outside 0..9; the "
                   "file is damaged: download it again\n")


def test_an_svhn_label_of_zero_is_outside_one_to_ten(tmp_path, capsys):
    """svhn-label-zero-accepted: SVHN stores the digit 0 as 10, so y holds 1..10; a 0
    is damage (10 reads as 0, 0 is refused), not a digit."""
    scipy_io = pytest.importorskip("scipy.io")
    images = np.zeros((32, 32, 3, 3), np.uint8)
    path = tmp_path / "test_32x32.mat"
    scipy_io.savemat(path, {"X": images, "y": np.array([[1.], [10.], [9.]])})
    assert mnistconv.read(path).splits["test"].labels().tolist() == [1, 0, 9]
    scipy_io.savemat(path, {"X": images, "y": np.array([[1.], [10.], [0.]])})
    code, _, err = run_main(capsys, "convert", path, tmp_path / "o.npz")
    assert code == 1
    assert err.startswith(f"Error: {path}: y[2] is 0.0, SVHN's labels are 1..10 (10 for "
                          "the digit 0)")
    assert not (tmp_path / "o.npz").exists()


def test_a_fraction_of_a_unit_counts_every_digit():
    """size-fraction-scale: 1.25 GiB is five quarters of 2**30 bytes, 0.125 MB an
    eighth of 10**6; a fraction's digits scale by their own count."""
    from mnistconv.limits import parse_bytes
    assert parse_bytes("1.25GiB", "--x") == 5 * 2 ** 30 // 4 == 1_342_177_280
    assert parse_bytes("0.125MB", "--x") == 125_000
    assert parse_bytes("2.5kB", "--x") == 2_500


def test_a_dead_runs_journal_acts_only_inside_its_folder(tmp_path):
    """journal-step-beside-its-folder: a journal left in an output folder is carried out
    there only; a step naming a sibling folder whose name begins with the same letters
    (o and o2) makes the journal not mnistconv's, and nothing outside is touched."""
    from mnistconv.io import journal
    out, beside = tmp_path / "o", tmp_path / "o2"
    out.mkdir()
    beside.mkdir()
    victim, stale = beside / "victim.txt", out / "stale.txt"
    victim.write_text("the user's\n")
    stale.write_text("an earlier set's\n")
    dead = 4_194_305  # past Linux's largest pid: no such process
    steps = {"pid": dead, "steps": [["remove", "../o2/victim.txt",
                                     journal.entry_id(str(victim))]]}
    (out / f"{journal.JOURNAL_MARK}{dead}").write_text(json.dumps(steps))
    assert journal.complete(str(out))
    assert victim.read_text() == "the user's\n"
    assert os.listdir(out) == ["stale.txt"]  # the journal, not ours, is gone
    # The same step inside its folder is carried out.
    steps["steps"] = [["remove", "stale.txt", journal.entry_id(str(stale))]]
    (out / f"{journal.JOURNAL_MARK}{dead}").write_text(json.dumps(steps))
    assert journal.complete(str(out))
    assert os.listdir(out) == [] and victim.exists()


def test_one_record_holds_the_largest_image_at_four_bytes_a_pixel():
    """record-cap-one-byte-a-pixel: a stored record may hold the largest image mnistconv
    takes at 4 bytes a pixel (float32) plus 1 MiB: with --max-image-size 1024x1024,
    4 MiB + 1 MiB = 5,242,880 bytes pass and one byte more is refused."""
    from mnistconv.io import budget
    from mnistconv import limits
    from mnistconv.errors import OverLimit
    before = limits.set_max_image_pixels(1024 * 1024)
    try:
        budget.check_record("x.tfrecord", "record 0", 5_242_880)
        with pytest.raises(OverLimit) as e:
            budget.check_record("x.tfrecord", "record 0", 5_242_881)
        assert str(e.value).startswith("x.tfrecord: record 0: record of 5,242,881 bytes, "
                                       "more than mnistconv's limit of 5,242,880 bytes")
    finally:
        limits.set_max_image_pixels(before)
