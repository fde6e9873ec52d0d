"""croissant.json beside Parquet and ImageFolder outputs: `mlcroissant validate` passes,
and mlcroissant's own loader yields every record of every split, labels in order and
pixels exact; the family's metadata where the input is a published dataset."""

import json

import numpy as np
import pytest

import mnistconv
from mnistconv import ArraySplit, Dataset
from helpers import run, small_digits, stderr_of



@pytest.fixture
def mlc():
    """mlcroissant, for the tests that validate or load with it (only they skip)."""
    return pytest.importorskip("mlcroissant")


NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def named_dataset():
    train = ArraySplit("train", *small_digits(40, seed=3))
    test = ArraySplit("test", *small_digits(15, seed=5))
    for split in (train, test):
        split.header = split.header.with_(class_names=NAMES)
    return Dataset("t", {"train": train, "test": test})


def gray(image):
    return np.asarray(image.convert("L"))


def validate(path):
    """`mlcroissant validate` as users run it (its console script): exit 0 and its
    closing "Done."; warnings (no version, no datePublished) are allowed."""
    import subprocess
    import sys
    from pathlib import Path
    r = subprocess.run([str(Path(sys.executable).parent / "mlcroissant"), "validate",
                        "--jsonld", str(path)], capture_output=True)
    log = r.stderr.decode()
    assert r.returncode == 0, log
    assert "Done." in log and "error" not in log.lower(), log


@pytest.mark.parametrize("shards", [1, 2])
def test_parquet_croissant_validates_and_loads_every_record(tmp_path, shards, mlc):
    ds = named_dataset()
    out = tmp_path / "hf"
    files = mnistconv.write(ds, str(out), "parquet", shards=shards)
    assert files[-1].path == str(out / "croissant.json")
    doc = json.loads((out / "croissant.json").read_text())
    parquet = [f for f in files if f.path.endswith(".parquet")]
    objects = {d["contentUrl"]: d for d in doc["distribution"]
               if d["@type"] == "cr:FileObject"}
    assert {f"data/{p.path.rsplit('/', 1)[1]}" for p in parquet} == set(objects)
    for f in parquet:
        entry = objects[f"data/{f.path.rsplit('/', 1)[1]}"]
        assert (entry["sha256"], entry["contentSize"]) == (f.sha256, f"{f.bytes} B")
    validate(out / "croissant.json")
    loaded = mlc.Dataset(jsonld=str(out / "croissant.json"))
    for name, split in ds.splits.items():
        records = list(loaded.records(name))
        assert [r[f"{name}/label"] for r in records] == split.labels().tolist()
        assert np.array_equal(np.stack([gray(r[f"{name}/image"]) for r in records]),
                              split._images)
    classes = list(loaded.records("classes"))
    assert [(r["classes/label"], r["classes/name"]) for r in classes] == \
        list(enumerate(NAMES))


def test_imagefolder_croissant_loads_every_record(tmp_path, mlc):
    ds = named_dataset()
    out = tmp_path / "tree"
    mnistconv.write(ds, str(out), "imagefolder")
    validate(out / "croissant.json")
    loaded = mlc.Dataset(jsonld=str(out / "croissant.json"))
    for name, split in ds.splits.items():
        records = list(loaded.records(name))
        assert len(records) == split.header.count
        # mlcroissant walks the files in path order (class folder, then index): the
        # index field puts them back in the split's order.
        records.sort(key=lambda r: r[f"{name}/index"])
        assert [r[f"{name}/index"] for r in records] == list(range(split.header.count))
        assert [r[f"{name}/label"] for r in records] == split.labels().tolist()
        assert np.array_equal(np.stack([gray(r[f"{name}/image"]) for r in records]),
                              split._images)


def validate_log(path):
    """`mlcroissant validate`'s exit code and log (its console script); the test skips
    only where mlcroissant is not installed."""
    import subprocess
    import sys
    from pathlib import Path
    pytest.importorskip("mlcroissant")
    r = subprocess.run([str(Path(sys.executable).parent / "mlcroissant"), "validate",
                        "--jsonld", str(path)], capture_output=True)
    return r.returncode, r.stderr.decode()


def test_the_family_metadata_of_a_published_dataset(tmp_path, official_dir):
    # The official files' content matches the published SHA-256: MNIST's facts, its
    # license as LeCun's page states it; given a version, mlcroissant warns of nothing.
    out = tmp_path / "hf"
    r = run("convert", official_dir, out, "--to", "parquet", "--limit", "20", "-q",
            "--version", "1.0.0")
    assert r.returncode == 0, stderr_of(r)
    doc = json.loads((out / "croissant.json").read_text())
    assert doc["name"] == "mnist" and doc["url"] == "http://yann.lecun.com/exdb/mnist/"
    assert doc["citeAs"].startswith("@article{lecun1998gradient,")
    assert doc["license"] == "https://creativecommons.org/licenses/by-sa/3.0/"
    assert (doc["version"], doc["datePublished"]) == ("1.0.0", "1998")
    assert doc["conformsTo"] == "http://mlcommons.org/croissant/1.0"
    assert [rs["@id"] for rs in doc["recordSet"]] == ["train", "test"]
    code, log = validate_log(out / "croissant.json")
    assert code == 0 and log.strip().endswith("Done."), log
    assert "warning" not in log.lower() and "error" not in log.lower(), log


def test_given_license_and_version_validate_without_warnings(tmp_path):
    # Anything else: what the user says is what croissant.json states.
    images, labels = small_digits(20)
    np.savez(tmp_path / "s.npz", x_train=images, y_train=labels)
    out = tmp_path / "hf"
    r = run("convert", tmp_path / "s.npz", out, "--to", "parquet", "-q",
            "--name", "my-digits", "--license", "CC-BY-4.0", "--version", "2.1.0",
            "--citation", "@misc{digits, title={My digits}, year={2024}}",
            "--date-published", "2024-05-01", "--homepage", "https://example.org/digits",
            "--description", "Digits I drew.")
    assert r.returncode == 0, stderr_of(r)
    doc = json.loads((out / "croissant.json").read_text())
    assert {k: doc[k] for k in ("name", "description", "license", "version", "citeAs",
                                "datePublished", "url")} == {
        "name": "my-digits", "description": "Digits I drew.", "license": "CC-BY-4.0",
        "version": "2.1.0", "citeAs": "@misc{digits, title={My digits}, year={2024}}",
        "datePublished": "2024-05-01", "url": "https://example.org/digits"}
    code, log = validate_log(out / "croissant.json")
    assert code == 0 and log.strip().endswith("Done."), log
    assert "warning" not in log.lower(), log
    # Nothing given: a neutral name, nothing borrowed, and mlcroissant says what is missing.
    r = run("convert", tmp_path / "s.npz", tmp_path / "plain", "--to", "parquet")
    assert r.returncode == 0, stderr_of(r)
    doc = json.loads((tmp_path / "plain" / "croissant.json").read_text())
    assert doc["name"] == "plain"
    assert not {"license", "citeAs", "url", "version", "datePublished"} & set(doc)
    assert "no published checksum matches" in stderr_of(r)
    assert "--license" in stderr_of(r)


@pytest.mark.parametrize("to", ["parquet", "imagefolder"])
def test_license_and_version_then_what_only_the_user_knows(tmp_path, to):
    # Random images proved by no checksum, given --license and --version: mlcroissant
    # still recommends citeAs and datePublished, which nothing but the user can state
    # (no citation or date is made up), so the command says once which flags add them;
    # given those too, `mlcroissant validate` prints no warning and no error.
    images, labels = small_digits(20)
    np.savez(tmp_path / "s.npz", x_train=images, y_train=labels)
    given = ["--license", "cc-by-4.0", "--version", "1.0.0"]
    r = run("convert", tmp_path / "s.npz", tmp_path / "two", "--to", to, *given)
    assert r.returncode == 0, stderr_of(r)
    note = (f"note: {tmp_path / 'two' / 'croissant.json'}: states no citeAs or "
            "datePublished, which mlcroissant validate recommends (it warns without "
            "them); add --citation and --date-published if the dataset has them (the "
            "same keywords of mnistconv.write)")
    assert r.stdout.decode().count("note: ") + stderr_of(r).count("note: ") == 1
    assert note in r.stdout.decode() + stderr_of(r)
    code, log = validate_log(tmp_path / "two" / "croissant.json")
    assert code == 0 and log.strip().endswith("Done."), log
    assert [line.split("] ", 1)[-1] for line in log.splitlines() if "Property" in line] == [
        'Property "http://mlcommons.org/croissant/citeAs" is recommended, but does not '
        'exist.',
        'Property "https://schema.org/datePublished" is recommended, but does not exist.']
    r = run("convert", tmp_path / "s.npz", tmp_path / "four", "--to", to, *given,
            "--citation", "@misc{digits, title={My digits}, year={2024}}",
            "--date-published", "2024-05-01")
    assert r.returncode == 0, stderr_of(r)
    assert "note: " not in r.stdout.decode() + stderr_of(r)
    code, log = validate_log(tmp_path / "four" / "croissant.json")
    assert code == 0 and log.strip().endswith("Done."), log
    assert "warning" not in log.lower() and "error" not in log.lower(), log


def test_class_names_prove_no_family(tmp_path):
    # Ten Fashion-MNIST names label anything: no name, license or citation from them.
    from mnistconv.codecs.classes import FASHION_MNIST
    split = ArraySplit("train", *small_digits(12))
    split.header = split.header.with_(class_names=FASHION_MNIST)
    ds = Dataset("t", {"train": split})
    mnistconv.write(ds, str(tmp_path / "f"), "imagefolder")
    doc = json.loads((tmp_path / "f" / "croissant.json").read_text())
    assert doc["name"] == "f"
    assert not {"license", "citeAs", "url"} & set(doc)
    assert "Fashion" not in json.dumps(doc) and "Xiao" not in json.dumps(doc)
    assert doc["recordSet"][0]["data"][0] == {"classes/label": 0,
                                              "classes/name": "T-shirt/top"}
    assert any("no published checksum matches" in n for n in ds.notes)


def test_an_existing_croissant_json_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "tree"
    out.mkdir()
    (out / "croissant.json").write_text("{}")
    images, labels = small_digits(10)
    np.savez(tmp_path / "s.npz", x_train=images, y_train=labels)
    r = run("convert", tmp_path / "s.npz", out, "--to", "imagefolder")
    assert r.returncode == 2
    assert stderr_of(r).strip().splitlines()[-1].startswith(
        f"Error: {out / 'croissant.json'}: ")
    assert sorted(p.name for p in out.iterdir()) == ["croissant.json"]
    (out / "croissant.json").unlink()
    (out / "croissant.json").mkdir()
    r = run("convert", tmp_path / "s.npz", out, "--to", "imagefolder", "--force")
    assert r.returncode == 2 and "is a directory" in stderr_of(r)
    assert sorted(p.name for p in out.iterdir()) == ["croissant.json"]


def test_a_single_parquet_file_gets_none(tmp_path):
    split = ArraySplit("train", *small_digits(10))
    files = mnistconv.write(Dataset("t", {"train": split}), str(tmp_path / "one.parquet"),
                            "parquet")
    assert [f.path for f in files] == [str(tmp_path / "one.parquet")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.parquet"]


def test_quiet_conversions_still_record_every_sha256(tmp_path):
    images, labels = small_digits(10)
    np.savez(tmp_path / "s.npz", x_train=images, y_train=labels)
    r = run("convert", tmp_path / "s.npz", tmp_path / "hf", "--to", "parquet", "-q")
    assert r.returncode == 0, stderr_of(r)
    doc = json.loads((tmp_path / "hf" / "croissant.json").read_text())
    import hashlib
    for entry in doc["distribution"]:
        data = (tmp_path / "hf" / entry["contentUrl"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()


def test_a_planned_run_writes_the_same_croissant_json_as_a_local_one(tmp_path):
    # A plan's tasks and its finish write the same tree as write(): the metadata included.
    from mnistconv.runners import plan
    images, labels = small_digits(40)
    np.savez(tmp_path / "s.npz", x_train=images, y_train=labels)
    ds = mnistconv.read(str(tmp_path / "s.npz"))
    # (one output name in two folders: the neutral name comes from the output's name)
    mnistconv.write(ds, str(tmp_path / "local" / "hf"), "parquet", shards=2)
    spec = plan.InputSpec(str(tmp_path / "s.npz"), "npz", {}, {})
    plan.run(spec, str(tmp_path / "planned" / "hf"), "parquet", {"shards": 2})
    local, planned = tmp_path / "local" / "hf", tmp_path / "planned" / "hf"
    # (the plan's progress record stays inside the folder it planned)
    assert sorted(p.name for p in planned.iterdir()) == \
        sorted([".mnistconv-plan.json"] + [p.name for p in local.iterdir()])
    assert (planned / "croissant.json").read_bytes() == \
        (local / "croissant.json").read_bytes()


def test_tfds_croissant_builder_prepares_each_split(tmp_path):
    """TFDS' CroissantBuilder, offline: each split's RecordSet is a config of one
    split, `default`, whose examples (shuffled by TFDS' writer) are the split's."""
    tfds = pytest.importorskip("tensorflow_datasets")
    ds = named_dataset()
    out = tmp_path / "hf"
    mnistconv.write(ds, str(out), "parquet")
    for name, split in ds.splits.items():
        builder = tfds.dataset_builders.CroissantBuilder(
            jsonld=str(out / "croissant.json"), record_set_ids=[name],
            file_format="array_record", data_dir=str(tmp_path / "tfds"))
        builder.download_and_prepare()
        assert builder.info.splits["default"].num_examples == split.header.count
        source = builder.as_data_source(split="default")
        got = sorted((int(source[i]["label"]), source[i]["image"][..., 0].tobytes())
                     for i in range(len(source)))
        assert got == sorted((int(y), im.tobytes())
                             for y, im in zip(split.labels(), split._images))
