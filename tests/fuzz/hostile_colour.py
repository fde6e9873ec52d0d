"""Hostile names, label values and ratios for the colour readers of issue 37: CIFAR
binary, CIFAR python, SVHN's .mat and MedMNIST's .npz. Same rules as hostile.py: plain
functions of a random.Random, the input written under work/in, a Case returned. An
expected exit code comes from the dataset's own rule (CIFAR-10 has 10 classes, SVHN's
labels are 1..10, a record is 3073 bytes, a pickle may build only dicts, lists, strings
and arrays, MedMNIST has one label row per image), never from running mnistconv.
"""

import os
import pickle
import struct

import numpy as np

try:
    from .hostile import (LABEL_DTYPES, LABEL_VALUES, MIB, Case, _local_zip, _npy_header, _zip,
                          bomb_mib, hostile_name, label_array, zlib_parts)
    from .hostile_formats import _copy
except ImportError:
    from hostile import (LABEL_DTYPES, LABEL_VALUES, MIB, Case, _local_zip, _npy_header, _zip,
                         bomb_mib, hostile_name, label_array, zlib_parts)
    from hostile_formats import _copy

PIXELS = 3072
# Damaged data is refused with exit 1; where the command's output cannot hold what the
# headers say the input holds (RGB images to a grey-only writer, multi-label targets to
# one without them), that usage error comes first, from the headers alone: exit 2.
BAD = (1, 2)


def _safe_line(name):
    """A hostile name as one line of a names file (its own newlines would make more)."""
    return name.replace("\n", " ").replace("\r", " ").strip() or "x"


# --- CIFAR binary ------------------------------------------------------------------------

def _cifar(rng, work):
    """A copy of a CIFAR seed folder, its record size and its data files."""
    folder = _copy(rng, "cifar", work, os.path.isdir)
    hundred = os.path.exists(os.path.join(folder, "train.bin"))
    files = sorted(n for n in os.listdir(folder) if n.endswith(".bin"))
    return folder, hundred, files


def names_cifar(rng, work, top):
    folder, hundred, files = _cifar(rng, work)
    how = rng.choice(["class", "class", "count", "file"])
    meta = "fine_label_names.txt" if hundred else "batches.meta.txt"
    count = 100 if hundred else 10
    if how == "file":  # a batch under a hostile name: not CIFAR's, so not read
        evil = hostile_name(rng, top, filesystem=True)
        new = f"data_batch_{evil}.bin"
        if not os.path.exists(os.path.join(folder, new)):
            os.rename(os.path.join(folder, files[0]), os.path.join(folder, new))
        return Case(folder, f"CIFAR batch renamed {new!r}")
    if how == "count":  # CIFAR-10 names 10 classes, CIFAR-100 100: any other count is refused
        n = rng.choice([0, 1, count - 1, count + 1, 1000])
        names = [f"c{i}" for i in range(n)]
        expect = BAD
    else:
        names = [f"c{i}" for i in range(count)]
        evil = _safe_line(hostile_name(rng, top))
        names[rng.randrange(count)] = evil
        expect = None
    with open(os.path.join(folder, meta), "w", encoding="utf-8",
              errors="surrogateescape", newline="") as f:
        f.write("".join(n + "\n" for n in names))
    return Case(folder, f"CIFAR {meta} {how} ({len(names)} names)", expect)


def labels_cifar(rng, work, top):
    """A label byte past the dataset's classes (CIFAR-10: 10, CIFAR-100: 100 fine, 20
    coarse) in one record: refused (exit 1); or every byte in range: read."""
    folder, hundred, files = _cifar(rng, work)
    victim = os.path.join(folder, rng.choice(files))
    data = bytearray(open(victim, "rb").read())
    record = PIXELS + (2 if hundred else 1)
    at = rng.randrange(len(data) // record) * record
    which, limit = (rng.choice([(0, 20), (1, 100)]) if hundred else (0, 10))
    bad = rng.random() < 0.7
    value = rng.randrange(limit, 256) if bad else rng.randrange(limit)
    data[at + which] = value
    with open(victim, "wb") as f:
        f.write(data)
    return Case(folder, f"CIFAR {os.path.basename(victim)} record {at // record} label "
                        f"byte {which} = {value}", BAD if bad else None)


def ratio_cifar(rng, work, top):
    """CIFAR is not compressed: its bombs are sparse files (holes cost no disk) of many
    records of zeros, read within the memory budget, or one byte short of whole
    records (refused), or a truncated final record (refused)."""
    folder, hundred, files = _cifar(rng, work)
    record = PIXELS + (2 if hundred else 1)
    victim = os.path.join(folder, rng.choice(files))
    how = rng.choice(["sparse", "sparse-short", "truncated-last"])
    size = os.path.getsize(victim)
    if how == "truncated-last":
        cut = rng.randrange(1, record)
        os.truncate(victim, size - cut)
        return Case(folder, f"CIFAR {os.path.basename(victim)} last record "
                            f"{record - cut} of {record} bytes", BAD)
    mib = min(bomb_mib(rng), 16)  # zeros are records: every one is converted
    n = mib * MIB // record
    os.truncate(victim, n * record - (1 if how == "sparse-short" else 0))
    return Case(victim, f"CIFAR sparse {how}: {n:,} records of zeros",
                BAD if how == "sparse-short" else None)


# --- CIFAR python --------------------------------------------------------------------------

REFUSED_GLOBALS = [("os", "system"), ("posix", "system"), ("builtins", "eval"),
                   ("builtins", "exec"), ("subprocess", "Popen"), ("__builtin__", "eval"),
                   ("builtins", "getattr"), ("shutil", "rmtree"), ("io", "open"),
                   ("numpy", "load"), ("numpy.testing", "rundocs")]


def _cifar_python(rng, work):
    folder = _copy(rng, "cifar-python", work)
    hundred = os.path.exists(os.path.join(folder, "train"))
    batch = "train" if hundred else rng.choice(["data_batch_1", "test_batch"])
    return folder, hundred, os.path.join(folder, batch)


def _call(module, name, arg):
    """Protocol 2: GLOBAL module name, the argument, TUPLE1, REDUCE."""
    return (b"c" + module.encode() + b"\n" + name.encode() + b"\n" +
            pickle.dumps(arg, protocol=2)[2:-1] + b"\x85R")


def names_cifar_python(rng, work, top):
    """Globals a pickle asks for (never admitted: anything but the arrays' own
    constructors is refused, exit 1), hostile class names in the meta file."""
    folder, hundred, batch = _cifar_python(rng, work)
    how = rng.choice(["global", "global", "stack-global", "class"])
    if how == "class":
        meta = os.path.join(folder, "meta" if hundred else "batches.meta")
        key, count = (b"fine_label_names", 100) if hundred else (b"label_names", 10)
        names = [b"c%d" % i for i in range(count)]
        evil = hostile_name(rng, top)
        names[rng.randrange(count)] = evil.encode("utf-8", "surrogateescape")
        obj = {key: names}
        if hundred:
            obj[b"coarse_label_names"] = [b"k%d" % i for i in range(20)]
        with open(meta, "wb") as f:
            f.write(pickle.dumps(obj, protocol=2))
        return Case(folder, f"CIFAR python class name {evil!r}")
    module, name = rng.choice(REFUSED_GLOBALS)
    if how == "global":
        body = _call(module, name, "touch " + os.path.join(top, "pwned"))
    else:  # protocol 4: the names as strings on the stack
        body = (pickle.dumps(module, protocol=4)[2:-1] + pickle.dumps(name, protocol=4)[2:-1]
                + b"\x93" + pickle.dumps(("x",), protocol=4)[2:-1] + b"R")
    # The call as the dict's labels value, where a loader would run it.
    data = b"\x80\x02}q\x00(U\x06labels" + body + b"u."
    with open(batch, "wb") as f:
        f.write(data)
    return Case(folder, f"CIFAR python {how} {module}.{name}", BAD)


def labels_cifar_python(rng, work, top):
    """labels/fine_labels: values outside the classes, not ints, or a list of another
    length than data's rows: refused (exit 1)."""
    folder, hundred, batch = _cifar_python(rng, work)
    n, limit = (2, 100) if hundred else (3, 10)
    key = b"fine_labels" if hundred else b"labels"
    how = rng.choice(["value", "value", "length", "type"])
    labels = list(range(n))
    if how == "value":
        labels[rng.randrange(n)] = rng.choice([v for v in LABEL_VALUES
                                              if isinstance(v, float) or not 0 <= v < limit])
    elif how == "length":
        labels = labels + [0] * rng.choice([1, 1000]) if rng.random() < 0.5 else labels[:-1]
    else:
        labels[0] = rng.choice([b"1", "1", None, [1], 1.0, 2.5])
    images = np.random.default_rng(rng.randrange(1 << 30)).integers(
        0, 256, (n, PIXELS), dtype=np.uint8)
    obj = {key: labels, b"data": images}
    if hundred:
        obj[b"coarse_labels"] = [0] * n
    with open(batch, "wb") as f:
        f.write(pickle.dumps(obj, protocol=2))
    return Case(folder, f"CIFAR python {key.decode()} {how}: {labels[:4]!r}", BAD)


def ratio_cifar_python(rng, work, top):
    """Strings whose declared length is far past the file (BINBYTES of 2^32-1, BINUNICODE8
    of 2^40), or a pixel string of mib MiB that the header's row count does not match:
    refused (exit 1)."""
    folder, hundred, batch = _cifar_python(rng, work)
    how = rng.choice(["binbytes", "binunicode8", "rows"])
    if how == "binbytes":
        blob = b"B" + struct.pack("<I", rng.choice([2 ** 32 - 1, 2 ** 31, 10 ** 9])) + \
            bytes(rng.choice([0, 100, 4096]))
    elif how == "binunicode8":
        blob = b"\x8d" + struct.pack("<Q", rng.choice([2 ** 40, 2 ** 63, 2 ** 64 - 1])) + b"x"
    else:
        mib = min(bomb_mib(rng), 16)
        blob = b"B" + struct.pack("<I", mib * MIB + 1) + bytes(mib * MIB + 1)
    data = b"\x80\x02}q\x00(U\x04data" + blob + b"u."
    with open(batch, "wb") as f:
        f.write(data)
    return Case(folder, f"CIFAR python {how}", BAD)


# --- SVHN -----------------------------------------------------------------------------------

def _svhn(rng, work):
    return _copy(rng, "svhn", work)


def _savemat(path, x, y, compress):
    import scipy.io
    scipy.io.savemat(path, {"X": x, "y": y}, do_compression=compress)


def names_svhn(rng, work, top):
    """The split is the file's name: a hostile one (a file named directly is read
    whatever its name; one the folder holds must be a safe name, else refused)."""
    path = _svhn(rng, work)
    evil = hostile_name(rng, top, filesystem=True)
    new = os.path.join(os.path.dirname(path), f"{evil}_32x32.mat")
    os.rename(path, new)
    return Case(rng.choice([new, os.path.dirname(new)]), f"SVHN file {evil!r}_32x32.mat")


def labels_svhn(rng, work, top):
    """y holds SVHN's labels 1..10 (10 is digit 0): anything else (0, 11, -1, 0.5, NaN,
    inf, 2^63) is refused (exit 1); y of another element type, read if whole numbers in
    range."""
    path = _svhn(rng, work)
    images = np.random.default_rng(rng.randrange(1 << 30)).integers(
        0, 256, (32, 32, 3, 3), dtype=np.uint8)
    bad = rng.random() < 0.7
    y = np.array([[1.0], [10.0], [5.0]])
    if bad:
        y[rng.randrange(3), 0] = rng.choice([0, 11, -1, 0.5, float("nan"), float("inf"),
                                             2.0 ** 63, 1e300, 10.5, 255])
    dtype = rng.choice(["<f8", "<f4", "|u1", "<i4"]) if not bad else "<f8"
    _savemat(path, images, y.astype(dtype), rng.random() < 0.5)
    return Case(path, f"SVHN y {dtype} {y[:, 0].tolist()}", BAD if bad else None)


def _mat_header():
    text = b"MATLAB 5.0 MAT-file, hostile"
    return text + b" " * (116 - len(text)) + bytes(8) + b"\x00\x01IM"


def _element(kind, payload, pad=True):
    out = struct.pack("<II", kind, len(payload)) + payload
    return out + bytes(-len(out) % 8 if pad else 0)


def _matrix_header(name, dims, cls, nbytes, flags=0):
    """A miMATRIX's tag (14), array flags, dimensions and name, before its data element
    of nbytes (the tag's count includes it)."""
    sub = _element(6, struct.pack("<II", cls | flags, 0)) + \
        _element(5, struct.pack(f"<{len(dims)}i", *dims)) + _element(1, name)
    return sub, struct.pack("<II", 14, len(sub) + 8 + nbytes + (-nbytes % 8))


def ratio_svhn(rng, work, top):
    """A compressed element (miCOMPRESSED, zlib) that inflates to mib MiB; X whose
    dimensions claim far more images than its data holds; both refused or read within
    the budget, never past it."""
    path = _svhn(rng, work)
    how = rng.choice(["bomb", "bomb-trailing", "dims", "dims-huge"])
    ysub, ytag = _matrix_header(b"y", (3, 1), 6, 24)
    y = ytag + ysub + _element(9, struct.pack("<3d", 1, 2, 3))
    mib = bomb_mib(rng)
    if how.startswith("bomb"):
        n = mib * MIB // PIXELS if how == "bomb" else 3
        nbytes = n * PIXELS
        sub, tag = _matrix_header(b"X", (32, 32, 3, n), 9, nbytes)
        extra = mib * MIB if how == "bomb-trailing" else 0
        inner = zlib_parts([tag + sub + struct.pack("<II", 2, nbytes), nbytes + (-nbytes % 8)
                            + extra])
        body = _element(15, inner, pad=False) + _element(15, zlib_parts([y]), pad=False)
        expect = BAD if how == "bomb" and n != 3 else None  # y: 3 labels for n images
        what = f"compressed X of {n:,} images, {mib} MiB{' trailing' if extra else ''}"
    else:
        n = rng.choice([4, 1000, 2 ** 31 - 1]) if how == "dims" else 2 ** 31 - 1
        dims = (32, 32, 3, n) if how == "dims" else (2 ** 31 - 1, 2 ** 31 - 1, 3, 3)
        data = bytes(3 * PIXELS)
        sub, tag = _matrix_header(b"X", dims, 9, len(data))
        body = tag + sub + _element(2, data) + y
        expect = BAD
        what = f"X dims {dims} over {len(data)} bytes"
    with open(path, "wb") as f:
        f.write(_mat_header() + body)
    return Case(path, f"SVHN {how}: {what}", expect)


# --- MedMNIST -------------------------------------------------------------------------------

def _medmnist_npz(path, arrays, compress):
    """np.savez's layout, but a member name that is not UTF-8 (a hostile name's
    surrogates) is written as its bytes, as zipfile cannot (hostile._zip)."""
    import io
    import zipfile
    members = []
    for key, array in arrays.items():
        out = io.BytesIO()
        np.lib.format.write_array(out, np.asanyarray(array), allow_pickle=False)
        name = f"{key}.npy"
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            name = name.encode("utf-8", "surrogateescape")
        members.append((name, out.getvalue(),
                        zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED))
    with open(path, "wb") as f:
        f.write(_zip(members))


def names_medmnist(rng, work, top):
    """The file's name picks the table's class names (when the content agrees): a hostile
    name is just a name; a member whose split name is hostile is not MedMNIST's, not read."""
    path = _copy(rng, "medmnist", work)
    evil = hostile_name(rng, top, filesystem=True)
    how = rng.choice(["file", "file", "member"])
    if how == "file":
        new = os.path.join(os.path.dirname(path), f"{evil}.npz")
        os.rename(path, new)
        return Case(new, f"MedMNIST file {evil!r}.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays[f"{evil}_images"] = arrays["train_images"]
    arrays[f"{evil}_labels"] = arrays["train_labels"]
    _medmnist_npz(path, arrays, rng.random() < 0.5)
    return Case(path, f"MedMNIST member {evil!r}_images")


def labels_medmnist(rng, work, top):
    """One label row per image, whole numbers, multi-label 0 or 1, never objects: a
    count mismatch, an object (pickled) array or a multi-label value other than 0/1 is
    refused (exit 1); other hostile values in (N, 1), or (N, 15) of 0/1, are read or
    refused in one line."""
    rng_np = np.random.default_rng(rng.randrange(1 << 30))
    images = rng_np.integers(0, 256, (3, 28, 28, 3), dtype=np.uint8)
    how = rng.choice(["count", "object", "multi-value", "values", "wide"])
    expect = BAD
    if how == "count":
        labels = np.zeros((rng.choice([0, 2, 4, 1000]), 1), np.uint8)
    elif how == "object":
        labels = np.array([[1], [2], [{"x": 1}]], dtype=object)
    elif how == "multi-value":
        labels = rng_np.integers(0, 2, (3, 14), dtype=np.uint8)
        labels[rng.randrange(3), rng.randrange(14)] = rng.choice([2, 7, 255])
    elif how == "values":
        labels = label_array(rng, 3, rng.choice(LABEL_DTYPES))[0].reshape(3, 1)
        expect = None
    else:
        labels = rng_np.integers(0, 2, (3, 15), dtype=np.uint8)
        expect = None
    path = os.path.join(work, "in", rng.choice(["chestmnist.npz", "bloodmnist.npz",
                                                "data.npz"]))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    arrays = {"train_images": images, "train_labels": labels}
    if how == "object":
        np.savez(path, **arrays)  # allow_pickle is np.save's default for objects
    else:
        _medmnist_npz(path, arrays, rng.random() < 0.5)
    return Case(path, f"MedMNIST labels {how} {labels.dtype} {labels.shape}", expect)


def ratio_medmnist(rng, work, top):
    """Deflated members that expand to mib MiB: honest (read within the budget),
    trailing data after the images, images declaring more rows than they hold, a zip
    size that lies, or labels of zeros far past the images' count."""
    mib = bomb_mib(rng)
    n = max(1, mib * MIB // 2352)
    how = rng.choice(["honest", "trailing", "short", "size-lie", "labels"])
    x = ("train_images.npy", [_npy_header((3, 28, 28, 3)), 3 * 2352], None)
    y = ("train_labels.npy", [_npy_header((3, 1)), bytes(3)], None)
    # No exit code is the rule's here: `info` reads the .npy headers alone, so a lie
    # in the data (trailing bytes, a zip size) may pass it; a conversion refuses it.
    expect = None
    if how == "honest":
        n = min(n, (64 * MIB) // 2353)
        x = ("train_images.npy", [_npy_header((n, 28, 28, 3)), n * 2352], None)
        y = ("train_labels.npy", [_npy_header((n, 1)), n], None)
    elif how == "trailing":
        x = ("train_images.npy", [_npy_header((3, 28, 28, 3)), 3 * 2352 + mib * MIB], None)
    elif how == "short":
        x = ("train_images.npy", [_npy_header((rng.choice([n * 2, 2 ** 31, 10 ** 12]), 28, 28,
                                               3)), mib * MIB], None)
    elif how == "size-lie":
        x = ("train_images.npy", [_npy_header((3, 28, 28, 3)), 3 * 2352 + mib * MIB],
             rng.choice([3 * 2352 + 128, 0, 2 ** 32 - 1]))
    else:
        y = ("train_labels.npy", [_npy_header((3, 1), rng.choice(["<i8", "<f8", "|u1"])),
                                  mib * MIB], None)
    target = os.path.join(work, "in", "pathmnist.npz")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as f:
        f.write(_local_zip([x, y]))
    return Case(target, f"MedMNIST deflate bomb {how}, {mib} MiB of zeros", expect)


FAMILIES = {
    "names": {"cifar": names_cifar, "cifar-python": names_cifar_python,
              "svhn": names_svhn, "medmnist": names_medmnist},
    "labels": {"cifar": labels_cifar, "cifar-python": labels_cifar_python,
               "svhn": labels_svhn, "medmnist": labels_medmnist},
    "ratio": {"cifar": ratio_cifar, "cifar-python": ratio_cifar_python,
              "svhn": ratio_svhn, "medmnist": ratio_medmnist},
}
