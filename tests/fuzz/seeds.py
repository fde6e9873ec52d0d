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
from mnistconv import registry
from mnistconv.errors import MissingDependency, MnistconvError
from mnistconv.records import ArraySplit, Dataset

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
    from mnistconv import stream
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


# What a written seed needs before it is copied and mutated.
SEED_FIXUPS = {"caffe-hdf5": _relative_lists}


# Formats mnistconv only reads: their seeds are built from the published layouts.
READ_ONLY_SEEDS = {"kmnist": _kmnist_seeds, "quickdraw": _quickdraw_seeds}


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
