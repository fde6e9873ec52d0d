"""Links the user meant (issue 35): --follow-links (and read(follow_links=True)) reads
through links that leave the input's tree, still refusing FIFOs and devices; a Hugging
Face cache snapshot (snapshots/<rev>/... linked into ../../blobs, laid out with
huggingface_hub's own link maker and recognised by its scan_cache_dir) reads as it is;
without the flag, a link leaving the tree is still refused in one line."""

import hashlib
import os
import shutil

import pytest

import mnistconv
from helpers import make_idx_dir, run, small_digits, stderr_of

LINKED = "train-images-idx3-ubyte"


@pytest.fixture
def linked_tree(tmp_path):
    """An IDX folder whose training images are a link to a copy outside it (as a DVC or
    git-annex checkout holds its files), and the same folder with the file itself."""
    images, labels = small_digits(40, seed=5)
    plain = tmp_path / "plain"
    make_idx_dir(plain, images, labels, "train")
    make_idx_dir(plain, *small_digits(10, seed=6), "test")
    tree = tmp_path / "tree"
    shutil.copytree(plain, tree)
    store = tmp_path / "annex"
    store.mkdir()
    os.replace(tree / LINKED, store / "SHA256E-s1--x")
    os.symlink(store / "SHA256E-s1--x", tree / LINKED)
    return plain, tree, store


def test_a_link_out_is_refused_without_the_flag(linked_tree, tmp_path):
    _, tree, store = linked_tree
    r = run("convert", tree, tmp_path / "out.npz")
    assert r.returncode == 2
    assert stderr_of(r) == (f"Error: {tree / LINKED}: leads outside {tree} (a symlink or "
                            "'..'); mnistconv reads only inside the tree it is given; copy "
                            "the file into the tree, or name it on its own\n")
    assert not (tmp_path / "out.npz").exists()
    with pytest.raises(mnistconv.UsageError, match="leads outside"):
        mnistconv.read(tree)


def test_follow_links_reads_through_them_on_every_reading_command(linked_tree, tmp_path):
    plain, tree, _ = linked_tree
    assert run("convert", plain, tmp_path / "plain.npz", "-q").returncode == 0
    r = run("convert", tree, tmp_path / "out.npz", "--follow-links", "-q")
    assert r.returncode == 0, stderr_of(r)
    assert (tmp_path / "out.npz").read_bytes() == (tmp_path / "plain.npz").read_bytes()
    for args in (["info", tree], ["card", tree, "-o", tmp_path / "c.html"],
                 ["show", tree], ["compare", tree, plain], ["preview", tree, "-o",
                                                          tmp_path / "p.png"]):
        r = run(*args, "--follow-links")
        assert r.returncode in (0, 1) and "leads outside" not in stderr_of(r), (args, r)
        assert run(*args).returncode == 2, args  # the flag lasts one command
    # the library keyword
    ds = mnistconv.read(tree, follow_links=True)
    assert ds.splits["train"].header.count == 40


def test_follow_links_still_refuses_fifos_and_devices(linked_tree, tmp_path):
    _, tree, store = linked_tree
    os.unlink(tree / LINKED)
    os.mkfifo(store / "fifo")
    os.symlink(store / "fifo", tree / LINKED)
    r = run("convert", tree, tmp_path / "out.npz", "--follow-links")
    assert (r.returncode, stderr_of(r)) == (2, (
        f"Error: {tree / LINKED}: is not a regular file (device, FIFO or socket); name a "
        "regular file or a directory\n"))
    os.unlink(tree / LINKED)
    os.symlink("/dev/zero", tree / LINKED)
    r = run("convert", tree, tmp_path / "out.npz", "--follow-links")
    assert r.returncode == 2 and "is not a regular file (device, FIFO or socket)" in \
        stderr_of(r)
    assert not (tmp_path / "out.npz").exists()


def _hf_snapshot(cache, data):
    """data's files in a Hugging Face hub cache, as hf_hub_download lays them out: each
    file a blob named by its hash, linked from snapshots/<rev>/<path> by
    huggingface_hub's own _create_symlink (a relative link into ../../blobs)."""
    from huggingface_hub.file_download import _create_symlink
    repo = cache / "datasets--someone--digits"
    revision = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    (repo / "blobs").mkdir()
    snapshot = repo / "snapshots" / revision
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        blob = repo / "blobs" / hashlib.sha256(path.read_bytes()).hexdigest()
        shutil.copyfile(path, blob)
        pointer = snapshot / path.relative_to(data)
        pointer.parent.mkdir(parents=True, exist_ok=True)
        _create_symlink(str(blob), str(pointer), new_blob=False)
    return repo, snapshot


def test_a_hugging_face_cache_snapshot_reads_as_it_is(tmp_path):
    pytest.importorskip("huggingface_hub")
    from huggingface_hub import scan_cache_dir
    make_idx_dir(tmp_path / "idx", *small_digits(30, seed=8), "train")
    make_idx_dir(tmp_path / "idx", *small_digits(10, seed=9), "test")
    assert run("convert", tmp_path / "idx", tmp_path / "data", "--to", "parquet",
               "-q").returncode == 0
    repo, snapshot = _hf_snapshot(tmp_path / "hub", tmp_path / "data")
    scanned = scan_cache_dir(tmp_path / "hub")
    assert [r.repo_id for r in scanned.repos] == ["someone/digits"] and not scanned.warnings
    links = [p for p in snapshot.rglob("*") if p.is_symlink()]
    assert links and all(os.readlink(p).startswith("../../") for p in links)
    assert run("convert", tmp_path / "data", tmp_path / "plain.npz", "-q").returncode == 0
    r = run("convert", snapshot, tmp_path / "hf.npz", "-q")
    assert r.returncode == 0, stderr_of(r)
    assert (tmp_path / "hf.npz").read_bytes() == (tmp_path / "plain.npz").read_bytes()
    one = sorted(p for p in links if p.name.endswith(".parquet"))[0]
    assert run("info", one).returncode == 0
    # A link in the snapshot out of the repository's folder is still refused.
    (tmp_path / "outside.parquet").write_bytes(one.read_bytes())
    os.unlink(one)
    os.symlink(tmp_path / "outside.parquet", one)
    r = run("convert", snapshot, tmp_path / "out.npz")
    assert r.returncode == 2 and f"Error: {one}: leads outside {snapshot}" in stderr_of(r)
