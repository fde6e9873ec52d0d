"""Links are not doors (issue 24, classes 1 and 3), walked over the registry.

Inputs: in a tree every reader wrote, each file and each folder in turn is moved out
and replaced by a symlink to it; the moved files are FIFOs, so a reader that opened
one would block (the alarm fails the test) and one that read a link's target would
succeed. Every read must be refused with one error naming the link, before anything
is read. A link that stays inside the tree reads as the file itself.

Outputs: in a tree every writer wrote, each folder in turn becomes a link to a victim
folder; writing again with force is refused naming the link, and the victim keeps
every byte. A file that is a link is replaced by the new file, never written through.
"""

import hashlib
import os
import shutil
import signal
import stat

import numpy as np
import pytest

import mnistconv
from mnistconv.formats import registry
from mnistconv.errors import FormatError, MnistconvError, UsageError
from helpers import REPO, run

# Every writer whose output is a tree of several files (npz is one file, no tree).
TREE_WRITERS = [w.name for w in registry.writers() if w.can_read and w.name != "npz"]


def _dataset():
    rng = np.random.default_rng(0)

    def split(n, name):
        return mnistconv.ArraySplit(name, rng.integers(0, 256, (n, 8, 8), dtype=np.uint8),
                                    np.arange(n, dtype=np.uint8) % 3)
    return mnistconv.Dataset("gen", {"train": split(6, "train"), "test": split(4, "test")})


def _tree(tmp_path, fmt):
    root = tmp_path / "tree"
    mnistconv.write(_dataset(), str(root) + "/", fmt, **_options(fmt))
    return root


def _options(fmt):
    """TFDS names its folder by the dataset: given, since generated data proves none."""
    return {"name": "mnist"} if fmt == "tfds" else {}


def _members(root):
    """Every file and folder below root, relative, deepest first (a folder's files
    before it)."""
    found = []
    for folder, dirs, files in os.walk(root, topdown=False):
        found += [os.path.relpath(os.path.join(folder, n), root) for n in files + dirs]
    return sorted(found, key=lambda p: (-p.count(os.sep), p))


def _fifos_instead(path):
    """Replace a file, or every file under a folder, by a FIFO of the same name."""
    files = [path] if os.path.isfile(path) else \
        [os.path.join(f, n) for f, _, names in os.walk(path) for n in names]
    for f in files:
        os.unlink(f)
        os.mkfifo(f)


def _read_all(path, fmt):
    ds = mnistconv.read(str(path), fmt)
    counts = {}
    for name, split in ds.splits.items():
        split.labels()
        counts[name] = sum(len(b.images) for b in split.batches())
    return counts


@pytest.fixture
def alarm():
    """A blocked open (a FIFO read by mistake) fails the test instead of hanging it."""
    def ring(*_):
        raise TimeoutError("blocked: a FIFO outside the tree was opened")
    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)



@pytest.mark.parametrize("fmt", TREE_WRITERS)
def test_every_link_out_of_an_input_tree_is_refused_and_nothing_read(tmp_path, fmt, alarm):
    root = _tree(tmp_path, fmt)
    members = _members(root)
    assert members
    outside = tmp_path / "outside"
    outside.mkdir()
    for n, member in enumerate(members):
        here = tmp_path / f"case{n}"
        shutil.copytree(root, here / "tree", symlinks=True)
        link = here / "tree" / member
        away = outside / f"{n}-{os.path.basename(member)}"
        shutil.move(str(link), str(away))
        _fifos_instead(str(away))
        os.symlink(away, link)
        for detect in (fmt, None):
            with pytest.raises(MnistconvError) as caught:
                _read_all(here / "tree", detect)
            error = caught.value
            assert error.exit_code in (1, 2)
            assert "\n" not in str(error)
            shown = str(error)
            assert os.path.basename(member) in shown, (fmt, member, shown)
            assert "outside" in shown, (fmt, member, shown)


@pytest.mark.parametrize("fmt", TREE_WRITERS)
def test_a_link_that_stays_inside_the_tree_is_read(tmp_path, fmt, alarm):
    root = _tree(tmp_path, fmt)
    expected = _read_all(root, fmt)
    member = next(m for m in _members(root) if os.path.isfile(root / m))
    inside = root / ".kept"
    inside.mkdir()
    shutil.move(str(root / member), str(inside / "moved"))
    os.symlink(os.path.relpath(inside / "moved", (root / member).parent), root / member)
    assert _read_all(root, fmt) == expected


def test_imagefolder_class_folder_out_of_the_tree_is_one_line_exit_2(tmp_path):
    root = _tree(tmp_path, "imagefolder")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(root / "train" / "1"), str(elsewhere))
    os.symlink("../../elsewhere", root / "train" / "1")
    result = run("convert", root, tmp_path / "out.npz", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode() == (
        f"Error: {root}/train/1: leads outside {root} (a symlink or '..'); mnistconv "
        "reads only inside the tree it is given; copy the file into the tree, or name "
        "it on its own\n")
    assert not (tmp_path / "out.npz").exists()


def test_a_named_input_may_itself_be_a_link(tmp_path):
    root = _tree(tmp_path, "imagefolder")
    os.symlink(root, tmp_path / "named")
    assert _read_all(tmp_path / "named", "imagefolder") == {"train": 6, "test": 4}


@pytest.mark.parametrize("side", ["classes.txt", "train-labels-idx1-ubyte"])
def test_idx_side_files_linked_out_are_refused(tmp_path, side, alarm):
    ds = _dataset()
    for split in ds.splits.values():
        split.header = split.header.with_(class_names=("a", "b", "c"))
    mnistconv.write(ds, str(tmp_path / "idx") + "/", "idx")
    assert (tmp_path / "idx" / "classes.txt").read_text() == "a\nb\nc\n"
    os.unlink(tmp_path / "idx" / side) if side == "classes.txt" else \
        shutil.move(str(tmp_path / "idx" / side), str(tmp_path / side))
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "fifo", tmp_path / "idx" / side)
    for named in (tmp_path / "idx", tmp_path / "idx" / "train-images-idx3-ubyte"):
        with pytest.raises(UsageError, match="leads outside"):
            _read_all(named, "idx")


def test_tfds_labels_file_linked_to_etc_passwd_is_refused(tmp_path):
    root = _tree(tmp_path, "tfds")
    labels = root / "mnist" / "1.0.0" / "label.labels.txt"
    labels.unlink()
    os.symlink("/etc/passwd", labels)
    with pytest.raises(UsageError) as caught:
        mnistconv.read(str(root), "tfds")
    assert str(caught.value).startswith(f"{labels}: leads outside ")


def test_tfds_feature_name_is_data_never_a_path(tmp_path):
    import json
    root = _tree(tmp_path, "tfds")
    features = root / "mnist" / "1.0.0" / "features.json"
    data = json.loads(features.read_text())
    entries = data["featuresDict"]["features"]
    entries["../../x"] = entries.pop("label")
    features.write_text(json.dumps(data))
    (tmp_path / "x.labels.txt").write_text("a\nb\nc\n")
    with pytest.raises(FormatError) as caught:
        mnistconv.read(str(root), "tfds")
    assert str(caught.value) == (
        f"{features}: feature name '../../x' is not a safe name; feature names are "
        "letters, digits, '_', '-' and '.'")


def _kmnist_tree(folder):
    rng = np.random.default_rng(1)
    folder.mkdir()
    for split, n in (("train", 5), ("test", 3)):
        np.savez_compressed(folder / f"kmnist-{split}-imgs.npz",
                            rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        np.savez_compressed(folder / f"kmnist-{split}-labels.npz",
                            np.arange(n, dtype=np.uint8) % 3)
    (folder / "kmnist_classmap.csv").write_text(
        "index,codepoint,char\n0,U+304A,お\n1,U+304D,き\n2,U+3059,す\n", "utf-8")


@pytest.mark.parametrize("member", ["kmnist-test-labels.npz", "kmnist_classmap.csv",
                                    "kmnist-train-imgs.npz"])
def test_kmnist_links_out_are_refused(tmp_path, member, alarm):
    _kmnist_tree(tmp_path / "k")
    assert _read_all(tmp_path / "k", "kmnist") == {"train": 5, "test": 3}
    os.unlink(tmp_path / "k" / member)
    os.mkfifo(tmp_path / member)
    os.symlink(tmp_path / member, tmp_path / "k" / member)
    # The folder, and the test images named alone (their labels and the class map
    # are its side files; the train images are not).
    for named in (tmp_path / "k", tmp_path / "k" / "kmnist-test-imgs.npz")[
            :1 if "train" in member else 2]:
        with pytest.raises(UsageError, match="leads outside"):
            _read_all(named, "kmnist")


def test_quickdraw_class_file_linked_out_is_refused(tmp_path, alarm):
    folder = tmp_path / "qd"
    folder.mkdir()
    for name in ("cat", "dog"):
        np.save(folder / f"full_numpy_bitmap_{name}.npy", np.zeros((2, 784), np.uint8))
    assert _read_all(folder, "quickdraw") == {"train": 4}
    os.mkfifo(tmp_path / "dog.npy")
    os.unlink(folder / "full_numpy_bitmap_dog.npy")
    os.symlink(tmp_path / "dog.npy", folder / "full_numpy_bitmap_dog.npy")
    with pytest.raises(UsageError, match="full_numpy_bitmap_dog.npy: leads outside"):
        _read_all(folder, None)


def test_a_fifo_or_socket_inside_a_tree_is_refused(tmp_path, alarm):
    import socket
    root = _tree(tmp_path, "imagefolder")
    os.mkfifo(root / "train" / "1" / "9.png")
    with pytest.raises(UsageError, match=r"9.png: is not a regular file"):
        _read_all(root, "imagefolder")
    os.unlink(root / "train" / "1" / "9.png")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(root / "train" / "1" / "8.png"))
        with pytest.raises(UsageError, match=r"8.png: is not a regular file"):
            _read_all(root, "imagefolder")


# --- outputs ----------------------------------------------------------------------

def _snapshot(folder):
    return {os.path.relpath(os.path.join(f, n), folder):
            hashlib.sha256(open(os.path.join(f, n), "rb").read()).hexdigest()
            for f, _, names in os.walk(folder) for n in names}


@pytest.mark.parametrize("fmt", TREE_WRITERS)
def test_force_never_writes_through_a_link_in_the_output(tmp_path, fmt):
    root = _tree(tmp_path, fmt)
    for n, member in enumerate(_members(root)):
        here = tmp_path / f"case{n}"
        out = here / "tree"  # named as written: webdataset names files after it
        shutil.copytree(root, out, symlinks=True)
        victim = here / "victim"
        shutil.move(str(out / member), str(victim))
        if victim.is_dir():
            (victim / "sentinel").write_bytes(b"keep")
        os.symlink(victim, out / member)
        before = _snapshot(here / "victim") if victim.is_dir() else victim.read_bytes()
        if victim.is_dir():
            with pytest.raises(UsageError) as caught:
                mnistconv.write(_dataset(), str(out) + "/", fmt, force=True, **_options(fmt))
            assert str(caught.value) == (
                f"{out}/{member}: is a symlink inside the output; mnistconv never writes "
                "through a link, even with force; remove the link, or write to another "
                "output"), fmt
            assert _snapshot(victim) == before
            assert os.path.islink(out / member)
        else:  # a file link is replaced by the new file, never written through
            mnistconv.write(_dataset(), str(out) + "/", fmt, force=True, **_options(fmt))
            assert victim.read_bytes() == before
            assert os.path.isfile(out / member) and not os.path.islink(out / member)


def test_imagefolder_force_with_a_linked_class_folder_leaves_the_victim(tmp_path):
    root = _tree(tmp_path, "imagefolder")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.png").write_bytes(b"mine")
    shutil.rmtree(root / "train" / "2")
    os.symlink("../../victim", root / "train" / "2")
    result = run("convert", REPO / "examples" / "data" / "mnist-sample", "tree",
                 "--to", "imagefolder", "--force", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "Error: tree/train/2: is a symlink inside the output; mnistconv never writes "
        "through a link, even with force; remove the link, or write to another output\n")
    assert os.listdir(victim) == ["keep.png"]
    assert (victim / "keep.png").read_bytes() == b"mine"


def test_file_url_output_over_a_fifo_is_refused_as_a_local_path(tmp_path):
    fifo = tmp_path / "f.npz"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="exists and is not a regular file"):
        mnistconv.write(_dataset(), f"file://{fifo}", force=True)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
