"""Class names: where the MNIST family publishes them, and how a split carries them.

Header.class_names is indexed by label; () when unknown (MNIST and QMNIST publish none,
so their outputs stay as before). Sources: a names file (--class-names, classes.txt),
EMNIST's mapping.txt, KMNIST's classmap.csv, and the published names of Fashion-MNIST
and KMNIST. Names are data: bounded in number and length, one for every label.
"""

import hashlib
import os
import re

import numpy as np

from ..errors import FormatError, MnistconvError, UsageError
from ..io.fileio import check_input_file, create_staged, open_input
from ..limits import MAX_CLASSES, is_number, printable
from ..family.sources import FAMILIES

# One class name: a word or a short phrase ("T-shirt/top", "The Eiffel Tower").
MAX_CLASS_NAME_LENGTH = 256
# Controls and Unicode's line separators split a line for some reader; a BOM too.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
MAX_NAMES_FILE_BYTES = MAX_CLASSES * 64

FASHION_MNIST = FAMILIES["fashion-mnist"].class_names
KMNIST = FAMILIES["kmnist"].class_names

# The published labels files by their MD5: their family, without guessing from a folder.
_LABELS_MD5 = {f.md5: (shown, names) for key, shown, names in
               (("fashion-mnist", "Fashion-MNIST", FASHION_MNIST), ("kmnist", "KMNIST", KMNIST))
               for f in FAMILIES[key].files if "-labels-" in f.name}
# torchvision's folders (root/FashionMNIST/raw/...) and the usual download folders.
_FOLDERS = {**dict.fromkeys(("fashionmnist", "fashion-mnist", "fashion_mnist"),
                            ("Fashion-MNIST", FASHION_MNIST)), "kmnist": ("KMNIST", KMNIST)}
# Larger files are not hashed to find out whether they are a published labels file.
_MAX_HASHED = 1 << 20


def sidecar_name(prefix=""):
    """The names file beside IDX files: classes.txt, or <prefix>-classes.txt."""
    return f"{prefix}-classes.txt" if prefix else "classes.txt"


def check_name(name, path, where):
    """A name as every writer can store it and every reader read back: UTF-8 text of 1
    to MAX_CLASS_NAME_LENGTH characters, not blank, no line break or other control."""
    if not isinstance(name, str):
        raise FormatError(path, f"{where}: class name {printable(name)} is not text",
                          "name each class with text")
    if len(name) > MAX_CLASS_NAME_LENGTH:
        raise FormatError(path, f"{where}: class name {printable(name)} is longer than "
                                f"mnistconv's limit of {MAX_CLASS_NAME_LENGTH} characters",
                          "shorten it where the class names are written")
    if not name.strip():
        raise FormatError(path, f"{where}: class name {printable(name)} is blank",
                          "every class needs a name")
    if _CONTROL.search(name):
        raise FormatError(path, f"{where}: class name {printable(name)} holds a line "
                                "break or control character",
                          "names are stored one per line")
    if not name.isascii():  # lone surrogates: a file name's non-UTF-8 bytes, a JSON \ud800
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise FormatError(path, f"{where}: class name {printable(name)} is not "
                                    "UTF-8 text", "write the class names as UTF-8 "
                                                  "text") from None
    return name


def check_names(names, path, what="class names"):
    """A tuple of names, bounded in number and length."""
    names = tuple(names)
    if len(names) > MAX_CLASSES:
        raise FormatError(path, f"{what}: {len(names):,} names, more than mnistconv's "
                                f"limit of {MAX_CLASSES:,} classes",
                          "give one name per class where the class names are written")
    for i, name in enumerate(names):
        check_name(name, path, f"{what}, class {i}")
    return names


def _read_text(path, what):
    if os.path.isdir(path):
        raise UsageError(path, f"is a directory, expected {what}", "name the file itself")
    with open_input(path) as f:  # a FIFO or device refused; callers confine it
        size = os.fstat(f.fileno()).st_size  # the size of what is read, not of a name
        if size > MAX_NAMES_FILE_BYTES:
            raise FormatError(path, f"{size:,} bytes is too large for {what} (mnistconv's "
                                    f"limit is {MAX_NAMES_FILE_BYTES:,})",
                              "check that the path names a class names file")
        data = f.read(MAX_NAMES_FILE_BYTES + 1)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise FormatError(path, f"{what} is not UTF-8 text (byte {e.start})",
                          "save it as UTF-8 text") from None


def read_text(path, what):
    """A small UTF-8 side file's text, its size bounded first (`what` names it in
    messages): for names files of other shapes (CIFAR's end in blank lines)."""
    return _read_text(path, what)


def read_names_file(path):
    """The names of a names file: one per line (\\n or \\r\\n), label 0 first."""
    text = _read_text(path, "a class names file (one name per line)")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    names = [line[:-1] if line.endswith("\r") else line for line in lines]
    if not names:
        raise FormatError(path, "names no classes (the file is empty)",
                          "write one class name per line, the name of label 0 first")
    for i, name in enumerate(names):
        if not name.strip():
            raise FormatError(path, f"line {i + 1} is empty: every class needs a name",
                              "write one class name per line, the name of label 0 first")
    return check_names(names, path)


def read_emnist_mapping(path):
    """EMNIST's emnist-<split>-mapping.txt ("label code [code ...]" per line, codes the
    characters' numbers): names by label, "N/A" for labels not listed, as torchvision."""
    text = _read_text(path, "an EMNIST mapping file")
    pairs = {}
    for n, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            numbers = [int(x) for x in fields]
        except ValueError:
            numbers = []  # refused below, as a line of too few numbers
        if len(numbers) < 2 or not 0 <= numbers[0] < MAX_CLASSES or \
                not all(0 < c < 0x110000 for c in numbers[1:]):
            raise FormatError(path, f"line {n} is not 'label code': {printable(line)}",
                              "EMNIST mapping lines are a label and character codes")
        if numbers[0] in pairs:
            raise FormatError(path, f"line {n} names label {numbers[0]} a second time",
                              "fix that line, or download the mapping again")
        pairs[numbers[0]] = "".join(chr(c) for c in numbers[1:])
    if not pairs:
        raise FormatError(path, "names no classes (the file is empty)",
                          "check the path, or download the mapping again")
    names = [pairs.get(i, "N/A") for i in range(max(pairs) + 1)]
    return check_names(names, path, "EMNIST mapping")


def read_classmap_csv(path):
    """KMNIST/Kuzushiji-49's <name>_classmap.csv (`index,codepoint,char` rows): the chars."""
    import csv
    import io
    text = _read_text(path, "a class map CSV")
    reader = csv.reader(io.StringIO(text))
    try:
        rows = list(reader)
    except csv.Error as e:  # e.g. a lone carriage return inside a name
        raise FormatError(path, f"line {reader.line_num} is not CSV "
                                f"({str(e).split(' - ')[0]})",
                          "fix that line, or download the class map again") from None
    if not rows or [c.strip().lower() for c in rows[0]] != ["index", "codepoint", "char"]:
        raise FormatError(path, "is not a class map: its first line is not "
                                "'index,codepoint,char'", "check the path, or download the class map again")
    names = {}
    for n, row in enumerate(rows[1:], 2):
        if not row:
            continue
        if len(row) != 3 or not is_number(row[0].strip()):
            raise FormatError(path, f"line {n} is not 'index,codepoint,char': "
                                    f"{printable(','.join(row))}",
                              "fix that line, or download the class map again")
        digits = row[0].strip()
        # Compared as text first: int() refuses a number of over 4,300 digits.
        index = int(digits) if len(digits) <= len(str(MAX_CLASSES)) else MAX_CLASSES
        if index >= MAX_CLASSES or index in names:
            raise FormatError(path, f"line {n}: index {printable(digits)} is out of range "
                                    "or repeated",
                              "fix that line, or download the class map again")
        names[index] = check_name(row[2], path, f"line {n}")
    if sorted(names) != list(range(len(names))):
        raise FormatError(path, "its indexes are not 0, 1, 2, ... without gaps",
                          "fix the indexes, or download the class map again")
    return tuple(names[i] for i in range(len(names)))


def published_names(labels_path):
    """(family, names) of a labels file Fashion-MNIST or KMNIST publishes, else (None, ())."""
    try:
        with open_input(labels_path) as f:
            digest = hashlib.md5(f.read(_MAX_HASHED + 1)).hexdigest() \
                if os.fstat(f.fileno()).st_size <= _MAX_HASHED else None
        if digest in _LABELS_MD5:
            return _LABELS_MD5[digest]
    except (OSError, MnistconvError):  # not a published file: named by its folder below
        pass
    parts = os.path.abspath(labels_path).split(os.sep)[:-1]
    if parts and parts[-1] == "raw":  # torchvision: root/<Class>/raw/<file>
        parts = parts[:-1]
    if parts and parts[-1].lower() in _FOLDERS:
        return _FOLDERS[parts[-1].lower()]
    return None, ()


def names_by_label(found, num_labels):
    """Names by label from records' own (found), unnamed by number; () if all are numbers."""
    if not found or all(name == str(label) for label, name in found.items()):
        return ()
    return tuple(found.get(i, str(i)) for i in range(num_labels))


def check_covers(names, labels, path, split_name, source=None,
                 hint="give a names file that covers every label"):
    """A FormatError naming the first label of the split without a name."""
    if not len(names) or not len(labels):
        return
    labels = np.asarray(labels)
    bad = (labels < 0) | (labels >= len(names))
    if bad.any():
        i = int(np.argmax(bad))
        raise FormatError(source or path, f"names {len(names)} classes (labels 0.."
                                          f"{len(names) - 1}), but label "
                                          f"{labels[i].item()} of {split_name} example {i} "
                                          "has no name", hint)


def check_dataset(dataset):
    """Every split with class names names each of its labels (check_covers)."""
    for split in dataset.splits.values():
        if split.header.class_names:
            check_names(split.header.class_names, split.header.source or split.name)
            check_covers(split.header.class_names, split.labels(),
                         split.header.source or split.name, split.name,
                         hint="give names for every class (--class-names)")


def attach(dataset, names, source, check=True):
    """The dataset, every split given these names (checked against its labels)."""
    names = tuple(names)
    for split in dataset.splits.values():
        if check:
            check_covers(names, split.labels(), source, split.name)
        split.header = split.header.with_(class_names=names)
    return dataset


def apply_names_file(dataset, path):
    """--class-names FILE: the names of a names file, for every split (checked)."""
    return attach(dataset, read_names_file(path), path)


def names_of(dataset):
    """The class names of a dataset's first split that has them; () when none does."""
    return next((s.header.class_names for s in dataset.splits.values()
                 if s.header.class_names), ())


def names_file(folder, files, names, prefix=""):
    """(the names file to write beside `files` in folder, or None without names; the
    earlier files it supersedes): the files' other-compression twins and, without names,
    a names file there, which a reader would take."""
    twins = [n[:-3] if n.endswith(".gz") else n + ".gz" for n in files]
    sidecar = os.path.join(folder, sidecar_name(prefix))
    stale = [os.path.join(folder, n) for n in twins] + ([] if names else [sidecar])
    return sidecar if names else None, [p for p in stale if os.path.lexists(p)]


def write_names_file(staged, target, names) -> list:
    """The names file target (None: none), one name a line, staged (a StagedOutput):
    [its OutputFile], or []."""
    from ..io.fileio import output_file_info
    if target is None:
        return []
    path = staged.file(target)
    with create_staged(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(name + "\n" for name in names))
    return [output_file_info(target, staged=path)]


def side_file(folder, name):
    """folder/name if there (refused if it leads out of folder: fileio.check_input)."""
    path = os.path.join(folder, name)
    if not os.path.lexists(path):
        return None
    check_input_file(path, folder or os.curdir)
    return path


def read_sidecar(dataset, folder, prefix=""):
    """Give the dataset's splits the names of <folder>/classes.txt if there: its path."""
    sidecar = side_file(folder, sidecar_name(prefix))
    if sidecar is None:
        return None
    attach(dataset, read_names_file(sidecar), sidecar)
    dataset.paths.append(sidecar)
    return sidecar


def check_labels(labels, path, first=0, where=""):
    """Refuse labels no class can have: NaN, infinities, fractions, MAX_CLASSES or more
    (negative ones pass: writers that cannot store them say so). first: labels[0]'s place."""
    if not len(labels) or labels.dtype.kind == "b" or \
            (labels.dtype.kind in "iu" and labels.dtype.itemsize < 4):
        return  # no value of these types can be out of range
    if labels.dtype.kind == "f":
        # MAX_CLASSES overflows float16: its warning would precede the one-line error.
        with np.errstate(all="ignore"):
            bad = ~np.isfinite(labels) | (labels != np.floor(labels)) | \
                (labels >= MAX_CLASSES)
    elif labels.max() >= MAX_CLASSES:
        bad = labels >= MAX_CLASSES
    else:
        return
    if bad.any():
        i = int(np.argmax(bad))
        raise FormatError(path, f"{where}label {labels[i].item()!r} of example {first + i} "
                                "is not a class number",
                          f"labels are whole numbers below {MAX_CLASSES:,}")
