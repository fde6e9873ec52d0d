"""CIFAR-10/100 python version, read without running the pickles: files pickled as the
publishers' Python 2 cPickle wrote them (protocol 2, str keys, the array's pixels one
BINSTRING) and as Python 3's pickle writes the same dicts, read back with exact pixels,
labels, names and notes; a pickle that calls anything else is one line, exit 1, and
nothing of it runs."""

import os
import pickle
import struct

import numpy as np

import mnistconv
from mnistconv.formats.cifar_python import unpickle
from helpers import run_main
from test_cifar import CIFAR10_NAMES, images_and_labels


def planes(images):
    """N x 3072 rows: R, G, B planes row by row, as CIFAR's data arrays hold them."""
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2).reshape(len(images), -1))


def _str(b):  # Python 2's str: SHORT_BINSTRING or BINSTRING
    return (b"U" + bytes([len(b)]) if len(b) < 256 else b"T" + struct.pack("<I", len(b))) + b


def _int(v):
    return b"K" + bytes([v]) if v < 256 else b"M" + struct.pack("<H", v) if v < 65536 \
        else b"J" + struct.pack("<i", v)


def py2_pickle(d):
    """A dict of str keys -> list of ints | list of str | uint8 2-D array, pickled as
    Python 2's cPickle.dump(d, f, 2) with numpy 1.x writes it (checked by pickle.loads)."""
    out = [b"\x80\x02}(" ]
    for key, value in d.items():
        out.append(_str(key.encode()))
        if isinstance(value, np.ndarray):
            out.append(b"cnumpy.core.multiarray\n_reconstruct\nq\x01cnumpy\nndarray\nq\x02"
                       b"K\x00\x85U\x01b\x87R(K\x01" + _int(value.shape[0]) +
                       _int(value.shape[1]) + b"\x86cnumpy\ndtype\nU\x02u1K\x00K\x01\x87R"
                       b"(K\x03U\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89" +
                       _str(value.tobytes()) + b"tb")
        else:
            out.append(b"](" + b"".join(_str(v.encode()) if isinstance(v, str) else
                                         _int(v) for v in value) + b"e")
    out.append(b"u.")
    data = b"".join(out)
    back = pickle.loads(data, encoding="bytes")  # a real pickle, as Python reads it
    assert sorted(back) == sorted(k.encode() for k in d)
    return data


def cifar10_py(folder, n=3, batches=5, writer=py2_pickle):
    folder.mkdir(parents=True)
    truth = {}
    names = [f"data_batch_{b}" for b in range(1, batches + 1)] + ["test_batch"]
    for seed, name in enumerate(names):
        x, y = images_and_labels(n, 10, seed)
        (folder / name).write_bytes(writer({"batch_label": "training batch",
                                            "labels": [int(v) for v in y],
                                            "data": planes(x),
                                            "filenames": [f"f{i}.png" for i in range(n)]}))
        truth.setdefault("test" if name == "test_batch" else "train", []).append((x, y))
    (folder / "batches.meta").write_bytes(writer({"label_names": CIFAR10_NAMES,
                                                  "num_cases_per_batch": [n]}))
    return {s: tuple(np.concatenate(p) for p in zip(*v)) for s, v in truth.items()}


def py3_pickle(d):
    """The same dict as Python 3's pickle protocol 2 writes it (bytes keys, as
    pickle.load(encoding='bytes') gives the publishers' files back)."""
    return pickle.dumps({k.encode(): v for k, v in d.items()}, protocol=2)


def all_of(split):
    batches = list(split.batches(2))
    return (np.concatenate([b.images for b in batches]),
            np.concatenate([b.labels for b in batches]))


def test_python2_pickles_read_exactly_with_pixels_left_in_the_file(tmp_path, monkeypatch):
    # Strings over 1 KiB stay in the file: the batches read the pixels from their offset.
    monkeypatch.setattr(unpickle, "INLINE_BYTES", 1024)
    truth = cifar10_py(tmp_path / "cifar-10-batches-py")
    ds = mnistconv.read(tmp_path / "cifar-10-batches-py")
    assert ds.format == "cifar-python" and list(ds.splits) == ["train", "test"]
    assert ds.splits["train"].header.count == 15
    assert ds.splits["train"].header.shape == (32, 32, 3)
    assert ds.splits["train"].header.class_names == tuple(CIFAR10_NAMES)
    for name, (x, y) in truth.items():
        images, labels = all_of(ds.splits[name])
        assert np.array_equal(images, x) and np.array_equal(labels, y)
        assert [b.indices.tolist() for b in ds.splits[name].batches(2)][0] == [0, 1]


def test_python3_protocol2_pickles_read_the_same(tmp_path):
    truth = cifar10_py(tmp_path / "c", batches=1, writer=py3_pickle)
    assert b"_codecs" in (tmp_path / "c" / "test_batch").read_bytes()
    ds = mnistconv.read(tmp_path / "c")
    images, labels = all_of(ds.splits["test"])
    assert np.array_equal(images, truth["test"][0]) and np.array_equal(labels, truth["test"][1])
    assert ds.splits["test"].header.class_names == tuple(CIFAR10_NAMES)


def test_cifar100_python_to_npz(tmp_path, capsys):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    truth = {}
    for seed, split in enumerate(("train", "test")):
        x, fine = images_and_labels(4, 100, seed)
        coarse = fine // 5
        (folder / split).write_bytes(py2_pickle({
            "filenames": ["a.png"] * 4, "batch_label": split, "fine_labels": fine.tolist(),
            "coarse_labels": coarse.tolist(), "data": planes(x)}))
        truth[split] = (x, fine, coarse)
    (folder / "meta").write_bytes(py2_pickle({
        "fine_label_names": [f"f{i}" for i in range(100)],
        "coarse_label_names": [f"c{i}" for i in range(20)]}))
    code, out, err = run_main(capsys, "convert", folder, tmp_path / "c.npz")
    assert code == 0, err
    with np.load(tmp_path / "c.npz") as f:
        for split, (x, fine, coarse) in truth.items():
            assert np.array_equal(f[f"x_{split}"], x)
            assert np.array_equal(f[f"y_{split}"], fine)
            assert f[f"extra_{split}"][:, 0].tolist() == coarse.tolist()
        assert f["class_names"].tolist() == [f"f{i}" for i in range(100)]
    ds = mnistconv.read(folder)
    assert ds.splits["train"].coarse_names[:2] == ("c0", "c1")


class _Evil:
    def __reduce__(self):
        return os.system, ("touch pwned",)


def test_a_pickle_that_calls_anything_else_is_refused_and_nothing_runs(tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": _Evil()}, protocol=2))
    code, out, err = run_main(capsys, "info", folder / "test_batch")
    assert code == 1 and out == ""
    assert err == (f"Error: {folder / 'test_batch'}: the pickle calls '{os.system.__module__}"
                   ".system', not only the dicts, lists, strings and arrays CIFAR's files "
                   "hold; nothing of it was run: read the publishers' files\n")
    assert not (tmp_path / "pwned").exists()


def test_a_call_hidden_in_the_meta_file_is_refused_too(tmp_path, capsys):
    cifar10_py(tmp_path / "c", batches=1)
    (tmp_path / "c" / "batches.meta").write_bytes(
        b"\x80\x02cbuiltins\neval\nX\x04\x00\x00\x001+1\x85R.")
    code, _, err = run_main(capsys, "info", tmp_path / "c")
    assert code == 1
    assert err.startswith(f"Error: {tmp_path / 'c' / 'batches.meta'}: the pickle calls "
                          "'builtins.eval', not only")


def test_truncated_pickle_is_reported_as_cifar(tmp_path, capsys):
    cifar10_py(tmp_path / "c", batches=1)
    path = tmp_path / "c" / "data_batch_1"
    path.write_bytes(path.read_bytes()[:5000])
    code, _, err = run_main(capsys, "info", path)
    assert code == 1
    assert err.startswith(f"Error: {path}: the pickle declares a string of 9,216 bytes at "
                          "byte ")
    assert err.endswith("; the file is truncated or damaged: download it again\n")


def test_wrong_label_count_and_range_are_one_line(tmp_path, capsys):
    folder = tmp_path / "c"
    folder.mkdir()
    x, y = images_and_labels(3, 10, 0)
    (folder / "test_batch").write_bytes(py2_pickle({"labels": [1, 2], "data": planes(x)}))
    code, _, err = run_main(capsys, "info", folder)
    assert code == 1
    assert err == (f"Error: {folder / 'test_batch'}: labels is a list of 2, not 3 integer "
                   "labels (one per row of data); the file is damaged: download it again\n")
    (folder / "test_batch").write_bytes(py2_pickle({"labels": [1, 2, 12],
                                                    "data": planes(x)}))
    code, _, err = run_main(capsys, "info", folder)
    assert err == (f"Error: {folder / 'test_batch'}: labels[2] is 12, outside 0..9; the "
                   "file is damaged: download it again\n")
    # Past int64 (the fuzz pass's traceback: numpy's OverflowError), and negative.
    for value in (2 ** 64 - 1, -(2 ** 63) - 1, -1):
        (folder / "test_batch").write_bytes(pickle.dumps(  # Python 3's, as seeds write
            {b"labels": [1, value, 3], b"data": planes(x)}, protocol=2))
        code, _, err = run_main(capsys, "info", folder)
        assert code == 1
        assert err == (f"Error: {folder / 'test_batch'}: labels[1] is {value}, outside "
                       "0..9; the file is damaged: download it again\n")
