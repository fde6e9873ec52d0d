"""Valid inputs for every registered reader, built once per session, to mutate.

For each format that can be written, a small generated dataset and the first examples of
the bundled sample (examples/data/mnist-sample) are written with the format's own writer,
with its default options and with each flag or choice of its write options, so the
variants (gzip, compressed, layouts, encodings) are fuzzed too. IDX also gets the bundled
sample files themselves, exactly as shipped. A format registered later (TFRecord,
GDMNIST1) is picked up without changes here.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

import mnistconv
from mnistconv.formats import registry
from mnistconv.errors import MissingDependency, MnistconvError
from mnistconv.model.records import ArraySplit, Dataset

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "data" / "mnist-sample"

_SEEDS = {}
_ROOT = None


def _root():
    global _ROOT
    if _ROOT is None:
        _ROOT = Path(tempfile.mkdtemp(prefix="mnistconv-fuzz-seeds-"))
        atexit.register(shutil.rmtree, _ROOT, True)
    return _ROOT


def small_dataset():
    rng = np.random.default_rng(6)
    train = rng.integers(0, 256, size=(7, 28, 28), dtype=np.uint8)
    test = rng.integers(0, 256, size=(3, 28, 28), dtype=np.uint8)
    return Dataset("generated", {
        "train": ArraySplit("train", train, np.array([3, 1, 4, 1, 5, 9, 2], np.uint8),
                            source="generated"),
        "test": ArraySplit("test", test, np.array([6, 5, 3], np.uint8), source="generated"),
    })


def sample_dataset(limit=20):
    from mnistconv.model import stream
    return stream.select(mnistconv.read(str(SAMPLE), "idx"), [], limit)


def option_variants(fmt):
    """Write options to try: none, then each flag on, then each non-default choice."""
    yield {}
    for opt in fmt.write_options:
        if opt.type == "flag":
            yield {opt.name: True}
        elif opt.type == "choice":
            for choice in opt.choices:
                if choice != opt.default:
                    yield {opt.name: choice}


# Write options whose output is another reader's format: npz's keys=medmnist writes a
# MedMNIST file, which detection reads as medmnist; it is that format's seed (below).
OTHER_FORMATS_VARIANTS = {"npz": [{"keys": "medmnist"}]}

# Interesting values of non-flag options, for formats that have them (an option the
# format does not take makes that variant fail to write, and it is skipped).
EXTRA_VARIANTS = {"tfrecord": [{"shards": 2}]}


def _write_seed(fmt, make, options, folder):
    """Write into its own folder as `data<ext>` (`data/` for a directory format); when
    the format takes one split per file, write the first split alone and, separately,
    every split into a directory. Returns the paths a reader takes: the file, or the
    folder when the writer made several files."""
    ext = "" if fmt.output_is_directory else (fmt.extensions[0] if fmt.extensions else "")
    dataset = make()
    first = Dataset(dataset.format, dict(list(dataset.splits.items())[:1]))
    found = []
    for data, name in ((dataset, "data" + ext), (dataset, "dir/"), (first, "data" + ext)):
        place = folder / f"{len(found)}"
        place.mkdir(parents=True)
        target = place / name
        try:
            mnistconv.write(data, str(target), fmt.name, **options)
        except MissingDependency:
            raise  # the format's extra is not installed: the test cannot run (conftest)
        except MnistconvError:
            shutil.rmtree(place)
            continue  # an option this data cannot take, or one split per file
        target = Path(str(target).rstrip("/"))
        SEED_FIXUPS.get(fmt.name, lambda place: None)(place)
        found.append(target if list(place.iterdir()) == [target] else place)
        if name == "data" + ext and data is dataset:
            break  # every split fits one output: the other shapes add nothing
    return found


def seeds(fmt_name):
    """Paths (files or directories) of valid inputs in this format."""
    if fmt_name in _SEEDS:
        return _SEEDS[fmt_name]
    fmt = registry.get(fmt_name)
    out = _root() / fmt_name
    out.mkdir()
    paths = []
    if fmt_name == "idx":
        shipped = out / "sample-as-shipped"
        shutil.copytree(SAMPLE, shipped)
        paths.append(shipped)
    if fmt.can_write:
        variants = list(option_variants(fmt)) + EXTRA_VARIANTS.get(fmt_name, [])
        try:
            for source_name, make in (("small", small_dataset), ("sample", sample_dataset)):
                for i, options in enumerate(variants):
                    if options in OTHER_FORMATS_VARIANTS.get(fmt_name, []):
                        continue  # (i kept: test_fuzz_cuts finds seeds by it)
                    paths += _write_seed(fmt, make, options, out / f"{source_name}-{i}")
        except MissingDependency:
            shutil.rmtree(out)  # the next test asking says the same
            raise
    paths += READ_ONLY_SEEDS.get(fmt_name, lambda folder: [])(out)
    _SEEDS[fmt_name] = paths
    return paths


def _kmnist_seeds(out):
    """KMNIST's published layout: kmnist-<split>-imgs.npz / -labels.npz, each one
    np.savez_compressed array (arr_0), with and without kmnist_classmap.csv; and one
    -imgs.npz file read alone (its -labels.npz beside it)."""
    dataset = small_dataset()
    paths = []
    for k, classmap in enumerate((True, False)):
        folder = out / f"kmnist-{k}"
        folder.mkdir()
        for name, split in dataset.splits.items():
            np.savez_compressed(folder / f"kmnist-{name}-imgs.npz", split.take(np.arange(split.header.count)))
            np.savez_compressed(folder / f"kmnist-{name}-labels.npz", split.labels())
        if classmap:
            (folder / "kmnist_classmap.csv").write_text(
                "index,codepoint,char\n" +
                "".join(f"{i},U+304{i},{chr(0x3040 + i)}\n" for i in range(10)),
                encoding="utf-8")
        paths.append(folder)
    return paths


def _quickdraw_seeds(out):
    """Quick, Draw!'s numpy bitmaps: full_numpy_bitmap_<class>.npy, uint8 N x 784, a
    folder of three classes (one with a space in its name) and one file alone."""
    rng = np.random.default_rng(7)
    folder = out / "quickdraw-0"
    folder.mkdir()
    for name, n in (("cat", 4), ("dog", 3), ("The Eiffel Tower", 2)):
        np.save(folder / f"full_numpy_bitmap_{name}.npy",
                rng.integers(0, 256, size=(n, 784), dtype=np.uint8))
    alone = out / "quickdraw-1"
    alone.mkdir()
    shutil.copyfile(folder / "full_numpy_bitmap_cat.npy", alone / "full_numpy_bitmap_cat.npy")
    return [folder, alone / "full_numpy_bitmap_cat.npy"]


def _relative_lists(place):
    """Caffe HDF5 list files name their .h5 files by file name alone, not the absolute
    paths the writer puts there: a case's copy of the seed then reads its own (cut)
    .h5 files; absolute entries would point at the uncut originals, outside the copy's
    folder, which the reader refuses."""
    for listed in place.rglob("*.txt"):
        names = [os.path.basename(e) for e in listed.read_text(encoding="utf-8").split()]
        listed.write_text("".join(n + "\n" for n in names), encoding="utf-8")


def _colour_images(n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)


def _planes(images):
    """CIFAR's rows: the R, G and B planes of each image."""
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2).reshape(len(images), -1))


def _cifar_seeds(out):
    """CIFAR-10's binary batches (label byte + planes) with batches.meta.txt, CIFAR-100's
    train.bin (coarse, fine, planes) with both name files, and one batch file alone."""
    ten = out / "cifar-10-batches-bin"
    ten.mkdir()
    for name, seed in (("data_batch_1.bin", 1), ("data_batch_2.bin", 2), ("test_batch.bin", 3)):
        rows = _planes(_colour_images(3, seed))
        labels = (np.arange(3, dtype=np.uint8) * (seed + 2)) % 10
        (ten / name).write_bytes(np.hstack([labels[:, None], rows]).tobytes())
    (ten / "batches.meta.txt").write_text("".join(f"c{i}\n" for i in range(10)) + "\n")
    hundred = out / "cifar-100-binary"
    hundred.mkdir()
    fine = np.array([5, 99, 42], np.uint8)
    (hundred / "train.bin").write_bytes(
        np.hstack([(fine // 5)[:, None], fine[:, None], _planes(_colour_images(3, 4))]).tobytes())
    (hundred / "fine_label_names.txt").write_text("".join(f"f{i}\n" for i in range(100)))
    (hundred / "coarse_label_names.txt").write_text("".join(f"k{i}\n" for i in range(20)))
    alone = out / "alone"
    alone.mkdir()
    shutil.copyfile(ten / "test_batch.bin", alone / "test_batch.bin")
    return [ten, hundred, alone / "test_batch.bin"]


def _cifar_python_seeds(out):
    """CIFAR's python batches as Python 3 pickles them (protocol 2, bytes keys), with
    batches.meta; and a CIFAR-100 train with meta."""
    import pickle
    ten = out / "cifar-10-batches-py"
    ten.mkdir()
    for name, seed in (("data_batch_1", 1), ("test_batch", 2)):
        (ten / name).write_bytes(pickle.dumps(
            {b"batch_label": b"b", b"labels": [seed, 3, 9], b"data": _planes(_colour_images(3, seed)),
             b"filenames": [b"a.png", b"b.png", b"c.png"]}, protocol=2))
    (ten / "batches.meta").write_bytes(pickle.dumps(
        {b"label_names": [b"c%d" % i for i in range(10)], b"num_vis": 3072}, protocol=2))
    hundred = out / "cifar-100-python"
    hundred.mkdir()
    (hundred / "train").write_bytes(pickle.dumps(
        {b"fine_labels": [5, 99], b"coarse_labels": [1, 19],
         b"data": _planes(_colour_images(2, 5))}, protocol=2))
    (hundred / "meta").write_bytes(pickle.dumps(
        {b"fine_label_names": [b"f%d" % i for i in range(100)],
         b"coarse_label_names": [b"k%d" % i for i in range(20)]}, protocol=2))
    return [ten, hundred]


def _svhn_seeds(out):
    """SVHN's .mat files (scipy.io.savemat, plain and zlib-compressed), 10 for the 0."""
    import scipy.io
    paths = []
    for k, compress in enumerate((False, True)):
        folder = out / f"svhn-{k}"
        folder.mkdir()
        images = _colour_images(3, 6 + k)
        scipy.io.savemat(folder / "train_32x32.mat",
                         {"X": np.ascontiguousarray(images.transpose(1, 2, 3, 0)),
                          "y": np.array([[10.], [1.], [9.]])}, do_compression=compress)
        paths.append(folder / "train_32x32.mat")
    return paths


def _medmnist_seeds(out):
    """MedMNIST .npz files: BloodMNIST-like colour (N, 1) labels, compressed, and a
    ChestMNIST-like grey file with 14 labels per image, stored."""
    rng = np.random.default_rng(8)
    blood, chest = out / "bloodmnist.npz", out / "chestmnist.npz"
    np.savez_compressed(blood, **{f"{s}_images": rng.integers(0, 256, (3, 28, 28, 3), dtype=np.uint8)
                                  for s in ("train", "val", "test")},
                        **{f"{s}_labels": rng.integers(0, 8, (3, 1), dtype=np.uint8)
                           for s in ("train", "val", "test")})
    np.savez(chest, train_images=rng.integers(0, 256, (3, 28, 28), dtype=np.uint8),
             train_labels=rng.integers(0, 2, (3, 14), dtype=np.uint8))
    # What mnistconv's npz writer writes with keys=medmnist (its round trip fuzzed too).
    written = out / "written" / "data.npz"
    written.parent.mkdir()
    mnistconv.write(small_dataset(), str(written), "npz", keys="medmnist")
    return [blood, chest, written]


# What a written seed needs before it is copied and mutated.
SEED_FIXUPS = {"caffe-hdf5": _relative_lists}


# Formats mnistconv only reads: their seeds are built from the published layouts.
READ_ONLY_SEEDS = {"kmnist": _kmnist_seeds, "quickdraw": _quickdraw_seeds,
                   "cifar": _cifar_seeds, "cifar-python": _cifar_python_seeds,
                   "svhn": _svhn_seeds, "medmnist": _medmnist_seeds}


def files_of(path):
    """The regular files a seed consists of (itself, or the files of its directory)."""
    path = Path(path)
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file())


def copy_seed(seed, dest):
    """Copy a seed into dest, keeping its name; returns the copy's path."""
    seed = Path(seed)
    target = Path(dest) / seed.name
    if seed.is_dir():
        shutil.copytree(seed, target)
    else:
        shutil.copyfile(seed, target)
    return target


def readers():
    return [f.name for f in registry.readers()]


def relative_files(seed):
    seed = Path(seed)
    return [os.path.relpath(p, seed) if seed.is_dir() else "" for p in files_of(seed)]
