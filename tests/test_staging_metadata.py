"""An output and its metadata (croissant.json, SHA256SUMS) are one commit (issues 24
and 28): a failure while the metadata is written leaves the earlier output set exactly
as it was, and --force replaces the whole earlier set of that name."""

import errno
import hashlib
import json

import numpy as np
import pytest

import mnistconv
from mnistconv import ArraySplit, Dataset
from mnistconv.io.staging import StagedOutput, one_commit
from helpers import run_main, small_digits


def dataset(seed=3):
    return Dataset("t", {"train": ArraySplit("train", *small_digits(30, seed=seed)),
                         "test": ArraySplit("test", *small_digits(12, seed=seed + 1))})


def tree(root):
    """{relative path: bytes} of every file under root, hidden staging names included."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def no_space(path):
    return OSError(errno.ENOSPC, "No space left on device", str(path))


def fail_before_metadata(monkeypatch):
    """croissant.json fails before anything of it is written."""
    def document(*args, **kwargs):
        raise no_space("croissant.json")
    monkeypatch.setattr("mnistconv.describe.croissant.document", document)


def fail_during_metadata(monkeypatch):
    """croissant.json fails half written, inside its own staging."""
    def write_text_output(path, text, force=False):
        with StagedOutput(force) as out:
            with open(out.file(path), "w") as f:
                f.write(text[:20])
            raise no_space(path)
    monkeypatch.setattr("mnistconv.io.fileio.write_text_output", write_text_output)


@pytest.mark.parametrize("fail", [fail_before_metadata, fail_during_metadata])
@pytest.mark.parametrize("fmt, options", [("parquet", {"shards": 1}),
                                          ("imagefolder", {})])
def test_a_failed_croissant_json_leaves_the_earlier_set_untouched(tmp_path, monkeypatch,
                                                                  fail, fmt, options):
    out = tmp_path / "out"
    mnistconv.write(dataset(), str(out), fmt, **({"shards": 2} if options else {}))
    before = tree(out)
    assert "croissant.json" in before
    fail(monkeypatch)
    with pytest.raises(OSError) as raised:
        mnistconv.write(dataset(seed=7), str(out), fmt, force=True, **options)
    assert raised.value.errno == errno.ENOSPC
    assert tree(out) == before  # not one new shard, image or staging file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_failed_croissant_json_leaves_no_new_output(tmp_path, monkeypatch):
    fail_during_metadata(monkeypatch)
    with pytest.raises(OSError):
        mnistconv.write(dataset(), str(tmp_path / "hf"), "parquet")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("failing", ["mnistconv.cli.convert._sums_line",
                                     "mnistconv.describe.card.render_card"])
def test_a_failed_sha256sums_or_card_leaves_the_earlier_set_untouched(
        tmp_path, monkeypatch, capsys, failing):
    out = tmp_path / "out"
    np.savez(tmp_path / "s.npz", x_train=small_digits(40)[0], y_train=small_digits(40)[1])
    base = ["convert", tmp_path / "s.npz", out / "m.tfrecord", "-q", "--sha256sums",
            "--card"]
    assert run_main(capsys, *base, "--shards", "4")[0] == 0
    before = tree(out)
    assert len(before) == 6  # four shards, SHA256SUMS, the card

    def fail(*args, **kwargs):
        raise no_space(out / "metadata")
    monkeypatch.setattr(failing, fail)
    code, _, err = run_main(capsys, *base, "--shards", "2", "--force")
    assert (code, err.count("\n")) == (1, 1) and err.startswith(f"Error: {out}/metadata: ")
    assert tree(out) == before


def test_force_leaves_exactly_the_new_set(tmp_path, capsys):
    """An earlier Parquet set of three shards a split, its card, croissant.json and
    SHA256SUMS, replaced with --force by one of one shard: exactly the new files, and
    metadata that lists exactly them."""
    pytest.importorskip("pyarrow")
    np.savez(tmp_path / "s.npz", x_train=small_digits(40)[0], y_train=small_digits(40)[1],
             x_test=small_digits(9)[0], y_test=small_digits(9)[1])
    out = tmp_path / "hf"
    base = ["convert", tmp_path / "s.npz", out, "--to", "parquet", "-q", "--sha256sums"]
    assert run_main(capsys, *base, "--shards", "3")[0] == 0
    assert len(list((out / "data").iterdir())) == 6
    assert run_main(capsys, *base, "--shards", "1", "--force")[0] == 0
    new = ["data/test-00000-of-00001.parquet", "data/train-00000-of-00001.parquet",
           "README.md", "croissant.json"]
    files = tree(out)
    assert sorted(files) == sorted(new + ["SHA256SUMS"])
    sums = {line.split("  ", 1)[1]: line.split("  ", 1)[0]
            for line in files["SHA256SUMS"].decode().splitlines()}
    assert sums == {name: hashlib.sha256(files[name]).hexdigest() for name in new}
    doc = json.loads(files["croissant.json"])
    assert sorted(d["contentUrl"] for d in doc["distribution"]) == new[:2]


def test_force_without_card_removes_the_earlier_card(tmp_path, capsys):
    np.savez(tmp_path / "s.npz", x_train=small_digits(20)[0], y_train=small_digits(20)[1])
    base = ["convert", tmp_path / "s.npz", tmp_path / "m.npz", "-q"]
    assert run_main(capsys, *base, "--card")[0] == 0
    assert (tmp_path / "m.npz.card.html").is_file()
    assert run_main(capsys, *base, "--limit", "5", "--force")[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz", "s.npz"]


def test_sha256sums_beside_a_new_directory_output(tmp_path, capsys):
    """SHA256SUMS staged inside a directory output that did not exist: the directory
    appears once, with the data and the sums in it."""
    np.savez(tmp_path / "s.npz", x_train=small_digits(20)[0], y_train=small_digits(20)[1])
    out = tmp_path / "idx"
    code, _, err = run_main(capsys, "convert", tmp_path / "s.npz", out, "--to", "idx", "-q",
                            "--sha256sums")
    assert code == 0, err
    files = tree(out)
    assert sorted(files) == ["SHA256SUMS", "train-images-idx3-ubyte",
                             "train-labels-idx1-ubyte"]
    for line in files["SHA256SUMS"].decode().splitlines():
        digest, name = line.split("  ", 1)
        assert hashlib.sha256(files[name]).hexdigest() == digest


def test_one_commit_aborts_every_output_when_its_block_fails(tmp_path):
    (tmp_path / "a").write_text("old a")
    with pytest.raises(KeyboardInterrupt):
        with one_commit():
            with StagedOutput(force=True) as out:
                with open(out.file(tmp_path / "a"), "w") as f:
                    f.write("new a")
            with StagedOutput() as out:
                with open(out.file(tmp_path / "sub" / "b"), "w") as f:
                    f.write("new b")
            assert (tmp_path / "a").read_text() == "old a"  # staged, not yet in place
            raise KeyboardInterrupt
    assert tree(tmp_path) == {"a": b"old a"}
