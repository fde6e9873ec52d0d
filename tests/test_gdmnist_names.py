"""Class names through GDMNIST1: a directory of .bin files keeps them in classes.txt
beside the files (as IDX does), a browser pack in its manifest's `class_names`, a single
.bin drops them with a note; read back into every split's header and shown by
`info --json`. A manifest's class_names are checked before any file is opened, and a
dataset without names is written exactly as before."""

import hashlib
import json
import os

import numpy as np
import pytest

import mnistconv
from mnistconv.errors import FormatError
from mnistconv.codecs.classes import KMNIST, MAX_CLASS_NAME_LENGTH
from mnistconv.limits import MAX_CLASSES
from mnistconv.packs import browser as pack
from mnistconv.formats.gdmnist.manifest import dumps, open_manifest
from mnistconv.formats.gdmnist import split_name

from helpers import SAMPLE, files_in, run_main as run

FASHION = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
           "Sneaker", "Bag", "Ankle boot"]
SMALL = ["--train-per-class", "20", "--validation-size", "300", "--validation-per-class",
         "5", "--test-per-class", "8", "--seed", "7", "-q"]
SMALL_KW = dict(train_per_class=20, validation_size=300, validation_per_class=5,
                test_per_class=8, seed=7)


def names_txt(names):
    return "".join(n + "\n" for n in names)


@pytest.fixture
def named_idx(tmp_path, capsys):
    """The sample as IDX with Fashion-MNIST's names in classes.txt."""
    (tmp_path / "fashion.txt").write_text(names_txt(FASHION), encoding="utf-8")
    code, _, err = run(capsys, "convert", SAMPLE, tmp_path / "idx", "--class-names",
                       tmp_path / "fashion.txt", "-q")
    assert code == 0, err
    return tmp_path / "idx"


@pytest.fixture
def named_pack(tmp_path, named_idx, capsys):
    code, _, err = run(capsys, "pack", "browser", named_idx, tmp_path / "pack", *SMALL)
    assert code == 0, err
    return tmp_path / "pack"


def headers_names(path):
    return {name: s.header.class_names for name, s in mnistconv.read(path).splits.items()}


# --- a directory of .bin files: classes.txt --------------------------------------------

@pytest.mark.parametrize("gz", [False, True])
def test_names_survive_idx_gdmnist_directory_idx(tmp_path, capsys, named_idx, gz):
    out = tmp_path / "g"
    code, _, err = run(capsys, "convert", named_idx, out, "--to", "gdmnist",
                       *(["--gzip"] if gz else []))
    assert code == 0, err
    suffix = ".bin.gz" if gz else ".bin"
    assert files_in(out) == ["classes.txt", f"test{suffix}", f"train{suffix}"]
    assert (out / "classes.txt").read_bytes() == (named_idx / "classes.txt").read_bytes()
    # listed with the files written, last, as IDX lists it
    listed = [line.split()[0] for line in err.splitlines() if line.startswith("  /")]
    assert listed == [str(out / f"train{suffix}"), str(out / f"test{suffix}"),
                      str(out / "classes.txt")]
    assert headers_names(out) == {"train": tuple(FASHION), "test": tuple(FASHION)}
    assert str(out / "classes.txt") in mnistconv.read(out).paths
    code, _, err = run(capsys, "convert", out, tmp_path / "back", "-q")
    assert code == 0, err
    assert (tmp_path / "back" / "classes.txt").read_bytes() == \
        names_txt(FASHION).encode()
    assert headers_names(tmp_path / "back") == {"train": tuple(FASHION),
                                                "test": tuple(FASHION)}
    for name in ("train-labels-idx1-ubyte", "t10k-images-idx3-ubyte"):
        assert (tmp_path / "back" / name).read_bytes() == (named_idx / name).read_bytes()


def test_info_json_of_a_gdmnist_directory_shows_the_names(tmp_path, capsys, named_idx):
    run(capsys, "convert", named_idx, tmp_path / "g", "--to", "gdmnist", "-q")
    code, out, _ = run(capsys, "info", tmp_path / "g", "--json")
    facts = json.loads(out)
    assert code == 0
    assert facts["splits"]["train"]["class_names"] == FASHION
    assert facts["splits"]["test"]["class_names"] == FASHION
    assert str(tmp_path / "g" / "classes.txt") in [f["path"] for f in facts["files"]]


def test_a_stale_classes_txt_is_refused_then_removed_with_force(tmp_path, capsys,
                                                                named_idx):
    out = tmp_path / "g"
    run(capsys, "convert", named_idx, out, "--to", "gdmnist", "-q")
    for name in ("train.bin", "test.bin"):
        os.remove(out / name)
    # Left there, it would name the classes of what is written now.
    code, _, err = run(capsys, "convert", SAMPLE, out, "--to", "gdmnist")
    assert (code, err) == (2, f"Error: {out / 'classes.txt'}: already exists; "
                              "use --force to overwrite it\n")
    assert files_in(out) == ["classes.txt"]
    code, _, err = run(capsys, "convert", SAMPLE, out, "--to", "gdmnist", "--force", "-q")
    assert (code, err) == (0, "")
    assert files_in(out) == ["test.bin", "train.bin"]
    assert headers_names(out) == {"train": (), "test": ()}


def test_classes_txt_not_covering_the_labels_is_one_line(tmp_path, capsys):
    out = tmp_path / "g"
    run(capsys, "convert", SAMPLE, out, "--to", "gdmnist", "-q")
    (out / "classes.txt").write_text("zero\none\n")
    code, _, err = run(capsys, "convert", out, tmp_path / "x.npz")
    labels = mnistconv.read(SAMPLE).splits["train"].labels()
    first = int(np.argmax(labels >= 2))
    assert (code, err) == (1, f"Error: {out / 'classes.txt'}: names 2 classes (labels "
                              f"0..1), but label {labels[first]} of train example "
                              f"{first} has no name; give a names file that covers "
                              "every label\n")
    assert not (tmp_path / "x.npz").exists()


def test_a_single_bin_file_drops_the_names_with_a_note(tmp_path, capsys, named_idx):
    one = tmp_path / "test.bin"
    note = (f"{one} does not keep the class names (a GDMNIST1 file has no room for "
            "them); write a directory to keep them in its classes.txt")
    code, _, err = run(capsys, "convert", named_idx, one, "--split", "test")
    assert code == 0
    assert f"  note: {note}\n" in err
    code, out, _ = run(capsys, "convert", named_idx, tmp_path / "t.bin.gz", "--split",
                       "test", "--json")
    assert json.loads(out)["notes"] == [
        f"{tmp_path / 't.bin.gz'} does not keep the class names (a GDMNIST1 file has no "
        "room for them); write a directory to keep them in its classes.txt"]
    assert mnistconv.read(one).splits["test"].header.class_names == ()
    # the data itself is as without names
    code, _, _ = run(capsys, "convert", SAMPLE, tmp_path / "plain.bin", "--split", "test",
                     "-q")
    assert one.read_bytes() == (tmp_path / "plain.bin").read_bytes()


def test_a_name_classes_txt_cannot_hold_is_refused_before_any_output(tmp_path):
    ds = mnistconv.read(SAMPLE)
    names = ("zero", "one\ntwo") + tuple(str(i) for i in range(2, 10))
    for split in ds.splits.values():
        split.header = split.header.with_(class_names=names)
    with pytest.raises(mnistconv.errors.FormatError) as e:
        mnistconv.write(ds, tmp_path / "g", "gdmnist")
    assert str(e.value).endswith("class names, class 1: class name 'one\\ntwo' holds a "
                                 "line break or control character; names are stored one "
                                 "per line")
    assert files_in(tmp_path) == []


# --- a browser pack: the manifest's class_names -----------------------------------------

def test_names_survive_idx_browser_pack_and_back(tmp_path, capsys, named_pack):
    manifest = json.loads((named_pack / "manifest.json").read_text())
    assert manifest["class_names"] == FASHION
    assert files_in(named_pack) == sorted(
        [f"{s}{x}" for s in ("train", "validation", "test", "test-full")
         for x in (".bin", ".bin.gz")] + ["manifest.json", "preview.json"])
    assert open_manifest(named_pack / "manifest.json", split_name).class_names == \
        tuple(FASHION)
    assert headers_names(named_pack) == {s: tuple(FASHION) for s in
                                         ("train", "validation", "test", "test-full")}
    code, out, _ = run(capsys, "info", named_pack, "--json")
    facts = json.loads(out)
    assert code == 0
    assert {s: f["class_names"] for s, f in facts["splits"].items()} == \
        {s: FASHION for s in ("train", "validation", "test", "test-full")}
    code, out, err = run(capsys, "verify", named_pack, "-q")
    assert (code, err) == (0, "")
    code, _, err = run(capsys, "convert", named_pack, tmp_path / "back", "-q")
    assert code == 0, err
    assert (tmp_path / "back" / "classes.txt").read_text() == names_txt(FASHION)
    # the pack's .bin files are those of the same pack without names
    code, _, err = run(capsys, "pack", "browser", SAMPLE, tmp_path / "plain", *SMALL)
    for name in files_in(named_pack):
        if name.endswith((".bin", ".bin.gz", "preview.json")):
            assert (named_pack / name).read_bytes() == \
                (tmp_path / "plain" / name).read_bytes(), name


def test_non_ascii_names_go_into_the_ascii_manifest_and_back(tmp_path):
    ds = mnistconv.read(SAMPLE)
    mnistconv.write(ds, tmp_path / "idx", "idx")
    (tmp_path / "idx" / "classes.txt").write_text(names_txt(KMNIST), encoding="utf-8")
    result = pack.build_browser_pack(tmp_path / "idx", tmp_path / "pack",
                                     splits=("test",), **SMALL_KW)
    data = (tmp_path / "pack" / "manifest.json").read_bytes()
    assert '"class_names": [\n    "\\u304a",\n    "\\u304d",'.encode() in data
    assert result.manifest["class_names"] == list(KMNIST)
    assert data == dumps(result.manifest)
    assert headers_names(tmp_path / "pack") == {"test": KMNIST}


def test_pack_of_names_not_covering_the_labels_is_refused(tmp_path, monkeypatch):
    """Readers check names against labels; the pack checks again before writing (a
    dataset built in code need not have been read)."""
    ds = mnistconv.read(SAMPLE)
    for split in ds.splits.values():
        split.header = split.header.with_(class_names=tuple(FASHION[:9]))
    monkeypatch.setattr(mnistconv, "read", lambda src: ds)
    labels = ds.splits["train"].labels()
    first = int(np.argmax(labels == 9))
    with pytest.raises(FormatError) as e:
        pack.build_browser_pack(SAMPLE, tmp_path / "pack", **SMALL_KW)
    source = ds.splits["train"].header.source
    assert str(e.value) == (f"{source}: names 9 classes (labels 0..8), but label 9 of "
                            f"train example {first} has no name; give names for every class "
                            "(--class-names)")
    assert files_in(tmp_path) == []


# --- hostile manifests: one line, exit 1, nothing written -------------------------------

def _edit_manifest(folder, change):
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_bytes(dumps(manifest))
    return path


def _set(key, value):
    return lambda m: m.__setitem__(key, value)


def _drop_class_counts(m):
    m["class_names"] = FASHION[:3]
    for group in ("splits", "optional_splits"):
        for entry in m.get(group, {}).values():
            del entry["class_counts"]


LONG = "x" * (MAX_CLASS_NAME_LENGTH + 1)
HOSTILE = {
    "not-a-list": (_set("class_names", {"0": "zero"}),
                   "'class_names' is an object, expected an array of strings (the name "
                   "of label 0 first); a manifest is the JSON `mnistconv pack browser` "
                   "writes"),
    "a-string": (_set("class_names", "T-shirt/top"),
                 "'class_names' is a string, expected an array of strings (the name of "
                 "label 0 first); a manifest is the JSON `mnistconv pack browser` writes"),
    "a-number-name": (_set("class_names", FASHION[:4] + [4] + FASHION[5:]),
                      "'class_names' item 4 is a number, expected a string; a manifest "
                      "is the JSON `mnistconv pack browser` writes"),
    "a-null-name": (_set("class_names", [None] + FASHION[1:]),
                    "'class_names' item 0 is null, expected a string; a manifest is the "
                    "JSON `mnistconv pack browser` writes"),
    "too-long": (_set("class_names", FASHION[:9] + [LONG]),
                 f"'class_names', class 9: class name '{'x' * 75}...' is longer than "
                 f"mnistconv's limit of {MAX_CLASS_NAME_LENGTH} characters; shorten it where "
                 "the class names are written"),
    "too-many": (_set("class_names", ["a"] * (MAX_CLASSES + 1)),
                 f"'class_names': {MAX_CLASSES + 1:,} names, more than mnistconv's limit "
                 f"of {MAX_CLASSES:,} classes; give one name per class where the class "
                 "names are written"),
    "too-few": (_set("class_names", FASHION[:9]),
                "'class_names' names 9 classes, but split 'test' counts 8 examples of "
                "label 9; give class_names one name for every label"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_class_names_are_one_line_exit_1_nothing_written(tmp_path, capsys, case):
    pack.build_browser_pack(SAMPLE, tmp_path / "pack", **SMALL_KW)
    change, message = HOSTILE[case]
    manifest = _edit_manifest(tmp_path / "pack", change)
    for command in (["convert", tmp_path / "pack", tmp_path / "out.npz"],
                    ["info", tmp_path / "pack", "--json"],
                    ["verify", tmp_path / "pack"]):
        code, out, err = run(capsys, *command)
        # --json reports the failure on stdout too, as the error object.
        shown = json.dumps({"error": f"{manifest}: {message}", "exit": 1,
                            "file": str(manifest)}, indent=2) + "\n" \
            if "--json" in command else ""
        assert (code, out, err) == (1, shown, f"Error: {manifest}: {message}\n"), command
    assert files_in(tmp_path) == ["pack"]


def test_names_checked_against_the_labels_when_class_counts_are_absent(tmp_path, capsys):
    pack.build_browser_pack(SAMPLE, tmp_path / "pack", splits=("test",), **SMALL_KW)
    manifest = _edit_manifest(tmp_path / "pack", _drop_class_counts)
    labels = mnistconv.read(tmp_path / "pack" / "test.bin").splits["test"].labels()
    first = int(np.argmax(labels >= 3))
    code, out, err = run(capsys, "convert", tmp_path / "pack", tmp_path / "out.npz")
    assert (code, out) == (1, "")
    assert err == (f"Error: {manifest}: names 3 classes (labels 0..2), but label "
                   f"{labels[first]} of test example {first} has no name; give a names "
                   "file that covers every label\n")
    assert files_in(tmp_path) == ["pack"]


def test_null_or_empty_class_names_mean_none(tmp_path):
    pack.build_browser_pack(SAMPLE, tmp_path / "pack", splits=("test",), **SMALL_KW)
    for value in (None, []):
        _edit_manifest(tmp_path / "pack", _set("class_names", value))
        assert headers_names(tmp_path / "pack") == {"test": ()}


def test_a_pack_ignores_a_classes_txt_beside_its_manifest(tmp_path, named_pack):
    """A pack's names are its manifest's; a classes.txt there is not read."""
    (named_pack / "classes.txt").write_text("a\n")
    assert headers_names(named_pack)["test"] == tuple(FASHION)


# --- without names: the same bytes as before ----------------------------------------------

# SHA-256 of what mnistconv wrote from the sample before class names reached GDMNIST1
# (the manifest with its producer version written as VERSION, so a release does not
# change it).
BEFORE = {
    "pack/manifest.json": "32bac2b4f99791c159d3cf559ef77adf362f7799e984627e4d703f900ce36754",
    "pack/preview.json": "611bd3cd24ef250cf7ad589bbf474ce805755e91f2cb4560cda5d03f88afa5ee",
    "pack/test-full.bin": "c5dc6dba73053eea50f9e79ca25d3aa953a4245e45218a6965a2b89eb467fdf2",
    "pack/test-full.bin.gz":
        "37428e75795131b0a4a3ec2412dea6e443e1a2205e4d3bf88663fe175af71333",
    "pack/test.bin": "8d65614f5c79c0fe5af92fd4e74707fcddc804939209d25a59dc68490436a3a1",
    "pack/test.bin.gz": "4c0473339e9992e76f54c80fbf08819da25efd42588bf84aaab96da0f0b3f9b3",
    "pack/train.bin": "b8f20b459f24b66fde5c62cff972226731417b99690abc2fefe0b8adbb60b07b",
    "pack/train.bin.gz": "2b59825178a993dc0daf7735c5c9e3a354b0067751ac744994977dc7c99d8068",
    "pack/validation.bin":
        "d249fadb5c00b1ec3fe42008eb78f240f0a3e2068e57cb9ff0c92a95b97c2f17",
    "pack/validation.bin.gz":
        "af1fb27f0bd530f96db49d1bc609f54f3057336b37ec9c530e62eeffa9cd5ac8",
    "dir/test.bin": "c5dc6dba73053eea50f9e79ca25d3aa953a4245e45218a6965a2b89eb467fdf2",
    "dir/train.bin": "63917380fff62fde53f7149b0ffc313904854dd7c65020c47c1de029dcb3bd02",
    "dirgz/test.bin.gz": "37428e75795131b0a4a3ec2412dea6e443e1a2205e4d3bf88663fe175af71333",
    "dirgz/train.bin.gz":
        "c39191b1685c2a4a3758dc1e239aaa9210ae41f5b2bd1cece2176883d20fc3cf",
    "one.bin": "c5dc6dba73053eea50f9e79ca25d3aa953a4245e45218a6965a2b89eb467fdf2",
}


def test_without_names_the_outputs_are_the_same_bytes_as_before(tmp_path, capsys):
    assert run(capsys, "pack", "browser", SAMPLE, tmp_path / "pack", *SMALL)[0] == 0
    assert run(capsys, "convert", SAMPLE, tmp_path / "dir", "--to", "gdmnist", "-q")[0] == 0
    assert run(capsys, "convert", SAMPLE, tmp_path / "dirgz", "--to", "gdmnist", "--gzip",
               "-q")[0] == 0
    code, _, err = run(capsys, "convert", SAMPLE, tmp_path / "one.bin", "--split", "test")
    assert code == 0 and "class names" not in err
    found = {}
    for root, _, names in os.walk(tmp_path):
        for name in names:
            path = os.path.join(root, name)
            data = open(path, "rb").read()
            if name == "manifest.json":
                data = data.replace(f'"version": "{mnistconv.__version__}"'.encode(),
                                    b'"version": "VERSION"')
            found[os.path.relpath(path, tmp_path)] = hashlib.sha256(data).hexdigest()
    assert found == BEFORE
    assert "class_names" not in json.loads((tmp_path / "pack" / "manifest.json").read_text())
    assert headers_names(tmp_path / "pack")["test"] == ()
