"""The "budget" family (issue 24, class 4): every codec's expansion ratio and images up
to and past the size limit, each run through a conversion or a view (show, preview,
compare, --shuffle, --per-class), so the views meet every bomb too. The worker holds
every case to MAX_PEAK_MB and CASE_SECONDS as usual.

Same rules as hostile.py: plain functions of a random.Random, the input written under
work/in, a Case returned; bombs.py builds the files. Expected exit codes: a file that
breaks the expansion rule or the size limit is refused (1); one within them is read
(0), or for a random size either may hold (None: any of 0, 1, 2 with one line).
"""

import os

# The rule as docs/safety.md states it, written here as numbers (not the budget's own
# function, which would move with a bug in it): an input may expand to 1032 times its
# stored bytes, plus 32 MiB any input may hold.
RATIO, SLACK = 1032, 32 * 2 ** 20


def allowed_bytes(stored_bytes):
    return int(stored_bytes) * RATIO + SLACK


try:
    from . import bombs
    from .hostile import Case
except ImportError:
    import bombs
    from hostile import Case

# What a budget case runs (worker.command turns each into a command line).
VIEWS = ("show", "preview", "compare", "shuffle", "per-class")
COMMANDS = ("info", "npz", "tfrecord") + VIEWS


def _folder(work):
    folder = os.path.join(work, "in")
    os.makedirs(folder, exist_ok=True)
    return folder


def _commands(rng):
    """Views most of the time: they gather, shrink and compare, where bombs did harm."""
    return (rng.choice(VIEWS),) if rng.random() < 0.7 else (rng.choice(COMMANDS),)


def _expected(commands, too_large, fewest):
    """Exit codes for images over the size limit (1) or within it (0), run through
    `commands`: the per-class view asks for 3 of each class, a usage error (2) where a
    class has fewer, which may come before the size check."""
    short = "per-class" in commands and fewest < 3
    if too_large:
        return (1, 2) if short else (1,)
    return (2,) if short else (0,)


def budget_idx(rng, work, top):
    """QMNIST labels in .xz at, under and over the expansion rule; or valid IDX images
    near the size limit."""
    folder = _folder(work)
    if rng.random() < 0.6:
        examples = rng.choice([1000, 20_000, 200_000, 1_000_000])
        path = bombs.qmnist_xz(folder, examples)
        # xz of zeros is about 7000:1, so all but the smallest claim too much.
        xz = os.path.getsize(os.path.join(path, "train-labels-idx2-int.xz"))
        expect = (1,) if examples * 32 > allowed_bytes(xz) else None
        return Case(path, f"QMNIST xz labels of {examples} examples", expect,
                    commands=_commands(rng))
    side, count, commands = rng.choice([512, 2048, 4096, 4097]), rng.choice([1, 2, 3]), \
        _commands(rng)
    path = bombs.idx_of_large_images(folder, count=count, side=side)
    return Case(path, f"IDX of {count} {side}x{side} images",
                _expected(commands, side > 4096, count), commands=commands)


def budget_gdmnist(rng, work, top):
    count = rng.choice([10_000, 100_000, 760_000])
    path = bombs.gdmnist_gz(_folder(work), count)
    return Case(path, f"GDMNIST1 .bin.gz of {count} zero images", (0,),
                commands=_commands(rng))


def budget_hdf5(rng, work, top):
    count = rng.choice([1000, 40_000, 100_000, 200_000])
    path = bombs.hdf5_gzip(_folder(work), count)
    # The bomb stores every row in one chunk: over the budget from 42,800 rows.
    expect = (1,) if count * 784 > 32 << 20 else (0,)
    return Case(path, f"Caffe HDF5 gzip, {count} rows in one chunk", expect,
                commands=_commands(rng))


def budget_parquet(rng, work, top):
    rows = rng.choice([100, 5000, 200_000, 4_000_000])
    path = bombs.parquet_dictionary(_folder(work), rows)
    expect = (1,) if rows * 784 > allowed_bytes(os.path.getsize(path)) else (0,)
    return Case(path, f"Parquet, {rows} rows sharing one dictionary value", expect,
                commands=_commands(rng))


def budget_arrayrecord(rng, work, top):
    records = rng.choice([10, 2000, 20_000])
    side = rng.choice([28, 256, 1024])
    path = bombs.arrayrecord_zstd(_folder(work), records, side)
    expect = (1,) if records * side * side > allowed_bytes(os.path.getsize(path)) else (0,)
    return Case(path, f"zstd ArrayRecord, {records} identical {side}x{side} records",
                expect, commands=_commands(rng))


def budget_webdataset(rng, work, top):
    side = rng.choice([1024, 4096, 4097, 9400])
    count = rng.choice([1, 3, 10])
    path = bombs.tar_of_large_pngs(_folder(work), count, side)
    commands = _commands(rng)
    return Case(path, f"WebDataset tar of {count} {side}x{side} zero PNGs",
                _expected(commands, side > 4096, count), commands=commands)


def budget_imagefolder(rng, work, top):
    side = rng.choice([1024, 4096, 4097, 9400])
    root = os.path.join(_folder(work), "images")
    png = bombs.png_of_zeros(side, side)
    fewest = 3
    for split in ("train",):
        for label in ("0", "1"):
            os.makedirs(os.path.join(root, split, label))
            count = rng.choice([1, 3])
            fewest = min(fewest, count)
            for i in range(count):
                with open(os.path.join(root, split, label, f"{i}.png"), "wb") as f:
                    f.write(png)
    commands = _commands(rng)
    return Case(root, f"ImageFolder of {side}x{side} zero PNGs",
                _expected(commands, side > 4096, fewest), commands=commands)


FAMILIES = {"budget": {
    "idx": budget_idx, "gdmnist": budget_gdmnist, "caffe-hdf5": budget_hdf5,
    "parquet": budget_parquet, "arrayrecord": budget_arrayrecord,
    "webdataset": budget_webdataset, "imagefolder": budget_imagefolder,
}}
