"""Output hashes: written files carry their SHA-256 (library and command line), except
where nobody will see it: inside fileio.unhashed_outputs(), which the command line uses
for -q without --json or --sha256sums."""

import hashlib
import json

import pytest

import mnistconv
from mnistconv.io import fileio
from helpers import make_idx_dir, run_main, small_digits


@pytest.fixture
def digits_dir(tmp_path):
    images, labels = small_digits(40)
    return make_idx_dir(tmp_path / "in", images, labels)


def file_sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.mark.parametrize("to, name", [("tfrecord", "d.tfrecord"), ("idx", "idx_out"),
                                      ("npz", "d.npz"), ("caffe-lmdb", "caffe_out")])
def test_library_hashes_by_default_and_not_inside_unhashed_outputs(digits_dir, tmp_path,
                                                                   to, name):
    ds = mnistconv.read(digits_dir)
    result = mnistconv.write(ds, tmp_path / "a" / name, to)
    assert result and all(f.sha256 == file_sha256(f.path) for f in result)
    with fileio.unhashed_outputs():
        again = mnistconv.write(ds, tmp_path / "b" / name, to)
    assert [f.bytes for f in again] == [f.bytes for f in result]
    if to != "npz":  # npz hashes on a thread of its own, whatever is asked
        assert all(f.sha256 is None for f in again)
    # and on again after the block
    third = mnistconv.write(ds, tmp_path / "c" / name, to)
    assert all(f.sha256 == file_sha256(f.path) for f in third)


def count_sha256(monkeypatch):
    """Count the SHA-256 objects fileio makes."""
    made = []
    real = hashlib.sha256

    def counting(*args):
        made.append(1)
        return real(*args)
    monkeypatch.setattr(fileio.hashlib, "sha256", counting)
    return made


def test_quiet_command_hashes_nothing(digits_dir, tmp_path, capsys, monkeypatch):
    made = count_sha256(monkeypatch)
    code, out, err = run_main(capsys, "idx-to-tfrecord", digits_dir,
                              tmp_path / "q.tfrecord", "-q")
    assert (code, out, err) == (0, "", "")
    assert made == []


@pytest.mark.parametrize("flags", [["-q", "--json"], []])
def test_shown_hashes_are_the_files(digits_dir, tmp_path, capsys, flags):
    target = tmp_path / "s.tfrecord"
    code, out, err = run_main(capsys, "idx-to-tfrecord", digits_dir, target, *flags)
    assert code == 0
    digest = file_sha256(target)
    if flags:
        assert [f["sha256"] for f in json.loads(out)["files"]] == [digest]
    else:
        assert f"sha256 {digest}" in err


def test_quiet_sha256sums_are_the_files(digits_dir, tmp_path, capsys):
    target = tmp_path / "out" / "s.tfrecord"
    code, out, err = run_main(capsys, "idx-to-tfrecord", digits_dir, target, "-q",
                              "--sha256sums")
    assert (code, out, err) == (0, "", "")
    assert (tmp_path / "out" / "SHA256SUMS").read_text() == \
        f"{file_sha256(target)}  s.tfrecord\n"
