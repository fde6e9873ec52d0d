"""Hostile names, label values and compression ratios for the readers of archives,
folder trees and containers: WebDataset tars, ImageFolder trees, Caffe LMDB and HDF5,
KMNIST's npz pairs and Quick, Draw!'s .npy files (hostile_formats.py has TFDS,
ArrayRecord and Parquet; hostile.py the first four). Same rules as hostile.py.
"""

import io
import os
import shutil
import tarfile

import numpy as np

try:
    from . import seeds as seedlib
    from .hostile import (LABEL_DTYPES, MIB, TRAVERSAL, Case, _local_zip,
                          _npy_header, _varint, bomb_mib, hostile_name,
                          label_array)
    from .hostile_formats import _copy, png_bomb, refused
except ImportError:
    import seeds as seedlib
    from hostile import (LABEL_DTYPES, MIB, TRAVERSAL, Case, _local_zip,
                         _npy_header, _varint, bomb_mib, hostile_name,
                         label_array)
    from hostile_formats import _copy, png_bomb, refused


# --- WebDataset --------------------------------------------------------------------------

def _tar_members(path):
    with tarfile.open(path) as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers() if m.isfile()]


def _write_tar(path, members, gnu=False):
    """members: [(name, bytes)]; GNU format for names over 100 bytes, else PAX where a
    name needs it (tarfile picks)."""
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT if gnu else
                      tarfile.PAX_FORMAT, encoding="utf-8", errors="surrogateescape") as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            t.addfile(info, io.BytesIO(data))


def _webdataset_shard(rng, work):
    root = _copy(rng, "webdataset", work)
    tars = [str(p) for p in seedlib.files_of(root) if p.name.endswith(".tar")]
    return root, rng.choice(tars)


def names_webdataset(rng, work, top):
    root, path = _webdataset_shard(rng, work)
    members = _tar_members(path)
    how = rng.choice(["key", "key", "prefix", "member", "file"])
    evil = hostile_name(rng, top)
    expect = None
    if how == "file":  # the shard file's own name: the split's
        evil = hostile_name(rng, top, filesystem=True)
        split = os.path.basename(path).split("-")[1]
        target = os.path.join(root, os.path.basename(path).replace(f"-{split}-",
                                                                   f"-{evil}-"))
        os.rename(path, target)
        path = target
        # The split is the word before the shard number, after the last '-'.
        # (a name holding a newline is not matched as <name>-<split>-NNNNNN.tar, and its
        # split is then the word after its last '-')
        expect = None if not evil.isprintable() else \
            refused(f"x-{evil}".rpartition("-")[2], True)
    else:
        victim = members[rng.randrange(len(members))][0].split(".")[0]
        out = []
        for name, data in members:
            key, _, ext = name.partition(".")
            if key == victim or (how == "prefix" and rng.random() < 0.5):
                if how == "key":
                    name = evil.replace(".", "") + "." + ext
                elif how == "prefix":
                    name = f"{rng.choice(TRAVERSAL + [top, evil])}/{key}.{ext}"
                else:
                    name = rng.choice([evil, f"{evil}.png", f"../{key}.{ext}",
                                       f"{top}/{key}.{ext}", f"{key}.{ext}/../x.png"])
            out.append((name, data))
        _write_tar(path, out, gnu=rng.random() < 0.5)
    return Case(rng.choice([root, path]), f"WebDataset {how} {evil!r}", expect)


def labels_webdataset(rng, work, top):
    root, path = _webdataset_shard(rng, work)
    values = ["nan", "1e99", "-1", "9" * 20, "9" * 18, "2147483647", "100000000",
              "65536", "4294967296", " 7 ", "+3", "0x10", "\u0663", "7\n8", "", "inf",
              "18446744073709551615", "00000000000000000009", "1_0"]
    out, told = [], []
    for name, data in _tar_members(path):
        if name.endswith(".cls") and (not told or rng.random() < 0.4):
            data = rng.choice(values).encode()
            told.append(f"{name}={data!r}")
        elif name.endswith(".json") and rng.random() < 0.2:
            data = rng.choice([b'{"index": -1}', b'{"index": 1e99}', b'{"index": 9223372036854775808}',
                               b'{"index": NaN}', b'[' * 10000, b'{"class": "\\u0000"}',
                               b'{"class": "\\ud800"}', b'{"class": "%s"}' % (b"x" * 60000)])
            told.append(f"{name}={data[:30]!r}")
        out.append((name, data))
    _write_tar(path, out)
    return Case(rng.choice([root, path]), f"WebDataset labels {told}")


def ratio_webdataset(rng, work, top):
    root, path = _webdataset_shard(rng, work)
    out, told = [], []
    for name, data in _tar_members(path):
        if name.endswith((".png", ".jpg")) and (not told or rng.random() < 0.3):
            data, what = png_bomb(rng)
            name = name.rsplit(".", 1)[0] + ".png"
            told.append(what)
        out.append((name, data))
    _write_tar(path, out)
    return Case(rng.choice([root, path]), f"WebDataset {'; '.join(told)}")


# --- ImageFolder -------------------------------------------------------------------------

def _imagefolder(rng, work):
    # (a PNG tree, not a JPEG one; croissant.json sits beside either)
    root = _copy(rng, "imagefolder", work, lambda s: any(
        str(f).endswith(".png") for f in seedlib.files_of(s)))
    splits = sorted(e for e in os.listdir(root) if os.path.isdir(os.path.join(root, e)))
    return root, os.path.join(root, rng.choice(splits))


def names_imagefolder(rng, work, top):
    root, split = _imagefolder(rng, work)
    classes = sorted(os.listdir(split))
    victim = os.path.join(split, rng.choice(classes))
    how = rng.choice(["class", "class", "split", "symlink", "image", "loop"])
    evil = hostile_name(rng, top, filesystem=True)
    expect = None
    if how == "class":
        name = rng.choice([evil, f"3_{evil}", f"{evil}\n4"])[:200].replace("/", "_")
        target = os.path.join(split, name)
        if not os.path.exists(target):
            os.rename(victim, target)
    elif how == "split":
        target = os.path.join(root, evil)
        if not os.path.exists(target):
            os.rename(split, target)
            split = target
            expect = refused(evil)
    elif how == "symlink":  # a class folder that is a link out of the tree
        outside = os.path.join(work, "in", "outside")
        shutil.copytree(victim, outside)
        target = rng.choice([outside, "/", "/proc/self", "/dev", top, "/nonexistent"])
        shutil.rmtree(victim)
        os.symlink(target, victim)
        evil = f"{os.path.basename(victim)} -> {target}"
    elif how == "image":  # an image that is a link out of the tree, or to a device
        images = sorted(os.listdir(victim))
        image = os.path.join(victim, rng.choice(images))
        os.remove(image)
        target = rng.choice(["/dev/zero", "/dev/urandom", "/proc/self/mem",
                             "/proc/self/environ", "/etc/passwd", "..", image])
        os.symlink(target, image)
        evil = f"{os.path.basename(image)} -> {target}"
    else:  # a class folder linking to its own split or to the root
        os.symlink(rng.choice([split, root, ".."]), os.path.join(split, "7_loop"))
        evil = "7_loop -> its parent"
    return Case(rng.choice([root, split]), f"ImageFolder {how} {evil!r}", expect)


def labels_imagefolder(rng, work, top):
    """A class folder's leading number is its label."""
    root, split = _imagefolder(rng, work)
    classes = sorted(os.listdir(split))
    told = []
    for cls in rng.sample(classes, rng.randint(1, len(classes))):
        number = rng.choice(["-1", "99999999", "2147483647", "4294967296", "9" * 20,
                             "9" * 240, "1e99", "nan", "inf", "65535", "65536", "0" * 50,
                             "\u0663", "00"])
        name = number + rng.choice(["", "_cat", "-x", " y"])
        target = os.path.join(split, name)
        if not os.path.exists(target):
            os.rename(os.path.join(split, cls), target)
            told.append(f"{cls} -> {name[:40]}")
    return Case(rng.choice([root, split]), f"ImageFolder class folders {told}")


def ratio_imagefolder(rng, work, top):
    root, split = _imagefolder(rng, work)
    told = []
    files = sorted(str(p) for p in seedlib.files_of(split))
    for k, path in enumerate(files):
        if not told and k == len(files) - 1 or rng.random() < 0.2:
            data, what = png_bomb(rng)
            with open(path, "wb") as f:
                f.write(data)
            told.append(f"{os.path.relpath(path, root)}: {what}")
    return Case(rng.choice([root, split]), f"ImageFolder {'; '.join(told)}")


# --- Caffe LMDB --------------------------------------------------------------------------

def _datum(label, data, shape=(1, 28, 28), encoded=False, label_raw=None):
    c, h, w = shape
    out = b"\x08" + _varint(c) + b"\x10" + _varint(h) + b"\x18" + _varint(w) if not \
        encoded else b""
    out += b"\x22" + _varint(len(data)) + data
    out += b"\x28" + (label_raw if label_raw is not None else _varint(label))
    if encoded:
        out += b"\x38\x01"
    return out


def _write_lmdb(folder, values):
    import lmdb
    os.makedirs(folder, exist_ok=True)
    size = sum(len(v) for v in values) * 2 + (1 << 20)
    env = lmdb.open(folder, map_size=size, subdir=True, lock=False)
    with env.begin(write=True) as txn:
        for i, v in enumerate(values):
            txn.put(b"%08d" % i, v)
    env.close()


def names_caffe_lmdb(rng, work, top):
    """Split names come from the environment folders' names."""
    root = _copy(rng, "caffe-lmdb", work)
    envs = sorted(e for e in os.listdir(root) if os.path.isdir(os.path.join(root, e)))
    evil = hostile_name(rng, top, filesystem=True)
    name = rng.choice(["{e}_lmdb", "{e}", "mnist_{e}_lmdb", "{e}.lmdb"]).format(e=evil)
    victim = os.path.join(root, rng.choice(envs))
    target = os.path.join(root, name)
    if not os.path.exists(target):
        os.rename(victim, target)
    link = os.path.join(root, "x_lmdb")
    if rng.random() < 0.2 and not os.path.lexists(link):  # and one that is a link out
        os.symlink(rng.choice(["/", top, "/proc/self", target]), link)
    return Case(rng.choice([root, target, os.path.join(target, "data.mdb")]),
                f"Caffe LMDB environment {name!r}")


def labels_caffe_lmdb(rng, work, top):
    rows = 1 + rng.randrange(6)
    told, values = [], []
    for _ in range(rows):
        how = rng.random()
        if how < 0.6:
            label = rng.choice([v for v in (0, 9, 255, 256, 65536, -1, -128, 2 ** 31 - 1,
                                            -(2 ** 31), 10 ** 8, 2 ** 32, 2 ** 63 - 1,
                                            2 ** 64 - 1)])
            raw = None
        else:
            raw = rng.choice([b"\xff" * 10 + b"\x01", b"\xff" * 9, b"\x80" * 20 + b"\x00",
                              b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x02"])
            label = raw
        values.append(_datum(label if raw is None else 0, bytes(784), label_raw=raw))
        told.append(label)
    folder = os.path.join(work, "in", "train_lmdb")
    _write_lmdb(folder, values)
    return Case(folder, f"Caffe LMDB labels {told}")


def ratio_caffe_lmdb(rng, work, top):
    """Encoded Datums (convert_imageset --encoded) hold a PNG: a PNG bomb in one."""
    from mnistconv import codecs
    rows = 1 + rng.randrange(4)
    plain = codecs.encode_png(np.zeros((28, 28), np.uint8))
    values, told = [], []
    for k in range(rows):
        data = plain
        if k == 0 or rng.random() < 0.3:
            data, what = png_bomb(rng)
            told.append(what)
        values.append(_datum(k % 10, data, encoded=True))
    if rng.random() < 0.3:  # a raw Datum claiming a huge shape over little data
        shape = rng.choice([(1, 16384, 16384), (65535, 65535, 65535), (1, 2 ** 31 - 1, 1)])
        values.append(_datum(1, bytes(784), shape=shape))
        told.append(f"raw Datum of shape {shape}")
    folder = os.path.join(work, "in", "train_lmdb")
    _write_lmdb(folder, values)
    return Case(folder, f"Caffe LMDB {'; '.join(told)}")


# --- Caffe HDF5 --------------------------------------------------------------------------

def _hdf5_split(rng, work):
    root = _copy(rng, "caffe-hdf5", work)
    lists = sorted(p for p in os.listdir(root) if p.endswith(".txt"))
    return root, os.path.join(root, rng.choice(lists))


def names_caffe_hdf5(rng, work, top):
    root, listed = _hdf5_split(rng, work)
    entries = open(listed, encoding="utf-8").read().split()
    outside = os.path.join(work, "in", "outside.h5")
    shutil.copy(os.path.join(root, entries[0]), outside)
    how = rng.choice(["entry", "entry", "list", "dataset", "link"])
    evil = hostile_name(rng, top)
    expect = None
    if how == "entry":
        entry = rng.choice(["../outside.h5", outside, f"{top}/../x.h5", "/etc/passwd.h5",
                            "/dev/zero.h5", f"./{entries[0]}", f"sub/../{entries[0]}",
                            f"{entries[0]}/../{entries[0]}", evil + ".h5", "~/.h5",
                            f"{root}/{entries[0]}", f"{root}/../outside.h5",
                            "/proc/self/fd/0.h5", f"{entries[0]}\0.h5"])
        at = rng.randrange(len(entries) + 1)
        entries.insert(at, entry)
        with open(listed, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write("\n".join(entries) + "\n")
        if "outside" in entry and os.path.exists(os.path.normpath(
                os.path.join(root, entry))):
            expect = (1,)
        evil = entry
    elif how == "list":  # the list's own name is the split's
        evil = hostile_name(rng, top, filesystem=True)
        target = os.path.join(root, evil + ".txt")
        os.rename(listed, target)
        listed = target
    elif how == "dataset":  # data/label renamed, or an extra dataset with a path name
        import h5py
        with h5py.File(os.path.join(root, entries[0]), "a") as f:
            # (h5py takes names it can encode as UTF-8, not empty, not '.' alone)
            name = evil.replace("\0", "").encode("utf-8", "replace").decode() or "x"
            if name.strip("/.") == "":
                name = "x" + name.replace("/", "")
            try:
                if rng.random() < 0.5:
                    f.move(rng.choice(["data", "label"]), name.replace("/", "_"))
                else:
                    f.create_dataset(name, data=np.zeros(3))
            except (ValueError, TypeError):  # h5py: that name, or a part of it, exists
                pass
    else:  # a link from inside the file to another file or path
        import h5py
        with h5py.File(os.path.join(root, entries[0]), "a") as f:
            name = rng.choice(["data", "label"])
            del f[name]
            f[name] = rng.choice([h5py.ExternalLink(outside, name),
                                  h5py.ExternalLink("../outside.h5", name),
                                  h5py.SoftLink("/" + evil.replace("\0", "").encode(
                                      "utf-8", "replace").decode()),
                                  h5py.ExternalLink("/proc/self/mem", name)])
    path = rng.choice([root, listed])
    if how == "list":
        expect = refused(evil, path == listed)
    return Case(path, f"Caffe HDF5 {how} {evil!r}", expect)


def _write_h5(path, data, label, compress=False, shape_data=None):
    import h5py
    with h5py.File(path, "w") as f:
        kw = dict(compression="gzip", compression_opts=9) if compress else {}
        f.create_dataset("data", data=data, **kw)
        f.create_dataset("label", data=label, **kw)


def labels_caffe_hdf5(rng, work, top):
    root, listed = _hdf5_split(rng, work)
    import h5py
    entries = open(listed, encoding="utf-8").read().split()
    path = os.path.join(root, entries[0])
    with h5py.File(path, "r") as f:
        n = f["data"].shape[0]
    dtype = rng.choice(LABEL_DTYPES + ["<f4", "<f8", "<f8"])
    labels, values = label_array(rng, n, dtype)
    shape = rng.choice([(n,), (n,), (n, 1), (n, 2), (1, n)])
    if int(np.prod(shape)) != n:
        labels = np.resize(labels, shape)
    with h5py.File(path, "a") as f:
        del f["label"]
        f.create_dataset("label", data=labels.reshape(shape))
    return Case(rng.choice([root, listed]), f"Caffe HDF5 label {dtype} {shape} {values}")


def ratio_caffe_hdf5(rng, work, top):
    """gzip-filtered datasets of zeros: an honest huge one, or a huge declared shape
    whose chunks were never written (HDF5 returns the fill value for them)."""
    import h5py
    path = os.path.join(work, "in", "train.h5")
    mib = bomb_mib(rng)
    how = rng.choice(["honest", "unwritten", "unwritten", "label", "fill"])
    with h5py.File(path, "w") as f:
        opts = dict(compression="gzip", compression_opts=9, shuffle=rng.random() < 0.5)
        if how == "honest":
            n = max(1, min(mib, 64) * MIB // 784)
            # Written whole (64 MiB, here in the worker, before the case is measured):
            # row slices of it took h5py 30 s.
            f.create_dataset("data", data=np.zeros((n, 1, 28, 28), np.uint8),
                             chunks=(1024, 1, 28, 28), **opts)
            f.create_dataset("label", data=np.zeros(n, np.float32), **opts)
        elif how == "unwritten":
            n = rng.choice([10 ** 6, 10 ** 7, 2 ** 31, 10 ** 12])
            f.create_dataset("data", (n, 1, 28, 28), np.float32, chunks=(64, 1, 28, 28),
                             **opts)
            f.create_dataset("label", (n,), np.float32, chunks=(4096,), **opts)
        elif how == "label":
            f.create_dataset("data", data=np.zeros((3, 1, 28, 28), np.uint8), **opts)
            n = max(3, min(mib, 64) * MIB // 4)
            f.create_dataset("label", data=np.zeros(n, np.float32), chunks=(1 << 16,),
                             **opts)
        else:
            shape = rng.choice([(3, 1, 16384, 16384), (3, 65535, 65535), (2, 1, 2 ** 20, 2 ** 20)])
            f.create_dataset("data", shape, np.uint8, chunks=(1, 1, 1024, 1024)[-len(shape):],
                             fillvalue=rng.choice([0, 7]), **opts)
            f.create_dataset("label", data=np.zeros(shape[0], np.float32))
        what = f"Caffe HDF5 gzip {how}: data {f['data'].shape}, label {f['label'].shape}"
    return Case(path, what)


# --- KMNIST ------------------------------------------------------------------------------

def _kmnist(rng, work):
    return _copy(rng, "kmnist", work)


def names_kmnist(rng, work, top):
    folder = _kmnist(rng, work)
    how = rng.choice(["split", "split", "prefix", "classmap"])
    evil = hostile_name(rng, top, filesystem=True)
    expect = None
    if how in ("split", "prefix"):
        split = rng.choice(["train", "test"])
        for kind in ("imgs", "labels"):
            old = os.path.join(folder, f"kmnist-{split}-{kind}.npz")
            new = f"kmnist-{evil}-{kind}.npz" if how == "split" else \
                f"{evil}-{split}-{kind}.npz"
            if not os.path.exists(os.path.join(folder, new)):
                os.rename(old, os.path.join(folder, new))
        # (only <name>-train|test-imgs.npz pairs are read: other files are ignored)
    else:
        names = [hostile_name(rng, top) for _ in range(rng.choice([1, 10, 11]))]
        rows = "".join(f"{i},U+{rng.randrange(0x110000):04X},{n}\n"
                       for i, n in enumerate(names))
        header = rng.choice(["index,codepoint,char\n", "", "index,codepoint\n"])
        with open(os.path.join(folder, "kmnist_classmap.csv"), "w", encoding="utf-8",
                  errors="surrogateescape", newline="") as f:
            f.write(header + rows)
        evil = names
    path = folder
    if rng.random() < 0.3:
        found = sorted(p for p in os.listdir(folder) if p.endswith("-imgs.npz"))
        path = os.path.join(folder, rng.choice(found)) if found else folder
    return Case(path, f"KMNIST {how} {evil!r}", expect)


def _kmnist_labels_file(rng, folder):
    split = rng.choice(["train", "test"])
    path = os.path.join(folder, f"kmnist-{split}-labels.npz")
    with np.load(path) as z:
        n = len(z["arr_0"])
    return path, n


def labels_kmnist(rng, work, top):
    folder = _kmnist(rng, work)
    path, n = _kmnist_labels_file(rng, folder)
    dtype = rng.choice(LABEL_DTYPES)
    labels, values = label_array(rng, n, dtype)
    np.savez_compressed(path, labels)
    return Case(folder, f"KMNIST {os.path.basename(path)} arr_0 {dtype} {values}")


def ratio_kmnist(rng, work, top):
    folder = _kmnist(rng, work)
    split = rng.choice(["train", "test"])
    mib = bomb_mib(rng)
    n = max(1, mib * MIB // 784)
    how = rng.choice(["honest", "trailing", "short", "size-lie", "labels"])
    images = [_npy_header((3, 28, 28)), 3 * 784]
    labels = [_npy_header((3,)), bytes(3)]
    declared = None
    if how == "honest":
        n = min(n, (64 * MIB) // 785)
        images, labels = [_npy_header((n, 28, 28)), n * 784], [_npy_header((n,)), n]
    elif how == "trailing":
        images = [_npy_header((3, 28, 28)), 3 * 784 + mib * MIB]
    elif how == "short":
        images = [_npy_header((rng.choice([n * 2, 2 ** 31, 10 ** 12]), 28, 28)), mib * MIB]
    elif how == "size-lie":
        images = [_npy_header((3, 28, 28)), 3 * 784 + mib * MIB]
        declared = rng.choice([3 * 784 + 128, 0, 2 ** 32 - 1])
    else:
        labels = [_npy_header((3,), rng.choice(["<i8", "<u8", "|u1"])), mib * MIB]
    for kind, parts, lie in (("imgs", images, declared), ("labels", labels, None)):
        with open(os.path.join(folder, f"kmnist-{split}-{kind}.npz"), "wb") as f:
            f.write(_local_zip([("arr_0.npy", parts, lie)]))
    return Case(folder, f"KMNIST {split} deflate bomb {how}, {mib} MiB of zeros")


# --- Quick, Draw! ------------------------------------------------------------------------

def names_quickdraw(rng, work, top):
    """Class names come from the file names."""
    seed = [s for s in seedlib.seeds("quickdraw") if os.path.isdir(s)][0]
    folder = os.path.join(work, "in", "quickdraw")
    os.makedirs(folder)
    files = seedlib.files_of(seed)
    told = []
    for k, p in enumerate(files):
        name = p.name
        if k == 0 or rng.random() < 0.4:
            evil = hostile_name(rng, top, filesystem=True)
            name = rng.choice(["full_numpy_bitmap_{e}.npy", "{e}.npy",
                               "full_numpy_bitmap_{e}"]).format(e=evil)
            if os.path.exists(os.path.join(folder, name)):
                continue
            told.append(name)
        shutil.copy(p, os.path.join(folder, name))
    if rng.random() < 0.2:
        os.symlink(rng.choice(["/dev/zero", "/proc/self/mem", str(files[0]), "/"]),
                   os.path.join(folder, "full_numpy_bitmap_link.npy"))
        told.append("full_numpy_bitmap_link.npy (a link)")
    path = folder
    if rng.random() < 0.3 and told and os.path.exists(os.path.join(folder, told[0])):
        path = os.path.join(folder, told[0])
    return Case(path, f"Quick, Draw! files {told!r}")


# Where a family does not apply:
# - labels, quickdraw: a Quick, Draw! file holds drawings only; a class is its file
#   name's rank in sorted order (the names family covers those names).
# - ratio, quickdraw: plain .npy files, memory-mapped; nothing is compressed.
FAMILIES = {
    "names": {"webdataset": names_webdataset, "imagefolder": names_imagefolder,
              "caffe-lmdb": names_caffe_lmdb, "caffe-hdf5": names_caffe_hdf5,
              "kmnist": names_kmnist, "quickdraw": names_quickdraw},
    "labels": {"webdataset": labels_webdataset, "imagefolder": labels_imagefolder,
               "caffe-lmdb": labels_caffe_lmdb, "caffe-hdf5": labels_caffe_hdf5,
               "kmnist": labels_kmnist},
    "ratio": {"webdataset": ratio_webdataset, "imagefolder": ratio_imagefolder,
              "caffe-lmdb": ratio_caffe_lmdb, "caffe-hdf5": ratio_caffe_hdf5,
              "kmnist": ratio_kmnist},
}
