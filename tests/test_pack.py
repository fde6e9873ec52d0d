"""Browser packs: the published browser-v1 pack rebuilt byte for byte (no torch), the
manifest in its schema, verify catching one changed byte in any listed file, options,
determinism, and the localhost server."""

import base64
import gzip
import hashlib
import json
import re
import shutil
import subprocess
import sys
import urllib.request

import numpy as np
import pytest

import mnistconv
from mnistconv.packs import browser as pack
from helpers import REPO, SAMPLE, files_in, run

PUBLISHED_MANIFEST = REPO.parent / "shared" / "specs" / "browser-v1-manifest.json"

# The published browser-v1 pack (../shared/specs/browser-v1-manifest.json), restated so
# the test stands without ../shared: (bytes, sha256, gzip_bytes, gzip_sha256).
PUBLISHED = {
    "train": (7890032, "13df23663e03e6c82b1abd10f96b9d7fec1c123abe21dff07bf4bfe6aa6a73e4",
              1647559, "7aa3f28416ea48f8e27a5abd8b08194b40aae4198f4e579aac0986f9e4ac6be6"),
    "validation": (1578032,
                   "ad4219367538e85183f22794f637be7975a98b231da4754b845bc7f0e4990aa8",
                   328942,
                   "b3160bc7c0b9781f530373d2d3589580a3a6808b103a6db54dd553cc0227cbcc"),
    "test": (1578032, "7e6f5d26ef7ba2d654166378dab39f9ba1a92fd928c59b1fb0ba0bcbecdee386",
             320365, "9c6c4d5d44d5c893d7aab31f8039094047136f41e9ed9b87c53fe64885671675"),
    "test-full": (7890032,
                  "b1666e5ed9f4a197d176630fe8791b487392c30fdeb0863277c2d76897f0ed85",
                  1622145,
                  "0e04414e49b81961ce7994768709c5b3adba9fb72f4b7b79023cd8438791a8c3"),
}
TRAIN_POOL_SHA256 = "1083febc455815d0a5d7e9a387b9744d8b456a344b7088c7a9ca1235dade5fdf"
VALIDATION_POOL_SHA256 = "90bec5b643d05f06c9863616b685340f4bdb8a5647dbd51ecf30523f138d9b98"


def fisher_yates_reference(n, seed):
    """torch's CPU randperm written out from its description, with an MT19937 of our own
    (init_genrand + genrand_int32), to check the numpy shortcut against."""
    mt = [0] * 624
    mt[0] = seed
    for i in range(1, 624):
        mt[i] = (1812433253 * (mt[i - 1] ^ (mt[i - 1] >> 30)) + i) & 0xFFFFFFFF
    state = {"i": 624}

    def next32():
        if state["i"] >= 624:
            for k in range(624):
                y = (mt[k] & 0x80000000) | (mt[(k + 1) % 624] & 0x7FFFFFFF)
                mt[k] = mt[(k + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
            state["i"] = 0
        y = mt[state["i"]]
        state["i"] += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        return y ^ (y >> 18)

    perm = list(range(n))
    for i in range(n - 1):
        j = i + next32() % (n - i)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def test_randperm_rebuild_matches_published_pool_hashes():
    perm = pack.torch_randperm(60000, 20260909)
    assert perm.dtype == np.int64
    assert sorted(perm.tolist()) == list(range(60000))
    assert hashlib.sha256(perm[:50000].astype("<i8").tobytes()).hexdigest() == \
        TRAIN_POOL_SHA256
    assert hashlib.sha256(perm[50000:].astype("<i8").tobytes()).hexdigest() == \
        VALIDATION_POOL_SHA256


@pytest.mark.parametrize("n,seed", [(2, 0), (10, 1), (1000, 20260909), (5000, 2 ** 32 - 1)])
def test_randperm_rebuild_equals_plain_mt19937_fisher_yates(n, seed):
    assert pack.torch_randperm(n, seed).tolist() == fisher_yates_reference(n, seed)


def test_randperm_refuses_what_it_cannot_rebuild():
    with pytest.raises(mnistconv.UsageError, match="seed -1 is outside"):
        pack.torch_randperm(10, -1)
    with pytest.raises(mnistconv.UsageError, match=r"cannot rebuild torch\.randperm"):
        pack.torch_randperm(1 << 24, 0)


# --- the published pack ----------------------------------------------------------------

@pytest.fixture(scope="module")
def official_pack(official_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("pack") / "out"
    r = run("pack", "browser", official_dir, out)  # no options: the published pack
    assert r.returncode == 0, r.stderr
    return out


def test_default_pack_reproduces_published_hashes(official_pack):
    assert files_in(official_pack) == sorted(
        [f"{s}.bin" for s in PUBLISHED] + [f"{s}.bin.gz" for s in PUBLISHED]
        + ["manifest.json", "preview.json"])
    for split, (size, sha, gz_size, gz_sha) in PUBLISHED.items():
        data = (official_pack / f"{split}.bin").read_bytes()
        gz = (official_pack / f"{split}.bin.gz").read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (size, sha), split
        assert (len(gz), hashlib.sha256(gz).hexdigest()) == (gz_size, gz_sha), split
        assert gzip.decompress(gz) == data
    manifest = json.loads((official_pack / "manifest.json").read_text())
    provenance = manifest["split_provenance"]
    assert provenance["train_pool_indices_sha256_int64_le"] == TRAIN_POOL_SHA256
    assert provenance["validation_pool_indices_sha256_int64_le"] == VALIDATION_POOL_SHA256
    assert provenance["separation_verified"] is True
    assert manifest["dataset"] == "MNIST"


def test_manifest_has_the_published_schema_and_values(official_pack):
    if not PUBLISHED_MANIFEST.is_file():
        pytest.skip("../shared/specs/browser-v1-manifest.json not found")
    published = json.loads(PUBLISHED_MANIFEST.read_text())
    ours = json.loads((official_pack / "manifest.json").read_text())
    assert set(published) <= set(ours)
    for group in ("splits", "optional_splits"):
        assert ours[group] == published[group]  # every field of every split, exactly
    for key in ("asset_version", "attribution", "dataset", "default_total_bytes",
                "default_total_gzip_bytes", "evaluation_note", "format", "input",
                "schema_version"):
        assert ours[key] == published[key], key
    for key in ("balanced_prefixes", "parent_split", "split_seed",
                "train_pool_indices_sha256_int64_le",
                "validation_pool_indices_sha256_int64_le", "separation_verified"):
        assert ours["split_provenance"][key] == published["split_provenance"][key], key
    assert set(ours["preview"]) == set(published["preview"])
    assert ours["preview"]["count"] == published["preview"]["count"] == 20


def test_manifest_differs_from_published_only_where_it_describes_its_producer(
        official_pack):
    """What is byte-exact and what is not: the eight .bin/.bin.gz files are (above);
    manifest.json is not, and these are the only keys where it differs: the published
    one names its own build (script, torch and numpy versions, archive paths of the
    experiment it came from, a cache directory, md5 and URL of the .gz it downloaded)
    and another preview.json, whose layout was never published (only its size and
    hash). preview.json therefore cannot be rebuilt byte for byte either."""
    if not PUBLISHED_MANIFEST.is_file():
        pytest.skip("../shared/specs/browser-v1-manifest.json not found")
    published = json.loads(PUBLISHED_MANIFEST.read_text())
    ours = json.loads((official_pack / "manifest.json").read_text())
    differ = {k for k in set(published) | set(ours) if published.get(k) != ours.get(k)}
    assert differ == {"description", "preview", "producer", "split_provenance"}
    a, b = published["split_provenance"], ours["split_provenance"]
    assert {k for k in set(a) | set(b) if a.get(k) != b.get(k)} <= {
        "archive_data_path", "archive_data_sha256", "archive_record_path",
        "archive_record_sha256", "cached_source_directory", "files",
        "test_archive_equal_to_verified_idx", "test_selection_policy"}
    assert {k for k in published["preview"]
            if published["preview"][k] != ours["preview"][k]} == {"bytes", "sha256"}


def test_published_manifest_verifies_our_files(official_pack, tmp_path):
    """The published manifest itself, beside the files we built: every split file passes;
    only preview.json (whose layout is ours) differs."""
    if not PUBLISHED_MANIFEST.is_file():
        pytest.skip("../shared/specs/browser-v1-manifest.json not found")
    folder = tmp_path / "pub"
    shutil.copytree(official_pack, folder)
    shutil.copy(PUBLISHED_MANIFEST, folder / "manifest.json")
    report = pack.verify(folder / "manifest.json")
    assert {(p.file, p.field) for p in report.problems} == {
        (str(folder / "preview.json"), "bytes"), (str(folder / "preview.json"), "sha256")}
    assert len(report.checked) == 8


def test_verify_passes_then_names_the_file_and_field_for_one_changed_byte(official_pack,
                                                                          tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(official_pack, folder)
    manifest = folder / "manifest.json"
    r = run("verify", manifest)
    assert r.returncode == 0, r.stderr
    assert r.stderr.decode().endswith(f"{manifest}: all 9 files verified\n")
    listed = sorted(p.name for p in folder.iterdir() if p.name != "manifest.json")
    assert len(listed) == 9
    for name in listed:
        path = folder / name
        original = path.read_bytes()
        changed = bytearray(original)
        changed[len(changed) // 2] ^= 0x01
        path.write_bytes(changed)
        try:
            report = pack.verify(manifest)
            assert not report.ok, name
            fields = {(p.file, p.field) for p in report.problems}
            sha_field = "gzip_sha256" if name.endswith(".gz") else "sha256"
            assert (str(path), sha_field) in fields, (name, fields)
            assert all(f == str(path) for f, _ in fields), fields  # only that file
            if name in ("train.bin", "test.bin.gz"):  # and through the command line
                r = run("verify", manifest)
                err = r.stderr.decode()
                assert r.returncode == 1
                assert f"Error: {path}: {sha_field}: expected " in err
                assert err.endswith(f"Error: {manifest}: {len(report.problems)} check(s) "
                                    "failed\n")
                r = run("verify", manifest, "--json")
                assert r.returncode == 1
                assert json.loads(r.stdout)["problems"] == [
                    {"file": p.file, "field": p.field, "expected": p.expected,
                     "found": p.found} for p in report.problems]
        finally:
            path.write_bytes(original)
    assert run("verify", folder).returncode == 0  # a directory means its manifest.json


def test_verify_reports_header_class_and_missing_file_problems(official_pack, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(official_pack, folder)
    # a label changed from 0 to 1 at the start of test.bin's labels
    data = bytearray((folder / "test.bin").read_bytes())
    label_offset = 32 + 2000 * 784
    data[label_offset] = 1
    (folder / "test.bin").write_bytes(data)
    (folder / "validation.bin.gz").unlink()
    report = pack.verify(folder / "manifest.json")
    fields = {(p.file, p.field) for p in report.problems}
    assert fields == {
        (str(folder / "test.bin"), "sha256"),
        (str(folder / "test.bin"), "class_counts"),
        (str(folder / "validation.bin.gz"), "file"),
    }
    problem = next(p for p in report.problems if p.field == "class_counts")
    assert problem.expected == [200] * 10
    assert problem.found == [199, 201] + [200] * 8


def test_verify_of_a_broken_manifest_is_one_line(tmp_path):
    (tmp_path / "manifest.json").write_text("{not json")
    r = run("verify", tmp_path / "manifest.json")
    assert r.returncode == 1
    err = r.stderr.decode()
    assert err.startswith(f"Error: {tmp_path / 'manifest.json'}: not valid JSON (")
    assert err.count("\n") == 1


def test_preview_layout(official_pack, official_arrays):
    preview = json.loads((official_pack / "preview.json").read_text())
    assert preview["format"] == "mnistconv-preview-1"
    assert (preview["split"], preview["file"], preview["count"]) == ("test", "test.bin", 20)
    assert [e["label"] for e in preview["examples"]] == list(range(10)) * 2
    for e in preview["examples"]:
        pixels = np.frombuffer(base64.b64decode(e["pixels"]), np.uint8).reshape(28, 28)
        np.testing.assert_array_equal(pixels, official_arrays["x_test"][e["original_index"]])
        assert official_arrays["y_test"][e["original_index"]] == e["label"]


def test_pack_reads_back_as_a_dataset(official_pack, official_arrays):
    ds = mnistconv.read(official_pack)
    assert ds.format == "gdmnist"
    assert list(ds.splits) == ["test", "train", "validation", "test-full"]  # manifest order
    train = ds.splits["train"]
    labels, indices = train.labels(), train.indices()
    assert labels[:20].tolist() == list(range(10)) * 2
    np.testing.assert_array_equal(official_arrays["y_train"][indices], labels)
    images = np.concatenate([b.images for b in train.batches()])
    np.testing.assert_array_equal(images, official_arrays["x_train"][indices])
    validation = ds.splits["validation"].indices()
    assert not np.intersect1d(indices, validation).size
    np.testing.assert_array_equal(ds.splits["test-full"].indices(), np.arange(10000))


# --- options, determinism, errors on the bundled sample ----------------------------------

SMALL = ["--train-per-class", "20", "--validation-size", "300", "--validation-per-class",
         "5", "--test-per-class", "8", "--seed", "7", "-q"]


def test_small_pack_with_options_is_deterministic(tmp_path):
    assert run("pack", "browser", SAMPLE, tmp_path / "a", *SMALL).returncode == 0
    r = run("pack", "browser", SAMPLE, tmp_path / "b", *SMALL)
    assert r.returncode == 0, r.stderr
    for name in files_in(tmp_path / "a"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert [manifest["splits"][s]["count"] for s in ("train", "validation", "test")] == \
        [200, 50, 80]
    assert manifest["splits"]["train"]["class_counts"] == [20] * 10
    assert manifest["optional_splits"]["test_full"]["count"] == 200
    # a non-official source is not credited as MNIST
    assert manifest["dataset"].startswith("unknown") and "attribution" not in manifest
    assert manifest["splits"]["train"]["source_collection"] == "training-1000"
    # selection follows the seeded permutation of the sample's 1000 training examples
    sample = mnistconv.read(SAMPLE)
    labels = sample.splits["train"].labels()
    perm = pack.torch_randperm(1000, 7)
    pool = perm[:700]
    want = np.stack([pool[labels[pool] == c][:20] for c in range(10)], axis=1).reshape(-1)
    got = mnistconv.read(tmp_path / "a" / "train.bin").splits["train"].indices()
    np.testing.assert_array_equal(got, want)
    assert run("verify", tmp_path / "a" / "manifest.json", "-q").returncode == 0


def test_splits_option_and_force(tmp_path):
    r = run("pack", "browser", SAMPLE, tmp_path / "p", *SMALL, "--splits", "train,test")
    assert r.returncode == 0, r.stderr
    assert files_in(tmp_path / "p") == ["manifest.json", "preview.json", "test.bin",
                                        "test.bin.gz", "train.bin", "train.bin.gz"]
    manifest = json.loads((tmp_path / "p" / "manifest.json").read_text())
    assert "optional_splits" not in manifest and set(manifest["splits"]) == {"train",
                                                                            "test"}
    r = run("pack", "browser", SAMPLE, tmp_path / "p", *SMALL)
    assert r.returncode == 2
    assert "already exists; use --force to overwrite it" in r.stderr.decode()
    assert run("pack", "browser", SAMPLE, tmp_path / "p", *SMALL, "--force").returncode == 0
    assert "validation.bin" in files_in(tmp_path / "p")


@pytest.mark.parametrize("args,message", [
    (["--train-per-class", "500", "--validation-size", "300"],
     "mnist-sample: train: digit 0 has only 66 examples in its pool, fewer than "
     "--train-per-class 500"),
    (["--validation-size", "1000"], "--validation-size 1000 must be between 1 and 999"),
    (["--splits", "train,nope"], "unknown split nope"),
    (["--preview-split", "validation", "--preview-count", "100", "--validation-per-class",
      "5", "--validation-size", "300", "--train-per-class", "5", "--test-per-class", "5"],
     "--preview-count 100 is more than split 'validation' holds"),
])
def test_bad_pack_options_exit_2_without_output(tmp_path, args, message):
    r = run("pack", "browser", SAMPLE, tmp_path / "out", *args)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_source_without_test_split(tmp_path):
    shutil.copy(SAMPLE / "train-images-idx3-ubyte.gz", tmp_path)
    shutil.copy(SAMPLE / "train-labels-idx1-ubyte.gz", tmp_path)
    r = run("pack", "browser", tmp_path, tmp_path / "out")
    assert r.returncode == 2
    assert r.stderr.decode() == (f"Error: {tmp_path}: has no test split; give the official "
                                 "MNIST directory (train and test files)\n")


# --- serve -------------------------------------------------------------------------------

def test_serve_sends_gzip_bytes_untouched(tmp_path):
    r = run("pack", "browser", SAMPLE, tmp_path / "p", *SMALL)
    assert r.returncode == 0, r.stderr
    env = dict(__import__("os").environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "mnistconv", "serve", tmp_path / "p",
                             "--port", "0", "-q"], stderr=subprocess.PIPE, env=env)
    try:
        line = proc.stderr.readline().decode()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line
        base = match.group(0)
        with urllib.request.urlopen(base + "train.bin.gz") as response:
            body = response.read()
            assert response.headers["Content-Type"] == "application/gzip"
            assert response.headers.get("Content-Encoding") is None
        assert body == (tmp_path / "p" / "train.bin.gz").read_bytes()
        with urllib.request.urlopen(base + "manifest.json") as response:
            assert response.headers["Content-Type"] == "application/json"
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_failure_mid_build_leaves_nothing(tmp_path, monkeypatch):
    from mnistconv.formats import gdmnist

    def failing_gzip(src, dst):
        raise OSError(28, "No space left on device", dst)
    monkeypatch.setattr(gdmnist, "gzip_file", failing_gzip)
    with pytest.raises(OSError):
        pack.build_browser_pack(SAMPLE, tmp_path / "out", train_per_class=5,
                                validation_size=300, validation_per_class=5,
                                test_per_class=5)
    assert files_in(tmp_path) == []  # neither the pack nor its staging directory


def test_the_manifest_model_knows_no_format_and_a_plain_read_no_pack(tmp_path):
    """The layers: formats/gdmnist/manifest.py reads and checks a manifest without the
    format's reader (formats.gdmnist reads pack directories through it, packs.browser
    builds them on gdmnist), and reading a plain GDMNIST1 file does not load it; a pack
    directory is read through it."""
    pack.build_browser_pack(SAMPLE, tmp_path / "p", train_per_class=5, validation_size=300,
                            validation_per_class=5, test_per_class=5, splits=("test",))
    code = ("import sys, mnistconv\n"
            "from mnistconv.formats.gdmnist.manifest import open_manifest\n"
            "print('mnistconv.formats.gdmnist.format' in sys.modules)\n"
            "del sys.modules['mnistconv.formats.gdmnist.manifest']\n"
            "for path in sys.argv[1:]:\n"
            "    ds = mnistconv.read(path)\n"
            "    print(list(ds.splits), 'mnistconv.formats.gdmnist.manifest' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "p" / "test.bin"),
                        str(tmp_path / "p")], capture_output=True,
                       env=dict(__import__("os").environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == ["False", "['test'] False", "['test'] True"]
