"""Caffe HDF5 list files (<split>.txt, HDF5Data's `source`): which files their entries
name. Caffe opens each entry as a path from the directory it runs in; mnistconv reads
only files in the list's folder (a name read from a file is never a path out of what
the user named): relative entries from that folder (else, as Caffe, from the current
directory), absolute ones only when they point into it."""

import shutil

import numpy as np
import pytest

from helpers import SAMPLE, run, stderr_of

h5py = pytest.importorskip("h5py")


def write_sample(folder):
    result = run("idx-to-caffe-hdf5", SAMPLE, folder, "-q", "--pixel-type", "uint8")
    assert result.returncode == 0, stderr_of(result)
    return folder


def test_the_written_list_names_absolute_paths_and_reads_from_anywhere(tmp_path):
    out = write_sample(tmp_path / "h")
    assert (out / "train.txt").read_text() == f"{out / 'train.h5'}\n"
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    r = run("convert", out / "train.txt", tmp_path / "o.npz", "-q", cwd=elsewhere)
    assert r.returncode == 0, stderr_of(r)
    with np.load(tmp_path / "o.npz") as z, h5py.File(out / "train.h5", "r") as f:
        np.testing.assert_array_equal(z["x_train"], f["data"][:, 0])


def test_a_list_of_names_reads_the_files_beside_it_wherever_the_folder_goes(tmp_path):
    out = write_sample(tmp_path / "h")
    for split in ("train", "test"):
        (out / f"{split}.txt").write_text(f"{split}.h5\n")
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    data = (moved / "train.h5").read_bytes()
    (moved / "train.h5").write_bytes(data[:-1])  # the copy is damaged, not the original
    r = run("convert", moved, tmp_path / "o.npz", "-q")
    assert r.returncode == 1
    line = stderr_of(r)
    assert line.startswith(f"Error: {moved / 'train.h5'}: is not a readable HDF5 file (")
    assert "truncated file" in line and line.count("\n") == 1
    assert not (tmp_path / "o.npz").exists()
    (moved / "train.h5").write_bytes(data)
    r = run("convert", moved, tmp_path / "o.npz", "-q")
    assert r.returncode == 0, stderr_of(r)


def test_an_entry_outside_the_lists_folder_is_refused_not_read(tmp_path):
    outside = write_sample(tmp_path / "outside")
    folder = tmp_path / "data"
    folder.mkdir()
    for entry in (str(outside / "train.h5"), "../outside/train.h5"):
        (folder / "train.txt").write_text(f"{entry}\n")
        before = sorted(tmp_path.rglob("*"))
        r = run("convert", folder / "train.txt", tmp_path / "o.npz", cwd=folder)
        assert r.returncode == 1
        assert stderr_of(r) == (
            f"Error: {folder / 'train.txt'}: names '{entry}', which is outside the "
            "list's folder; mnistconv reads only .h5 files in their list's folder: list "
            "them by name (train.h5), or move them beside the list\n")
        assert sorted(tmp_path.rglob("*")) == before


def test_a_copied_folder_whose_list_names_the_originals_is_refused(tmp_path):
    out = write_sample(tmp_path / "h")
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    r = run("convert", copy, tmp_path / "o.npz")
    assert r.returncode == 1
    assert stderr_of(r) == (
        f"Error: {copy / 'test.txt'}: names '{out / 'test.h5'}', which is outside the "
        "list's folder; mnistconv reads only .h5 files in their list's folder: list "
        "them by name (train.h5), or move them beside the list\n")


def test_caffes_own_relative_entries_are_read_from_the_current_directory(tmp_path):
    """Caffe's lists name files from Caffe's root (src/caffe/test/test_data/
    sample_data_list.txt lists src/caffe/test/test_data/sample_data.h5)."""
    out = write_sample(tmp_path / "examples" / "mnist")
    (out / "train.txt").write_text("examples/mnist/train.h5\n")
    r = run("convert", "examples/mnist/train.txt", tmp_path / "o.npz", "-q", cwd=tmp_path)
    assert r.returncode == 0, stderr_of(r)
    r = run("convert", out / "train.txt", tmp_path / "p.npz", "-q", cwd=out)
    assert r.returncode == 1
    assert stderr_of(r) == (f"Error: {out / 'train.txt'}: names 'examples/mnist/train.h5', "
                            "which is not a file in the list's folder; fix the list, or put "
                            "the file beside it\n")


def test_an_absolute_entry_read_through_a_symlinked_folder(tmp_path):
    out = write_sample(tmp_path / "h")
    link = tmp_path / "link"
    link.symlink_to(out, target_is_directory=True)
    r = run("convert", link / "train.txt", tmp_path / "o.npz", "-q")
    assert r.returncode == 0, stderr_of(r)
