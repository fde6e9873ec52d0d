"""Browser packs: small class-balanced GDMNIST1 subsets a web page loads, with a
manifest that proves every file (sizes, SHA-256, header fields, class counts), built by
build_browser_pack and checked by verify: per split `<split>.bin` and its deterministic
`<split>.bin.gz` (formats/gdmnist.py), then preview.json and manifest.json. How the
default pack (browser-v1) selects its examples:
  - the parent split of the 60000 training examples is torch.randperm(60000) on the CPU
    after torch.manual_seed(20260909): its first 50000 entries are the training pool,
    its last 10000 the validation pool. torch draws it as a Fisher-Yates pass over
    MT19937 outputs, numpy's legacy RandomState(seed) stream, so `torch_randperm`
    rebuilds it without torch; the manifest's pool hashes prove it.
  - train: the first 1000 of each digit in training-pool order; validation: the first
    200 of each digit in validation-pool order; test: the first 200 of each digit in
    the official test order; each interleaved 0,1,...,9,0,1,... so a prefix whose length
    is a multiple of 10 is balanced. test-full (optional): all 10000 test examples.
"""

import base64
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Optional

import numpy as np

from ..formats import registry
from ..formats.contract import admit
from ..errors import BadOption, FormatError, UsageError
from ..io.fileio import StagedOutput, create_staged, file_digest
from ..formats import gdmnist
from ..codecs import classes
from ..limits import default_workers, printable
from ..model.records import NO_PROGRESS, Dataset, OutputFile
from ..family.sources import FAMILIES
from ..model.stream import SelectionSplit, balanced_positions
from ..formats.gdmnist.manifest import dumps, open_manifest

SEED = 20260909
TRAIN_PER_CLASS = 1000
VALIDATION_PER_CLASS = 200
TEST_PER_CLASS = 200
VALIDATION_SIZE = 10000
PREVIEW_COUNT = 20
ASSET_VERSION = "browser-v1"
ALL_SPLITS = ("train", "validation", "test", "test-full")
OPTIONAL_SPLITS = ("test-full",)
# torch.randperm draws another way for huge n: the rebuild is allowed only far below.
RANDPERM_MAX = 1 << 24

# A source whose content hashes to these is the official MNIST, named and credited so.
OFFICIAL_MNIST = {f.name[:-len(".gz")]: f.content_sha256 for f in FAMILIES["mnist"].files}

MNIST_ATTRIBUTION = {
    "authors": ["Yann LeCun", "Corinna Cortes", "Christopher J.C. Burges"],
    "homepage": "https://yann.lecun.org/exdb/mnist/index.html",
    "license": "CC BY-SA 3.0",
    "license_documentation": "https://keras.io/api/datasets/mnist/",
    "license_url": "https://creativecommons.org/licenses/by-sa/3.0/",
    "licensed_mirror_description": "https://github.com/cvdfoundation/mnist",
    "modification": "Selected balanced subsets from the existing experiment split and "
                    "repacked unchanged grayscale images into browser binary files.",
    "reference": "LeCun, Bottou, Bengio, and Haffner (1998). Gradient-Based Learning "
                 "Applied to Document Recognition. Proceedings of the IEEE "
                 "86(11):2278\u20132324. DOI:10.1109/5.726791.",
    "title": "The MNIST Database of Handwritten Digits",
}

EVALUATION_NOTE = (
    "The default test subset is class balanced: its overall accuracy equally weights the "
    "ten digits. It is exploratory when repeatedly consulted. Do not tune hyperparameters "
    "or choose epochs on test accuracy; use validation.")
BALANCED_PREFIXES = (
    "Every split is interleaved 0..9, so any prefix with size divisible by 10 is exactly "
    "class balanced (except optional test-full). Shuffle training minibatches before "
    "each epoch.")
TEST_POLICY = (
    "The train and validation selections read only the training split. Test labels were "
    "used only to construct the declared balanced test subset.")


def torch_randperm(n, seed) -> np.ndarray:
    """torch.randperm(n) (CPU, int64) after torch.manual_seed(seed), without torch: for i
    in 0..n-2 swap r[i] and r[i + random() % (n - i)], random() the next MT19937 output,
    as numpy's RandomState(seed).randint(0, 2**32, dtype=uint32) hands them out."""
    if not 0 <= seed < 1 << 32:
        raise BadOption(None, f"seed {seed} is outside 0..{(1 << 32) - 1}")
    if not 0 < n < RANDPERM_MAX:
        raise UsageError(None, f"cannot rebuild torch.randperm({n}): only sizes below "
                               f"{RANDPERM_MAX} are drawn this way",
                         "build the pack from a smaller training split")
    draws = np.random.RandomState(seed).randint(0, 1 << 32, size=n - 1,
                                                dtype=np.uint32).tolist()
    perm = list(range(n))
    for i, r in enumerate(draws):  # a plain list loop: numpy scalars cost far more
        j = i + r % (n - i)
        perm[i], perm[j] = perm[j], perm[i]
    return np.array(perm, dtype=np.int64)


def sha256_of(array, dtype) -> str:
    """SHA-256 of an array's bytes as dtype (e.g. "<i8"): the manifest's proof of pools."""
    return hashlib.sha256(np.ascontiguousarray(array, dtype).tobytes()).hexdigest()


def _idx_content_sha256(split, images):
    """SHA-256 the split's images or labels would have as a plain uint8 IDX file."""
    h = split.header
    if images:
        if np.dtype(h.dtype) != np.uint8 or len(h.shape) != 2:
            return None
        digest = hashlib.sha256(b"\0\0\x08\x03" + np.array(
            (h.count,) + tuple(h.shape), ">u4").tobytes())
        for batch in split.batches():
            digest.update(np.ascontiguousarray(batch.images).tobytes())
        return digest.hexdigest()
    labels = split.labels()
    if labels.dtype != np.uint8:
        return None
    return hashlib.sha256(b"\0\0\x08\x01" + np.array([h.count], ">u4").tobytes()
                          + labels.tobytes()).hexdigest()


def is_official_mnist(train, test) -> bool:
    """True when the two splits hold the official MNIST files' content, in any format."""
    return (train.header.count == 60000 and test.header.count == 10000
            and _idx_content_sha256(train, False) == OFFICIAL_MNIST["train-labels-idx1-ubyte"]
            and _idx_content_sha256(test, False) == OFFICIAL_MNIST["t10k-labels-idx1-ubyte"]
            and _idx_content_sha256(test, True) == OFFICIAL_MNIST["t10k-images-idx3-ubyte"]
            and _idx_content_sha256(train, True) == OFFICIAL_MNIST["train-images-idx3-ubyte"])


@dataclass
class PackSplit:
    """One split of a pack as planned: source split, positions, the selection's sentence."""
    id: str
    base: str  # "train" or "test": the source split the positions index
    positions: np.ndarray
    selection: str


@dataclass(frozen=True)
class PackOptions:
    """What a browser pack takes and how it is previewed (defaults: browser-v1)."""
    seed: int = SEED
    train_per_class: int = TRAIN_PER_CLASS
    validation_per_class: int = VALIDATION_PER_CLASS
    test_per_class: int = TEST_PER_CLASS
    validation_size: int = VALIDATION_SIZE
    splits: tuple = ALL_SPLITS
    preview_count: int = PREVIEW_COUNT
    preview_split: Optional[str] = None
    asset_version: str = ASSET_VERSION


def plan(train_labels, test_labels, o=PackOptions(), where=None):
    """({id: PackSplit}, provenance): the positions each pack split takes, from labels."""
    seed, splits, validation_size = o.seed, tuple(o.splits), o.validation_size
    unknown = [s for s in splits if s not in ALL_SPLITS]
    if unknown or not splits:
        raise UsageError(None, f"unknown split {', '.join(unknown) or '(none)'}",
                         f"choose from {', '.join(ALL_SPLITS)}")
    n_train, n_test = len(train_labels), len(test_labels)
    if not 0 < validation_size < n_train:
        raise BadOption(where, f"--validation-size {validation_size} must be between 1 "
                                f"and {n_train - 1} (the training split has {n_train})")
    perm = torch_randperm(n_train, seed)
    train_pool, validation_pool = perm[:n_train - validation_size], \
        perm[n_train - validation_size:]
    interleave = f"interleaved by digit 0..{int(train_labels.max()) if n_train else 9}"
    plans = {
        "train": PackSplit("train", "train", None,
                           f"First {o.train_per_class} examples per digit within the "
                           f"original seeded {len(train_pool)} training pool; "
                           f"{interleave}."),
        "validation": PackSplit("validation", "train", None,
                                f"First {o.validation_per_class} examples per digit within "
                                f"the original seeded {validation_size} validation pool; "
                                f"{interleave}."),
        "test": PackSplit("test", "test", None,
                          f"First {o.test_per_class} examples per digit in the original "
                          f"official test order; {interleave}. Never used to select "
                          "training or validation."),
        "test-full": PackSplit("test-full", "test", np.arange(n_test, dtype=np.int64),
                               f"All {n_test} official test images, in their original "
                               "order; natural class frequencies."),
    }
    picks = {"train": (train_labels, train_pool, o.train_per_class),
             "validation": (train_labels, validation_pool, o.validation_per_class),
             "test": (test_labels, np.arange(n_test, dtype=np.int64), o.test_per_class)}
    chosen = {}
    for name in (n for n in ALL_SPLITS if n in splits):
        if name in picks:
            labels, order, per_class = picks[name]
            have = np.bincount(labels[order].astype(np.int64))
            short = [c for c, n in enumerate(have) if n and n < per_class]
            if short:  # named here with this command's flag, not stream's --per-class
                raise UsageError(where, f"{name}: digit {short[0]} has only "
                                        f"{have[short[0]]} examples in its pool, fewer than "
                                        f"--{name}-per-class {per_class}",
                                 f"pass a smaller --{name}-per-class")
            plans[name].positions = balanced_positions(labels, order, per_class, where)
        chosen[name] = plans[name]
    separated = not np.intersect1d(train_pool, validation_pool).size
    if "train" in chosen and "validation" in chosen:
        separated = separated and not np.intersect1d(chosen["train"].positions,
                                                     chosen["validation"].positions).size
    provenance = {
        "balanced_prefixes": BALANCED_PREFIXES,
        "parent_split": f"torch.randperm({n_train}), first {n_train - validation_size} "
                        f"for train, final {validation_size} for validation",
        "separation_verified": bool(separated),
        "split_seed": seed,
        "test_selection_policy": TEST_POLICY,
        "train_pool_indices_sha256_int64_le": sha256_of(train_pool, "<i8"),
        "validation_pool_indices_sha256_int64_le": sha256_of(validation_pool, "<i8"),
    }
    return chosen, provenance


def _format_description(rows, columns, collections):
    pixel_offset, _, _, _ = gdmnist.layout(0, rows, columns)
    return {
        "body": [f"count*{rows * columns} uint8 pixels, images row-major",
                 "count uint8 labels in 0..9",
                 "0..3 zero padding bytes to 4-byte alignment",
                 "count uint32 original indices"],
        "compression": "The .bin.gz file is the exact .bin payload wrapped in deterministic "
                       "gzip; browsers may use DecompressionStream(\"gzip\"). SHA256 values "
                       "are given for both forms.",
        "endianness": "little",
        "header": ["0..7: ASCII magic GDMNIST1", "8: uint32 count",
                   f"12: uint32 rows={rows}", f"16: uint32 columns={columns}",
                   f"20: uint32 pixel offset={pixel_offset}", "24: uint32 label offset",
                   "28: uint32 original-index offset"],
        "header_bytes": gdmnist.HEADER_BYTES,
        "index_semantics": f"Zero-based index within source_collection; train and validation "
                           f"refer to {collections['train']}, while test and test-full "
                           f"refer to {collections['test']}.",
        "magic_ascii": "GDMNIST1",
    }


def _preview(split_id, file_name, images, labels, indices):
    n, rows, columns = images.shape
    return {
        "format": "mnistconv-preview-1", "split": split_id, "file": file_name,
        "rows": rows, "columns": columns, "count": n,
        "pixels": f"base64 of {rows}*{columns} uint8, row-major, 0 background, 255 ink",
        "examples": [{"position": i, "label": int(labels[i]),
                      "original_index": int(indices[i]),
                      "pixels": base64.b64encode(images[i].tobytes()).decode("ascii")}
                     for i in range(n)],
    }


@contextmanager
def _threads(workers):
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class PackResult:
    """What build_browser_pack wrote: the directory, its manifest and every file."""
    out: str
    manifest: dict
    files: list  # OutputFile of every file written, manifest.json last


def build_browser_pack(src, out, *, force=False, progress=NO_PROGRESS,
                       **options) -> PackResult:
    """Read SRC (anything with train and test splits) and write the browser pack into OUT
    with options (PackOptions' fields): from the official MNIST files with the defaults,
    the published browser-v1 pack, byte for byte in every .bin and .bin.gz."""
    import mnistconv
    o = PackOptions(**options)
    preview_count, preview_split = o.preview_count, o.preview_split
    dataset = mnistconv.read(src)
    missing = [s for s in ("train", "test") if s not in dataset.splits]
    if missing:
        raise UsageError(src, f"has no {' or '.join(missing)} split",
                         "give the official MNIST directory (train and test files)")
    train, test = dataset.splits["train"], dataset.splits["test"]
    # The pack's .bin files are GDMNIST1: what it holds, refused as every write refuses.
    admit(registry.get("gdmnist"), Dataset(dataset.format, {"train": train, "test": test}))
    for split in (train, test):
        gdmnist.check_writable(split, split.header.source or src)
    class_names = classes.names_of(dataset)
    for split in (train, test):  # the manifest's names must name every label packed
        classes.check_covers(class_names, split.labels(), split.header.source or src,
                             split.name)
    official = is_official_mnist(train, test)
    plans, provenance = plan(train.labels(), test.labels(), o, where=src)
    preview_split = preview_split or ("test" if "test" in plans else next(iter(plans)))
    if preview_split not in plans:
        raise BadOption(None, f"--preview-split {preview_split} is not one of the splits "
                               f"built ({', '.join(plans)})")
    if not 0 <= preview_count <= len(plans[preview_split].positions):
        raise BadOption(None, f"--preview-count {preview_count} is more than split "
                               f"'{preview_split}' holds")
    kind = "official-" if official else ""
    collections = {"train": f"{kind}training-{train.header.count}",
                   "test": f"{kind}test-{test.header.count}"}
    rows, columns = gdmnist.check_writable(train, src)
    names = [n for p in plans for n in (f"{p}.bin", f"{p}.bin.gz")]
    names += ["preview.json", "manifest.json"]
    entries, optional_entries, written, gz_jobs = {}, {}, [], {}
    preview = None
    workers = max(1, min(len(plans), default_workers()))
    # The pool's threads are joined before the staging is committed or removed.
    with StagedOutput(force, root=out) as staged, _threads(workers) as pool:
        stage = staged.directory(out, names)
        for name, p in plans.items():
            base = train if p.base == "train" else test
            split = SelectionSplit(base, p.positions)
            split.name = name
            bin_hash, _ = gdmnist.write_split_files(
                split, os.path.join(stage, f"{name}.bin"), None, progress, where=src)
            gz_job = pool.submit(gdmnist.gzip_file, os.path.join(stage, f"{name}.bin"),
                                 os.path.join(stage, f"{name}.bin.gz"))
            labels, indices = split.labels(), split.indices()
            _, label_offset, index_offset, _ = gdmnist.layout(len(labels), rows, columns)
            entry = {
                "bytes": bin_hash.bytes, "count": int(len(labels)), "id": name,
                "class_counts": np.bincount(labels.astype(np.int64), minlength=10).tolist(),
                "file": f"{name}.bin", "gzip_file": f"{name}.bin.gz",
                "gzip_bytes": None, "gzip_sha256": None,  # filled in once compressed
                "label_offset": label_offset, "original_index_offset": index_offset,
                "pixel_offset": gdmnist.HEADER_BYTES, "optional": name in OPTIONAL_SPLITS,
                "original_indices_sha256_uint32_le": sha256_of(indices, "<u4"),
                "selection": p.selection, "sha256": bin_hash.sha256(),
                "source_collection": collections[p.base],
            }
            (optional_entries if entry["optional"] else entries)[name.replace("-", "_")] \
                = entry
            written.append(OutputFile(os.path.join(out, f"{name}.bin"), bin_hash.bytes,
                                      bin_hash.sha256()))
            gz_jobs[name] = (gz_job, entry)
            if name == preview_split:
                first = np.arange(preview_count)
                preview = _preview(name, f"{name}.bin", split.take(first)
                                   .reshape(preview_count, rows, columns),
                                   labels[first], indices[first])
        # Level-9 gzip is most of the work: the files compress in parallel (zlib frees the GIL).
        progress.start("gzip", len(gz_jobs))
        try:
            for name, (job, entry) in gz_jobs.items():
                gz_hash = job.result()
                entry.update(gzip_bytes=gz_hash.bytes, gzip_sha256=gz_hash.sha256())
                written.append(OutputFile(os.path.join(out, f"{name}.bin.gz"),
                                          gz_hash.bytes, gz_hash.sha256()))
                progress.advance(1)
        finally:
            progress.finish()
        preview_bytes = dumps(preview)
        with create_staged(os.path.join(stage, "preview.json")) as f:
            f.write(preview_bytes)
        required = list(entries.values())
        manifest = {
            "asset_version": o.asset_version,
            "dataset": "MNIST" if official else "unknown (not the official MNIST files)",
            "default_total_bytes": sum(e["bytes"] for e in required),
            "default_total_gzip_bytes": sum(e["gzip_bytes"] for e in required),
            "description": "Small stratified browser subset, built by mnistconv pack "
                           "browser.",
            "evaluation_note": EVALUATION_NOTE,
            "format": _format_description(rows, columns, collections),
            "input": {"pixels": "uint8", "range": [0, 255],
                      "recommended_normalization": "Convert to float32 and divide by 255. "
                                                   "No fitted preprocessing.",
                      "shape": [rows, columns]},
            "preview": {"bytes": len(preview_bytes), "count": preview_count,
                        "file": "preview.json",
                        "sha256": hashlib.sha256(preview_bytes).hexdigest()},
            "producer": {"name": "mnistconv", "command": "mnistconv pack browser",
                         "version": mnistconv.__version__,
                         "parent_split_rebuild": "numpy RandomState(seed) MT19937 "
                                                 "Fisher-Yates, equal to torch.randperm "
                                                 "on the CPU"},
            "schema_version": 1,
            "split_provenance": dict(provenance, files={
                os.path.basename(p): dict(zip(("bytes", "sha256"), file_digest(p)))
                for p in dataset.paths if os.path.isfile(p)}),
            "splits": entries,
        }
        if official:
            manifest["attribution"] = MNIST_ATTRIBUTION
        if class_names:  # only then: a pack without names is as it always was
            manifest["class_names"] = list(class_names)
        if optional_entries:
            manifest["optional_splits"] = optional_entries
        manifest_bytes = dumps(manifest)
        with create_staged(os.path.join(stage, "manifest.json")) as f:
            f.write(manifest_bytes)
    written += [OutputFile(os.path.join(out, "preview.json"), len(preview_bytes),
                           manifest["preview"]["sha256"]),
                OutputFile(os.path.join(out, "manifest.json"), len(manifest_bytes),
                           hashlib.sha256(manifest_bytes).hexdigest())]
    return PackResult(str(out), manifest, written)


@dataclass
class Problem:
    """One failed check; str() is the line the CLI prints after `Error: `."""
    file: str
    field: str
    expected: object
    found: object

    def __str__(self):
        return (f"{self.file}: {self.field}: expected {_shown(self.expected)}, "
                f"found {_shown(self.found)}")


def _shown(value):
    """A manifest's value on one line: quoted and escaped when not plain."""
    text = str(value)
    return text if text.isprintable() and len(text) <= 200 else printable(text, 200)


@dataclass
class VerifyReport:
    """The outcome of verify(): files that passed every check, and every problem."""
    manifest: str
    checked: list = field(default_factory=list)  # files whose every check passed
    problems: list = field(default_factory=list)

    @property
    def ok(self):
        """True when no check failed."""
        return not self.problems

    def as_dict(self):
        """The report as `verify --json` prints it."""
        return {"manifest": self.manifest, "ok": self.ok, "checked": self.checked,
                "problems": [asdict(p) for p in self.problems]}


def _check(report, file, field_name, expected, found):
    if expected != found:
        report.problems.append(Problem(file, field_name, expected, found))
    return expected == found


def _verify_gdmnist(report, path, entry, file_key):
    """Whether size, hash, header, class counts and indices all match the entry."""
    bytes_key, hash_key = ("bytes", "sha256") if file_key == "file" else \
        ("gzip_bytes", "gzip_sha256")
    size, digest = file_digest(path)
    ok = _check(report, path, bytes_key, entry.get(bytes_key), size)
    ok &= _check(report, path, hash_key, entry.get(hash_key), digest)
    try:
        split = gdmnist.GdmnistSplit(entry.get("id") or "split", path)
    except FormatError as e:
        report.problems.append(Problem(path, "format", "a valid GDMNIST1 file", e.message))
        return False
    try:
        h = split.gdmnist
        for key, value in h.as_dict().items():
            if key in entry:
                ok &= _check(report, path, key, entry[key], value)
        # A block at a time: a small .bin.gz of tiny images holds labels without end.
        counts = np.zeros(256, np.int64)
        for block in split.blocks(h.label_offset, h.count):
            counts += np.bincount(np.frombuffer(block, np.uint8), minlength=256)
        used = max(10, int(np.flatnonzero(counts).max(initial=-1)) + 1)
        ok &= _check(report, path, "class_counts", entry.get("class_counts"),
                     counts[:used].tolist())
        digest = hashlib.sha256()
        for block in split.blocks(h.index_offset, 4 * h.count):
            digest.update(block)
        ok &= _check(report, path, "original_indices_sha256_uint32_le",
                     entry.get("original_indices_sha256_uint32_le"), digest.hexdigest())
        if file_key == "gzip_file":
            # The .gz must hold exactly the .bin.
            digest = hashlib.sha256()
            for block in split.content_blocks():
                digest.update(block)
            ok &= _check(report, path, "sha256 (of the decompressed content)",
                         entry.get("sha256"), digest.hexdigest())
    finally:
        split.close()
    return ok


def _present(report, path):
    """True for a regular file; else the problem is recorded (a FIFO would block a read)."""
    if os.path.isfile(path):
        return True
    found = ("a regular file", "a directory, device, FIFO or socket") \
        if os.path.exists(path) else ("present", "missing")
    report.problems.append(Problem(path, "file", *found))
    return False


def verify(manifest_path) -> VerifyReport:
    """Check every file a manifest (or a pack directory's) lists. Failures are collected
    in the report, not raised, so one run names every difference; a manifest that cannot
    be trusted to name files raises before any file is read."""
    manifest_path = str(manifest_path)
    if os.path.isdir(manifest_path):
        manifest_path = os.path.join(manifest_path, "manifest.json")
    opened = open_manifest(manifest_path, gdmnist.split_name)
    manifest = opened.data
    report = VerifyReport(manifest_path)
    totals = {"default_total_bytes": 0, "default_total_gzip_bytes": 0}
    for split in opened.splits:
        entry = split.entry
        if not split.optional:
            totals["default_total_bytes"] += entry.get("bytes") or 0
            totals["default_total_gzip_bytes"] += entry.get("gzip_bytes") or 0
        for file_key, path in split.paths.items():
            if _present(report, path) and _verify_gdmnist(report, path, entry, file_key):
                report.checked.append(path)
    for key, total in totals.items():
        if key in manifest:
            _check(report, manifest_path, key, manifest[key], total)
    preview = manifest.get("preview") or {}
    if opened.preview and _present(report, opened.preview):
        path = opened.preview
        size, digest = file_digest(path)
        ok = _check(report, path, "bytes", preview.get("bytes"), size)
        ok &= _check(report, path, "sha256", preview.get("sha256"), digest)
        if ok:
            report.checked.append(path)
    return report
