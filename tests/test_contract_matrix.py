"""The contract suite's second half (see test_contract_suite.py): what each format
declares it holds (spec.Holds, read by contract.admit at the door) held to its word.
Extras are kept or dropped as declared, and a capability matrix generated from the
declarations: each case round-trips exactly or is refused at the door, in its one
message, with nothing written."""

import numpy as np
import pytest

import mnistconv
from mnistconv.formats import registry
from mnistconv.model.records import ArraySplit, Dataset
from test_contract_suite import LOSSLESS, WRITERS, files_under, images_of, target, write


# --- What each format declares it holds (spec.Holds), held to its word -------------

def holding(name):
    """What `name` declares it holds under the suite's (lossless) options."""
    return registry.get(name).holding(LOSSLESS.get(name, {}))


class WithExtras(ArraySplit):
    """A split with named per-example extra columns (QMNIST's kind)."""

    carries_extras = True

    def __init__(self, name, images, labels, names, table):
        super().__init__(name, images, labels)
        self._extra = (tuple(names), np.asarray(table, np.int32))

    def extra_fields(self):
        return self._extra


@pytest.mark.parametrize("name", WRITERS)
def test_extras_are_kept_or_dropped_as_declared(tmp_path, name):
    from mnistconv.model.stream import extra_fields
    fmt = registry.get(name)
    rng = np.random.default_rng(3)
    table = rng.integers(-1000, 1000, (12, 2), dtype=np.int32)
    ds = Dataset("test", {"train": WithExtras(
        "train", rng.integers(0, 256, (12, 28, 28), dtype=np.uint8),
        (np.arange(12) % 10).astype(np.uint8), ("writer_id", "hsf_series"), table)})
    path = target(tmp_path, fmt)
    write(ds, path, name)
    back = mnistconv.read(path, name).splits["train"]
    got = extra_fields(back)
    if holding(name).extras:
        assert got is not None, f"{name} declares it keeps extras"
        names, values = got
        # By name: a tf.train.Example's features are a map, kept in name order.
        kept = {n: np.asarray(values)[:, i].tolist() for i, n in enumerate(names)}
        assert kept == {"writer_id": table[:, 0].tolist(),
                        "hsf_series": table[:, 1].tolist()}
    else:
        assert got is None, f"{name} declares it drops extras"


# The capability matrix: cases generated from what the formats declare (every channel
# count, pixel type and class limit some declaration names), with the ones every format
# must answer for; each either round-trips exactly or is refused at the door, in its
# one message, with nothing written.
CHANNEL_CASES = {1: "grey", 2: "grey+alpha", 3: "RGB", 4: "RGBA"}


def _declarations():
    return [holding(n) for n in WRITERS] + [registry.get(n).holds for n in WRITERS]


def capability_cases():
    declared = _declarations()
    channels = {1, 3, 4} | {c for h in declared if h.channels for c in h.channels}
    dtypes = {"uint16", "float32"} | {d for h in declared if h.dtypes for d in h.dtypes}
    classes = {2, 100} | {h.max_classes + 1 for h in declared if h.max_classes}
    cases = {CHANNEL_CASES.get(c, f"{c}-channels"): {"shape": (5, 4) + ((c,) if c > 1 else ())}
             for c in sorted(channels)}
    cases.update((d, {"dtype": d}) for d in sorted(dtypes - {"uint8"}))
    cases.update((f"{k}-classes", {"classes": k}) for k in sorted(classes))
    cases["multi-label"] = {"multilabel": 5}
    if any(h.channels is None for h in declared):
        cases["1-d-arrays"] = {"shape": (6,)}
    # The published datasets' own shapes (issue 37): CIFAR-10/100 and SVHN's 32 x 32 RGB,
    # MedMNIST's RGB sizes (28 to 224; MedMNIST+ adds 64, 128 and 224) and ChestMNIST's
    # 14 labels, as a reader hands them over.
    cases["cifar-svhn-32x32x3"] = {"shape": (32, 32, 3), "count": 3}
    for side in (28, 64, 128, 224):
        cases[f"medmnist-{side}x{side}x3"] = {"shape": (side, side, 3), "count": 3}
    cases["chestmnist-14-labels"] = {"shape": (28, 28), "multilabel": 14}
    cases["1x1"] = {"shape": (1, 1)}
    cases["4096x4096"] = {"shape": (4096, 4096), "count": 1}
    if any(h.one_image_size for h in declared):
        cases["sizes-differ"] = {"sizes_differ": True}
    return cases


CASES = capability_cases()


def pixels(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return ((rng.random(shape) - 0.5) * 1000).astype(dtype)


def case_dataset(shape=(5, 4), dtype="uint8", classes=10, multilabel=None, count=None,
                 sizes_differ=False):
    rng = np.random.default_rng(11)
    n = count or max(classes, 6)
    if shape == (4096, 4096):  # smooth, so PNG and zlib spend little time on it
        image = (np.add.outer(np.arange(4096), np.arange(4096)) % 251).astype(np.uint8)
        images = image[None]
    else:
        images = pixels(rng, (n,) + tuple(shape), dtype)
    if multilabel:
        labels = rng.integers(0, 2, (n, multilabel)).astype(np.uint8)
    else:
        labels = (np.arange(n) % classes).astype(np.uint8 if classes <= 256 else np.int32)
    splits = {"train": ArraySplit("train", images, labels,
                                  num_classes=None if multilabel else classes)}
    if sizes_differ:
        splits["test"] = ArraySplit("test", pixels(rng, (n, 6, 7), dtype), labels,
                                    num_classes=classes)
    return Dataset("test", splits)


def table_says_it_holds(table, case) -> bool:
    """Whether the table `mnistconv formats` and the format pages show (spec.Holds.table,
    read as text) says a format holds the matrix case: the docs are the oracle, so a
    declaration the table misstates fails the matrix."""
    spec = {"shape": (5, 4), "dtype": "uint8", "classes": 10, "multilabel": None,
            "sizes_differ": False, **CASES[case]}
    shape = spec["shape"]
    if table["images"] != "any array":
        if len(shape) < 2:
            return False
        channels = 1 if len(shape) == 2 else shape[2]
        if CHANNEL_CASES.get(channels, f"{channels} channels") not in \
                table["images"].split(", "):
            return False
    if table["dtypes"] != "any" and spec["dtype"] not in table["dtypes"].split(", "):
        return False
    targets, _, limit = table["targets"].partition(" (at most ")
    if ("multi-label" if spec["multilabel"] else "class") not in targets.split(", "):
        return False
    if limit and not spec["multilabel"] and spec["classes"] > int(limit.split()[0]):
        return False
    return not (spec["sizes_differ"] and table["image size"] == "one for all splits")


# A 4096 x 4096 image costs each format about a second: `make test` runs them, the inner
# loop (`make check`) keeps the small cases.
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c == "4096x4096"
                                  else c for c in CASES])
@pytest.mark.parametrize("name", WRITERS)
def test_each_case_round_trips_or_is_refused_at_the_door(tmp_path, name, case):
    from mnistconv.formats.contract import cannot_hold
    from mnistconv.errors import CannotWrite
    fmt = registry.get(name)
    ds = case_dataset(**CASES[case])
    holds = holding(name)
    refused = [cannot_hold(holds, s.header.schema) for s in ds.splits.values()]
    sizes = {tuple(s.header.shape[:2]) for s in ds.splits.values()}
    expect_refusal = any(r is not None for r in refused) or \
        (holds.one_image_size and len(sizes) > 1)
    assert expect_refusal != table_says_it_holds(holds.table(), case), \
        f"the docs' table of {name} ({holds.table()}) disagrees with its declaration"
    path = target(tmp_path / "out", fmt)
    if expect_refusal:
        with pytest.raises(CannotWrite) as refusal:
            write(ds, path, name)
        assert f"{name} cannot hold " in str(refusal.value)
        assert not (tmp_path / "out").exists() or files_under(tmp_path / "out") == []
        return
    write(ds, path, name)
    back = mnistconv.read(path, name)
    assert list(back.splits) == list(ds.splits)
    for split_name, split in ds.splits.items():
        got = back.splits[split_name]
        images = images_of(got)
        assert images.dtype == split._images.dtype, split_name
        assert np.array_equal(images, split._images), split_name
        assert np.array_equal(np.asarray(got.labels()), split._labels), split_name
