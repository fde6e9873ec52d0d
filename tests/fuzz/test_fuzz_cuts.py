"""Every file of every format cut one byte short of each of its structures, run through
the command line as a user would (`mnistconv convert CASE out/converted.npz --from FMT`,
in-process): exit 1, one `Error: <the cut file>: ...` line, no traceback, nothing written
(see runner.py). Random truncation (test_fuzz_readers) finds these only by luck: a file
one byte short of what its header declares is one length among thousands.

Boundaries (structure.py): IDX zero bytes, type, rank, each dimension, first item, data;
npz each zip local header, name, data and descriptor, each central directory entry and the
end records, and inside each member the .npy magic, version, header length, header,
first row, data; GDMNIST1 magic, each header field, first image, pixels, labels, padding,
first index, indices; TFRecord every record's length, length CRC, data and data CRC.
Compressed variants (gzip IDX and GDMNIST1, deflated npz, gzip and zlib TFRecord) are cut
inside the payload and in the container's own structure.
"""

import shutil

import pytest

from mnistconv.formats import registry
from .harness import FAILURES
from .runner import new_work, run_cli, scratch_dir
from .seeds import copy_seed, files_of, option_variants, seeds
from .structure import file_cuts

# The write options whose seeds are cut: the plain file and each compressed variant.
VARIANTS = {
    "idx": [{}, {"gzip": True}],
    "npz": [{}, {"compress": True}],
    "gdmnist": [{}, {"gzip": True}],
    "tfrecord": [{}, {"compression": "gzip"}, {"compression": "zlib"}],
    # Later formats: boundaries chosen by each file's content (structure.by_content).
    "tfds": [{}], "arrayrecord": [{}], "parquet": [{}], "webdataset": [{}],
    "imagefolder": [{}], "caffe-lmdb": [{}], "caffe-hdf5": [{}],
    "kmnist": None, "quickdraw": None,   # read-only: their published-layout seeds
    "cifar": None, "cifar-python": None, "svhn": None, "medmnist": None,
}


def cut_seeds(fmt):
    """The generated ('small') seeds written with each option set of VARIANTS."""
    if VARIANTS[fmt] is None:
        # The colour readers' seeds are each a layout of their own (CIFAR-10 and -100,
        # plain and compressed .mat): every one is cut.
        return seeds(fmt)[:1] if fmt in ("kmnist", "quickdraw") else seeds(fmt)
    variants = list(option_variants(registry.get(fmt)))
    picked = []
    for options in VARIANTS[fmt]:
        i = variants.index(options)
        picked += [s for s in seeds(fmt) if f"/small-{i}/" in str(s)]
    assert picked, f"no seeds for {fmt}"
    return picked


# Text files beside the data (a dataset card, class names, Caffe's list of .h5 files):
# cutting their last newline leaves them valid, so they have no boundaries to cut.
TEXT_SUFFIXES = (".md", ".txt", ".csv")
# Descriptions for other tools that no mnistconv reader reads (Croissant metadata):
# a cut one changes nothing mnistconv converts.
UNREAD_NAMES = ("croissant.json",)

# Cut cases that still misbehave, found when the later formats got boundaries; each is
# a reader (or seed) fix still to make. strict: the test says when one is fixed.
KNOWN_GAPS = {}


def cases(fmt):
    for seed in cut_seeds(fmt):
        for victim in files_of(seed):
            if victim.name.endswith(TEXT_SUFFIXES) or victim.name in UNREAD_NAMES:
                continue
            for what, data in file_cuts(fmt, victim.read_bytes(), victim.name):
                yield seed, victim, what, data


def test_every_format_has_cut_cases():
    assert set(VARIANTS) == {f.name for f in registry.readers()}, \
        "a reader without structural cuts: add its boundaries to structure.py"


@pytest.mark.parametrize("fmt", [pytest.param(f, marks=pytest.mark.xfail(
    reason=KNOWN_GAPS[f], strict=True)) if f in KNOWN_GAPS else f for f in sorted(VARIANTS)])
def test_cut_at_every_boundary(fmt):
    scratch = scratch_dir("mnistconv-fuzz-cuts-")
    try:
        _cut_every_boundary(fmt, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _cut_every_boundary(fmt, tmp_path):
    failures = []
    count = 0
    for k, (seed, victim, what, data) in enumerate(cases(fmt)):
        work = new_work(tmp_path, f"case{k}")
        case = copy_seed(seed, f"{work}/in")
        target = case / victim.relative_to(seed) if case.is_dir() else case
        target.write_bytes(data)
        args = ["convert", str(case), f"{work}/out/converted.npz", "--from", fmt, "--quiet"]
        code, out, err, problems = run_cli(args, work, expect_file=target, expect_code=(1,))
        count += 1
        if problems:
            saved = FAILURES / "cuts" / fmt / f"case{k}"
            shutil.rmtree(saved, ignore_errors=True)
            shutil.copytree(f"{work}/in", saved)
            failures.append(f"{victim.relative_to(seed.parent)}: {what}\n"
                            f"  mnistconv {' '.join(args)}\n  exit {code}, stderr {err!r}\n"
                            f"  " + "\n  ".join(problems) + f"\n  (input saved to {saved})")
        shutil.rmtree(work)
    assert count > 10
    assert not failures, f"{len(failures)} of {count} cut {fmt} files misbehaved:\n" + \
        "\n".join(failures)
