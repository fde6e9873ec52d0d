"""--split-off NAME=SIZE (issue 38): a new split carved out of a source split, by the rule
stream.carve documents: k = SIZE (a count) or round(SIZE * n) (a fraction); the carved
positions are the first k of numpy's default_rng(seed).permutation(n), or stratified, the
first k_c of each class in it (k_c = floor(k n_c / n), the largest remainders one more,
ties to the smaller label); both parts in the source's order. The same bytes from every
runner, refused in one line otherwise, said in --json's notes and the card."""

import glob
import io
import json
import os
from collections import Counter

import numpy as np
import pytest

import mnistconv
from mnistconv.model import stream
from mnistconv.cli import main
from mnistconv.model.records import ArraySplit, Dataset
from helpers import refused_in_process, tree_hashes
from plan_helpers import cli

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# Classes of uneven sizes, so stratifying has remainders to share out.
TRAIN_LABELS = np.repeat(np.arange(4, dtype=np.uint8), [100, 70, 43, 17])
TRAIN_LABELS = np.random.default_rng(11).permutation(TRAIN_LABELS)  # 230 examples
TEST_LABELS = np.arange(70, dtype=np.uint8) % 4


def _dataset():
    rng = np.random.default_rng(7)
    return Dataset("npz", {
        name: ArraySplit(name, rng.integers(0, 256, (len(labels), 8, 8), np.uint8), labels)
        for name, labels in (("train", TRAIN_LABELS), ("test", TEST_LABELS))}, ["in.npz"], [])


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "small.npz"
    mnistconv.write(_dataset(), str(path), "npz")
    return str(path)


def expected_positions(labels, size, seed, stratify=False):
    """(kept, carved) positions, computed here from the documented rule on its own."""
    n = len(labels)
    k = size if isinstance(size, int) else round(size * n)
    order = np.random.Generator(np.random.PCG64(seed)).permutation(n).tolist()
    if not stratify:
        carved = set(order[:k])
    else:
        counts = Counter(labels.tolist())
        quota = {c: k * m // n for c, m in counts.items()}
        for c in sorted(counts, key=lambda c: (-(k * counts[c] % n), c))[
                :k - sum(quota.values())]:
            quota[c] += 1
        carved = set()
        for p in order:  # the permutation walked once, each class taken to its quota
            if quota[int(labels[p])]:
                carved.add(p)
                quota[int(labels[p])] -= 1
    return [p for p in range(n) if p not in carved], sorted(carved)


def _parts(dataset):
    """{split: (images, labels, indices)}, read through batches() as a writer does."""
    out = {}
    for name, split in dataset.splits.items():
        batches = list(split.batches(17))
        out[name] = tuple(np.concatenate([getattr(b, f) for b in batches])
                          for f in ("images", "labels", "indices"))
    return out


@pytest.mark.parametrize("size, seed, stratify", [
    (0.1, 0, False), (0.1, 5, False), (37, 3, False), (0.25, 1, True), (9, 2, True)])
def test_the_carved_positions_follow_the_documented_rule(size, seed, stratify):
    ds = _dataset()
    images = ds.splits["train"]._images
    got = _parts(stream.split_off(ds, {"validation": size}, stratify=stratify, seed=seed))
    assert list(got) == ["train", "validation", "test"]  # the new split after its source
    kept, carved = expected_positions(TRAIN_LABELS, size, seed, stratify)
    for name, positions in (("train", kept), ("validation", carved)):
        got_images, got_labels, got_indices = got[name]
        assert got_indices.tolist() == positions  # the source's order, its indices
        assert np.array_equal(got_labels, TRAIN_LABELS[positions])
        assert np.array_equal(got_images, images[positions])
    assert len(carved) == (size if isinstance(size, int) else round(size * 230))
    assert got["test"][2].tolist() == list(range(70))  # other splits untouched


def test_stratified_counts_are_each_class_share():
    # 230 examples of classes 100, 70, 43, 17: 0.1 is k = 23; floors 10, 7, 4, 1 (22),
    # remainders 0, 0, 69, 161 of 230: class 3 gets the one left.
    ds = stream.split_off(_dataset(), {"validation": 0.1}, stratify=True, seed=4)
    carved = Counter(ds.splits["validation"].labels().tolist())
    assert carved == {0: 10, 1: 7, 2: 4, 3: 2}
    assert Counter(ds.splits["train"].labels().tolist()) == {0: 90, 1: 63, 2: 39, 3: 15}
    # Ties of remainders go to the smaller label: 4 of classes 7, 5, 3 (15 examples).
    labels = np.repeat(np.arange(3, dtype=np.uint8), [7, 5, 3])
    tiny = Dataset("npz", {"train": ArraySplit("train", np.zeros((15, 2, 2), np.uint8),
                                               labels)}, [], [])
    got = stream.split_off(tiny, {"v": 4}, stratify=True).splits["v"].labels()
    assert Counter(got.tolist()) == {0: 2, 1: 1, 2: 1}  # remainders 13, 5, 12 of 15


def test_the_default_source_is_train_or_the_only_split():
    only_test = stream.apply_selection(_dataset(), {"splits": ["test"],
                                                    "split_off": {"held": 7}})
    assert {n: s.header.count for n, s in only_test.splits.items()} == {"test": 63,
                                                                       "held": 7}
    named = stream.split_off(_dataset(), {"held": 0.5}, "test")
    assert {n: s.header.count for n, s in named.splits.items()} == {
        "train": 230, "test": 35, "held": 35}


def test_limit_and_shuffle_apply_to_each_part_after_carving():
    ds = stream.apply_selection(_dataset(), {"split_off": {"validation": 0.1}, "limit": 5,
                                             "splits": ["test", "train"]})
    assert list(ds.splits) == ["test", "train", "validation"]  # chosen after its source
    kept, carved = expected_positions(TRAIN_LABELS, 0.1, 0)
    assert ds.splits["train"].indices().tolist() == kept[:5]
    assert ds.splits["validation"].indices().tolist() == carved[:5]


def test_a_readers_transposition_can_still_be_undone_on_both_parts():
    ds = _dataset()
    upright = stream.TransposedSplit(ds.splits["train"])
    upright.automatic = True  # as EMNIST's reader marks it
    ds.splits["train"] = upright
    carved = stream.split_off(ds, {"validation": 0.1})
    kept, chosen = expected_positions(TRAIN_LABELS, 0.1, 0)
    stored = ds.splits["train"].base._images
    for transpose, images in ((None, stored.swapaxes(1, 2)), (False, stored)):
        got = _parts(stream.select(carved, transpose=transpose))
        assert np.array_equal(got["validation"][0], images[chosen])
        assert np.array_equal(got["train"][0], images[kept])


def test_reruns_give_the_same_bytes_and_another_seed_others(src, tmp_path):
    args = ["--split-off", "validation=0.1", "--stratify", "-q"]
    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        main_ok(["convert", src, str(tmp_path / f"{name}.npz"), *args, "--seed", seed])
    a, b, c = ((tmp_path / f"{n}.npz").read_bytes() for n in "abc")
    assert a == b and a != c


def main_ok(args):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 0


def test_numpy_reads_the_new_split(src, tmp_path):
    out = tmp_path / "o.npz"
    main_ok(["convert", src, str(out), "--split-off", "validation=37", "--seed", "9", "-q"])
    kept, carved = expected_positions(TRAIN_LABELS, 37, 9)
    images = _dataset().splits["train"]._images
    with np.load(out) as z:
        assert sorted(z.files) == ["x_test", "x_train", "x_validation", "y_test", "y_train",
                                   "y_validation"]
        assert np.array_equal(z["x_validation"], images[carved])
        assert np.array_equal(z["y_validation"], TRAIN_LABELS[carved])
        assert np.array_equal(z["y_train"], TRAIN_LABELS[kept])
        assert len(z["y_test"]) == 70


NOTE = ("split validation carved from train (--split-off validation=0.1, stratified by "
        "class, seed 2): 23 of its 230 examples, 207 left in train; chosen by numpy's "
        "default_rng(2).permutation, each part in train's order")


def test_json_notes_and_the_card_say_it(src, tmp_path, capsys):
    out = tmp_path / "o.npz"
    main_ok(["convert", src, str(out), "--split-off", "validation=0.1", "--stratify",
             "--seed", "2", "--json", "--card"])
    facts = json.loads(capsys.readouterr().out)
    assert facts["notes"][0] == NOTE  # (an identity note follows it)
    assert {n: s["count"] for n, s in facts["splits"].items()} == {
        "train": 207, "validation": 23, "test": 70}
    card = (tmp_path / "o.npz.card.html").read_text()
    assert "<code>split_off=validation=0.1</code>" in card
    assert "<code>stratify=True</code>" in card and "<code>seed=2</code>" in card
    assert f'<p class="note">Note: {NOTE.replace(chr(39), "&#x27;")}</p>' in card
    assert 'data-split="validation"' in card and 'data-count="23"' in card


def test_the_library_takes_it_as_a_select_key(src, tmp_path):
    out = tmp_path / "o.npz"
    mnistconv.convert(src, out, select={"split_off": {"validation": 0.1}, "seed": 2,
                                        "stratify": True})
    ds = mnistconv.read(str(out))
    assert {n: s.header.count for n, s in ds.splits.items()} == {
        "train": 207, "validation": 23, "test": 70}
    with pytest.raises(mnistconv.UsageError) as raised:
        mnistconv.convert(src, tmp_path / "x.npz", select={"split_of": {"v": 0.1}})
    assert str(raised.value) == (
        "select takes no key 'split_of'; it takes: splits, limit, per_class, shuffle, "
        "seed, transpose, split_off, split_off_from, stratify")
    assert raised.value.exit_code == 2 and not (tmp_path / "x.npz").exists()




EXAMPLE = "e.g. --split-off validation=0.1 (a fraction) or validation=5000 (a count)"
REFUSED = [
    (["--split-off", "test=0.1"], "{src}: --split-off test: the input already has a split "
                                  "named test; name a new split (splits present: train, "
                                  "test)"),
    (["--split-off", "v=1.0"], "--split-off v=1.0: a fraction must be more than 0 and "
                               f"less than 1; {EXAMPLE}"),
    (["--split-off", "v=0.0"], "--split-off v=0.0: a fraction must be more than 0 and "
                               f"less than 1; {EXAMPLE}"),
    (["--split-off", "v=230"], "{src}: --split-off v=230 would carve 230 of split train's "
                               "230 examples; give a count of 1 to 229, or a fraction "
                               "that leaves both parts examples"),
    (["--split-off", "v=0"], "{src}: --split-off v=0 would carve 0 of split train's "
                             "230 examples; give a count of 1 to 229, or a fraction "
                             "that leaves both parts examples"),
    (["--split-off", "v=0.001"], "{src}: --split-off v=0.001 would carve 0 of split "
                                 "train's 230 examples; give a count of 1 to 229, or a "
                                 "fraction that leaves both parts examples"),
    (["--split-off", "v=0.1", "--split-off-from", "val"],
     "{src}: --split-off-from: no split named val; name one with --split-off-from "
     "(splits present: train, test)"),
    (["--split-off", "v=0.1", "--split", "test", "--split-off-from", "train"],
     "{src}: --split-off-from: no split named train; name one with --split-off-from "
     "(splits present: test)"),
    (["--split-off", "v=ten"], f"--split-off takes NAME=SIZE, not v=ten; {EXAMPLE}"),
    (["--split-off", "../v=0.1"], "--split-off '../v' is not a safe name; use letters, "
                                  "digits, '_', '-' and '.' (not leading), at most 64 "
                                  "characters"),
    (["--stratify"], "--stratify applies only with --split-off; add --split-off "
                     "NAME=SIZE, or drop --stratify"),
    (["--split-off-from", "test"], "--split-off-from applies only with --split-off; add "
                                   "--split-off NAME=SIZE, or drop --split-off-from"),
    (["--seed", "3"], "--seed applies only with --shuffle or --split-off; add one of them, "
                      "or drop --seed"),
]


@pytest.mark.parametrize("args, message", REFUSED)
def test_refusals_are_one_line_and_exit_2(src, tmp_path, capsys, args, message):
    out = tmp_path / "o.npz"
    assert refused_in_process(["convert", src, str(out), *args], capsys) == (
        2, "Error: " + message.format(src=src))
    assert not out.exists()


def test_stratify_needs_class_labels(tmp_path, capsys):
    src = tmp_path / "multi.npz"  # MedMNIST's layout: multi-label targets
    labels = np.random.default_rng(1).integers(0, 2, (40, 3)).astype(np.uint8)
    mnistconv.write(Dataset("npz", {"train": ArraySplit(
        "train", np.zeros((40, 4, 4), np.uint8), labels)}, [], []), str(src), "npz")
    code, line = refused_in_process(["convert", str(src), str(tmp_path / "o.npz"), "--split-off",
                           "v=0.1", "--stratify"], capsys)
    assert (code, line) == (2, f"Error: {src}: --stratify needs class labels; split "
                               "train has multilabel targets; drop --stratify")
    main_ok(["convert", str(src), str(tmp_path / "o.npz"), "--split-off", "v=0.1", "-q"])
    with np.load(tmp_path / "o.npz") as z:  # unstratified it carves as for any target
        kept, carved = expected_positions(np.zeros(40), 0.1, 0)
        assert np.array_equal(z["y_v"], labels[carved])
        assert np.array_equal(z["y_train"], labels[kept])


# Every runner drives the same selection (stream.apply_selection): the same bytes.
SPLIT_OFF = ["--split-off", "validation=0.1", "--stratify", "--seed", "6"]


@pytest.mark.parametrize("runner", ["plan", "slices", "beam"])
def test_every_runner_carves_the_same_bytes(src, tmp_path, runner):
    args = ["--to", "parquet", "--shards", "2", *SPLIT_OFF]
    local, other = tmp_path / "local", tmp_path / runner
    local.mkdir()
    other.mkdir()
    cli("convert", src, "hf/", *args, cwd=local, check=0)
    if runner == "plan":
        tasks = json.loads(cli("convert", src, "hf/", *args, "--plan", cwd=other,
                               check=0).stdout)["tasks"]
        assert os.listdir(other) == []
        assert sorted({t["split"] for t in tasks}) == ["test", "train", "validation"]
        for task in tasks:
            cli("convert", src, "hf/", *args, "--num-tasks", len(tasks), "--task-index",
                task["task"], cwd=other, check=0)
    elif runner == "slices":
        for i in (1, 0):
            cli("convert", src, "hf/", *args, "--num-tasks", "2", "--task-index", i,
                cwd=other, check=0)
    else:
        cli("convert", src, "hf/", *args, "--runner", "beam", cwd=other, check=0)
    expected = tree_hashes(local)
    assert "hf/data/validation-00000-of-00002.parquet" in expected
    assert tree_hashes(other) == expected


def test_pyarrow_and_datasets_read_the_carved_parquet_split(src, tmp_path):
    cli("convert", src, "hf/", "--to", "parquet", "--shards", "2", *SPLIT_OFF,
        cwd=tmp_path, check=0)
    import pyarrow.parquet as pq
    from PIL import Image
    kept, carved = expected_positions(TRAIN_LABELS, 0.1, 6, stratify=True)
    images = _dataset().splits["train"]._images
    files = sorted(glob.glob(str(tmp_path / "hf/data/validation-*.parquet")))
    table = pq.read_table(files)
    assert table.column("label").to_pylist() == TRAIN_LABELS[carved].tolist()
    first = Image.open(io.BytesIO(table.column("image")[0]["bytes"].as_py()))
    assert np.array_equal(np.asarray(first), images[carved[0]])
    import datasets
    loaded = datasets.load_dataset("parquet", data_files={
        "validation": files}, cache_dir=str(tmp_path / "cache"))["validation"]
    assert loaded["label"] == TRAIN_LABELS[carved].tolist()
