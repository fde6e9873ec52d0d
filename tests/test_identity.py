"""What the metadata says a dataset is (issue 38, house rule 15): what the user gave
(--name, --description, --license, --citation, --homepage, --version, --date-published),
else what the bytes prove (every input file one of a family's published files or its
known sample), else a neutral name and nothing borrowed, with a note. Checked across
every metadata file a conversion writes: TFDS' dataset_info.json, Parquet's README.md,
croissant.json and the HTML card."""

import gzip
import hashlib
import html
import json
import re
import shutil

import numpy as np
import pytest

import mnistconv
from helpers import SAMPLE, make_idx_dir, run, stderr_of
from mnistconv.codecs.classes import FASHION_MNIST
from mnistconv.family.sources import FAMILIES

MNIST_LICENSE = "https://creativecommons.org/licenses/by-sa/3.0/"
# What would betray a borrowed identity, in any spelling a metadata file uses.
BORROWED = ("lecun", "LeCun", "Gradient-based", "by-sa/3.0", "cc-by-sa-3.0", "yann",
            "Xiao", "Zalando", "opensource.org/licenses/MIT", "fashion", "Fashion")
NAMED_MNIST = re.compile(r"(?i)mnist(?!conv)")  # (mnistconv names itself as the writer)


def _metadata_files(out):
    """Every metadata file beside or under `out` (its data files left out)."""
    names = ("dataset_info.json", "features.json", "README.md", "croissant.json")
    found = [p for p in out.rglob("*") if p.name in names]
    card = out.parent / (out.name + ".card.html")
    return found + ([card] if card.exists() else [])


def _random_idx(folder):
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, (30, 28, 28), dtype=np.uint8)
    labels = (np.arange(30) % 10).astype(np.uint8)
    make_idx_dir(folder, images, labels, "train", gz=True)
    return folder


@pytest.mark.parametrize("names", [[str(d) for d in range(10)], list(FASHION_MNIST)])
@pytest.mark.parametrize("to", ["tfds", "parquet", "imagefolder"])
def test_random_images_with_a_familys_class_names_borrow_nothing(tmp_path, to, names):
    src = _random_idx(tmp_path / "in")
    args = ["--class-names", tmp_path / "in" / "classes.txt"]
    (tmp_path / "in" / "classes.txt").write_text("\n".join(names) + "\n")
    out = tmp_path / "digits"
    r = run("convert", src, out, "--to", to, "--card", *args)
    assert r.returncode == 0, stderr_of(r)
    err = stderr_of(r)
    assert "the metadata names the dataset 'digits' and states no license or citation" \
        in err and "--license" in err
    files = _metadata_files(out)
    assert {p.name for p in files} >= {"digits.card.html"} | (
        {"dataset_info.json", "features.json"} if to == "tfds" else {"croissant.json"}
        | ({"README.md"} if to == "parquet" else set()))
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".html":  # its images are data: URIs, not text
            text = html.unescape(text.split('<section class="split"')[0])
        for word in BORROWED:
            assert word not in text, (path, word)
        assert not NAMED_MNIST.search(text), (path, NAMED_MNIST.search(text))
    if to == "tfds":
        info = json.loads((out / "digits/1.0.0/dataset_info.json").read_text())
        assert info["name"] == "digits" and "citation" not in info
        assert "redistributionInfo" not in info and "location" not in info
    else:
        doc = json.loads((out / "croissant.json").read_text())
        assert doc["name"] == "digits"
        assert not {"license", "citeAs", "url", "datePublished"} & set(doc)


def test_mnist_labels_beside_random_images_prove_nothing(tmp_path, official_dir):
    # One published file (the real test labels) is not the dataset: every file must be.
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(official_dir / "t10k-labels-idx1-ubyte.gz", folder)
    rng = np.random.default_rng(1)
    header = np.array([2051, 10000, 28, 28], ">u4").tobytes()
    with gzip.open(folder / "t10k-images-idx3-ubyte.gz", "wb") as f:
        f.write(header + rng.integers(0, 256, 10000 * 784, dtype=np.uint8).tobytes())
    from mnistconv.family.provenance import family_of
    assert family_of(mnistconv.read(folder)) is None
    assert family_of(mnistconv.read(official_dir)).name == "mnist"


def test_the_real_mnist_files_get_mnists_facts_everywhere(tmp_path, official_dir):
    # The official files (recompressed: their content's SHA-256 is the published one).
    for to in ("tfds", "parquet"):
        out = tmp_path / to
        r = run("convert", official_dir, out, "--to", to, "--limit", "20", "--card", "-q")
        assert r.returncode == 0, stderr_of(r)
        assert "no published checksum" not in stderr_of(r)
        card = (tmp_path / f"{to}.card.html").read_text()
        assert f'<code id="license">{MNIST_LICENSE}</code>' in card
        assert "<title>MNIST handwritten digits (LeCun, Cortes, Burges)</title>" in card
        assert "lecun1998gradient" in card
        if to == "tfds":
            info = json.loads((out / "mnist/1.0.0/dataset_info.json").read_text())
            assert info["redistributionInfo"] == {"license": MNIST_LICENSE}
            assert info["name"] == "mnist" and "LeCun" in info["citation"]
        else:
            readme = (out / "README.md").read_text()
            assert '\npretty_name: "mnist"\nlicense: "cc-by-sa-3.0"\n' in readme
            assert "@article{lecun1998gradient," in readme
            doc = json.loads((out / "croissant.json").read_text())
            assert doc["license"] == MNIST_LICENSE


def test_the_bundled_sample_is_a_known_slice_of_mnist(official_dir):
    # Its recorded digests are the files' own, and its records the official files' first.
    mnist = FAMILIES["mnist"]
    for f in mnist.samples:
        data = (SAMPLE / f.name).read_bytes()
        content = gzip.decompress(data)
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (f.sha256, f.size)
        assert (hashlib.sha256(content).hexdigest(), len(content)) == \
            (f.content_sha256, f.content_size)
        official = gzip.decompress((official_dir / f.name).read_bytes())
        header = 16 if "images" in f.name else 8
        assert content[:4] == official[:4] and content[8:header] == official[8:header]
        assert content[header:] == official[header:len(content)]
    from mnistconv.family.provenance import family_of
    assert family_of(mnistconv.read(SAMPLE)) is mnist


def test_given_identity_is_stated_in_every_metadata_file(tmp_path):
    src = _random_idx(tmp_path / "in")
    given = {"--name": "my_digits", "--description": "Digits drawn for a test.",
             "--license": "CC-BY-4.0", "--citation": "@misc{mine, title={Mine}}",
             "--homepage": "https://example.org/digits", "--version": "2.0.1"}
    flat = [x for kv in given.items() for x in kv]
    out = tmp_path / "t"
    r = run("convert", src, out, "--to", "tfds", "--card", "-q", *flat)
    assert r.returncode == 0, stderr_of(r)
    info = json.loads((out / "my_digits/2.0.1/dataset_info.json").read_text())
    assert (info["name"], info["version"], info["description"], info["citation"],
            info["redistributionInfo"], info["location"]) == (
        "my_digits", "2.0.1", "Digits drawn for a test.", "@misc{mine, title={Mine}}",
        {"license": "CC-BY-4.0"}, {"urls": ["https://example.org/digits"]})
    card = (tmp_path / "t.card.html").read_text()
    for value in ("CC-BY-4.0", "2.0.1", "https://example.org/digits", "my_digits",
                  "Digits drawn for a test."):
        assert html.escape(value) in card
    out = tmp_path / "p"
    r = run("convert", src, out, "--to", "parquet", "-q", *flat, "--license",
            "https://example.org/licence.txt")
    assert r.returncode == 0, stderr_of(r)
    readme = (out / "README.md").read_text()
    assert readme.startswith('---\npretty_name: "my_digits"\nlicense: "other"\n'
                             'license_link: "https://example.org/licence.txt"\n')
    assert "\n# my_digits\n\nDigits drawn for a test.\n" in readme
    assert "```bibtex\n@misc{mine, title={Mine}}\n```" in readme
    # The library takes the same keywords.
    ds = mnistconv.read(src)
    mnistconv.write(ds, tmp_path / "lib", "imagefolder", name="x", license="MIT")
    doc = json.loads((tmp_path / "lib" / "croissant.json").read_text())
    assert (doc["name"], doc["license"]) == ("x", "MIT")
    # A license was given: only what croissant.json still lacks, and the flags for it.
    assert ds.notes == [f"{tmp_path / 'lib' / 'croissant.json'}: states no version, citeAs "
                        "or datePublished, which mlcroissant validate recommends (it warns "
                        "without them); add --version, --citation and --date-published if "
                        "the dataset has them (the same keywords of mnistconv.write)"]


@pytest.mark.parametrize("args, message", [
    (["--license", "a\x07b"], "Error: --license 'a\\x07b' holds control characters; "
                              "give printable text"),
    (["--date-published", "May 2024"], "Error: --date-published 'May 2024' is not a date; "
                                       "use YYYY, YYYY-MM or YYYY-MM-DD, e.g. 2024-05-01"),
    (["--homepage", "example.org"], "Error: --homepage 'example.org' is not an http(s) "
                                    "URL; give the dataset's page, e.g. "
                                    "https://example.org/my-digits"),
    (["--version", "v1"], "Error: --version 'v1' is not a version; use MAJOR.MINOR.PATCH "
                          "without leading zeros, e.g. 1.0.0"),
    (["--name", " "], "Error: --name must be non-empty text, not ' '; give --name some "
                      "text, or leave it out"),
])
def test_bad_identity_values_exit_2_before_anything_is_written(tmp_path, args, message):
    r = run("convert", SAMPLE, tmp_path / "hf", "--to", "parquet", *args)
    assert r.returncode == 2
    assert stderr_of(r) == message + "\n"
    assert not (tmp_path / "hf").exists()


def test_a_format_without_metadata_takes_identity_only_with_a_card(tmp_path):
    r = run("convert", SAMPLE, tmp_path / "s.npz", "--license", "MIT")
    assert r.returncode == 2
    assert stderr_of(r) == ("Error: --license does not apply to reading idx or writing "
                            "npz; drop it, or add --card (whose page states it)\n")
    r = run("idx-to-npz", SAMPLE, tmp_path / "s.npz", "--license", "MIT", "--card",
            "--name", "sample", "-q")
    assert r.returncode == 0, stderr_of(r)
    card = (tmp_path / "s.npz.card.html").read_text()
    assert '<code id="license">MIT</code>' in card and "<title>sample</title>" in card
    with pytest.raises(mnistconv.UsageError, match="write npz takes no option 'license'"):
        mnistconv.write(mnistconv.read(SAMPLE), tmp_path / "t.npz", license="MIT")


def test_card_command_takes_the_identity_and_titles_by_name(tmp_path):
    src = _random_idx(tmp_path / "in")
    r = run("card", src, "-o", tmp_path / "c.html", "-q")
    assert r.returncode == 0, stderr_of(r)
    page = (tmp_path / "c.html").read_text()
    assert "<title>in</title>" in page and 'id="license"' not in page
    r = run("card", src, "-o", tmp_path / "d.html", "-q", "--name", "Mine", "--citation",
            "Me, 2024.")
    assert r.returncode == 0, stderr_of(r)
    page = (tmp_path / "d.html").read_text()
    assert "<title>Mine</title>" in page
    assert '<pre id="citation">Me, 2024.</pre>' in page
