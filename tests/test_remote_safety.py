"""Remote inputs are names, not paths, and never hang or leak (mnistconv.io.remote): a
hostile HTTP listing (tests/fuzz/hostile_listings.HostileSite on 127.0.0.1) or S3 key
never becomes a local path outside mnistconv's spool, a server that trickles is given
up after --timeout, and a password in a URL is never printed."""

import json
import os

import pytest

from mnistconv.limits import printable

from helpers import make_idx_dir, run, small_digits, stderr_of
from fuzz.hostile_listings import EVIL, REFUSED, SKIPPED, HostileSite

# fsspec reads every URL; aiohttp only http(s):// (the `site` fixture's tests), so the
# tests of names, redaction and options run without it.
pytest.importorskip("fsspec")

HINT = ("mnistconv copies only the files a listing names inside the folder; check the "
        "server")
STALLED = "check the server and the network, or allow more time with --timeout"


@pytest.fixture(scope="module")
def site():
    pytest.importorskip("aiohttp")
    s = HostileSite()
    yield s
    s.close()


@pytest.fixture
def data(tmp_path):
    """An IDX folder (train and test) under tmp_path/www/data, and its npz made locally."""
    images, labels = small_digits(40, seed=11)
    folder = make_idx_dir(tmp_path / "www" / "data", images[:30], labels[:30], "train")
    make_idx_dir(folder, images[30:], labels[30:], "test")
    assert run("convert", folder, tmp_path / "local.npz", "-q").returncode == 0
    return folder


def everything_under(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def spool_env(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir(exist_ok=True)
    return {"TMPDIR": str(spool)}


@pytest.mark.parametrize("link", REFUSED)
def test_hostile_listing_entry_is_refused_and_nothing_written(link, site, data, tmp_path):
    """The issue's case, `../../../../tmp/x` in a listing, and its variants: refused
    in one line naming the entry, before any byte is copied; nothing is written
    anywhere under tmp_path but the local npz made before, no spool is left."""
    url = site.serve(data, {"": [link]}, top=tmp_path)
    before = everything_under(tmp_path)
    r = run("convert", url, tmp_path / "out.npz", env=spool_env(tmp_path))
    err = stderr_of(r)
    assert r.returncode == 1, err
    assert err.startswith(f"Error: {url}: its listing names '") and \
        err.endswith(f"', which is not a file name inside it; {HINT}\n") and \
        err.count("\n") == 1, err
    after = everything_under(tmp_path)
    assert after == sorted(before + ["spool"] * ("spool" not in before))
    assert os.listdir(tmp_path / "spool") == []


def test_the_issue_listing_names_its_entry_exactly(site, data, tmp_path):
    """`convert http://.../data/ out.npz` with `../../../../<tmp>/x` in the listing
    wrote the server's bytes to <tmp>/x, exit 0."""
    target = tmp_path / "x"
    link = "../../../../../../../../.." + str(target)
    url = site.serve(data, {"": [link]})
    r = run("convert", url, tmp_path / "out.npz", env=spool_env(tmp_path))
    assert (r.returncode, stderr_of(r)) == \
        (1, f"Error: {url}: its listing names {printable(link)}, which is not a file name "
            f"inside "
            f"it; {HINT}\n")
    assert not target.exists() and not (tmp_path / "out.npz").exists()


def test_refused_in_a_sub_folder_too(site, data, tmp_path):
    (data / "sub").mkdir()
    (data / "sub" / "notes.txt").write_bytes(b"a file in a sub-folder")
    url = site.serve(data, {"sub": ["%2e%2e/%2e%2e/%2e%2e/evil"]})
    r = run("info", url, env=spool_env(tmp_path))
    assert (r.returncode, stderr_of(r)) == \
        (1, f"Error: {url}: its listing names '../../../evil', which is not a file name "
            f"inside it; {HINT}\n")
    assert not (tmp_path / "evil").exists() and os.listdir(tmp_path / "spool") == []


def test_sort_and_parent_links_name_no_file(site, data, tmp_path):
    """Apache's sort links, a parent link and a link elsewhere: not files, skipped; the
    folder reads as the local one (the same npz bytes)."""
    url = site.serve(data, {"": SKIPPED})
    r = run("convert", url, tmp_path / "remote.npz", "-q", env=spool_env(tmp_path))
    assert r.returncode == 0, stderr_of(r)
    assert (tmp_path / "remote.npz").read_bytes() == (tmp_path / "local.npz").read_bytes()
    assert os.listdir(tmp_path / "spool") == []


def test_a_folder_that_holds_itself_is_not_walked_for_ever(site, data, tmp_path):
    url = site.serve(data, nest=True)
    r = run("info", url, env=spool_env(tmp_path))
    assert (r.returncode, stderr_of(r)) == \
        (2, f"Error: {url}: holds more than 10,000 folders or folders more than 16 deep; "
            "name a smaller directory or a glob\n")
    assert os.listdir(tmp_path / "spool") == []


@pytest.mark.parametrize("what", ["file", "listing"])
def test_a_trickling_server_is_given_up_after_the_timeout(what, site, data, tmp_path):
    """A byte every 0.2 s, for ever as far as the client can tell: the file's bytes
    (its details come at once) or the folder's listing page."""
    url = site.serve(data, trickle=True)
    if what == "file":
        url += "train-images-idx3-ubyte"
    r = run("info", url, "--timeout", "0.5", env=spool_env(tmp_path))
    assert (r.returncode, stderr_of(r)) == \
        (1, f"Error: {url}: no progress for 0.5 s; {STALLED}\n")
    assert os.listdir(tmp_path / "spool") == []


def test_library_timeout_and_its_hint(site, data):
    import mnistconv
    from mnistconv.io import remote
    url = site.serve(data, trickle=True) + "train-labels-idx1-ubyte"
    with remote.timeout(0.5), pytest.raises(mnistconv.MnistconvError) as e:
        mnistconv.read(url)
    assert str(e.value) == (f"{url}: no progress for 0.5 s; check the server and the "
                            "network, or allow more time (mnistconv.io.remote.timeout)")


def test_timeout_option_help_and_range(data):
    for command in ("convert", "idx-to-npz", "info", "show", "preview", "compare",
                    "card"):
        r = run(command, "--help")
        help_text = " ".join(r.stdout.decode().split())
        assert "--timeout S Give up on a remote input or output (https://, s3://, ...) " \
            "after S seconds without progress" in help_text and \
            "[default: 60]" in help_text, command
    r = run("info", data, "--timeout", "0")
    assert r.returncode == 2 and \
        "Invalid value for '--timeout': 0.0 is not in the range x>0." in stderr_of(r)


def test_a_password_in_a_url_is_never_printed(site, data, tmp_path):
    base = site.serve(data)
    secret = base.replace("http://", "http://ann:s3cret@")
    shown = base.replace("http://", "http://ann:***@")
    env = spool_env(tmp_path)
    # an error
    r = run("info", secret + "missing.npz", env=env)
    assert (r.returncode, stderr_of(r)) == \
        (1, f"Error: {shown}missing.npz: not a valid npz (zip) file (File is not a zip "
            "file); check that numpy wrote it whole, or name its format with --from\n")
    # --json and the report
    r = run("info", secret, "--json", env=env)
    assert r.returncode == 0, stderr_of(r)
    facts = json.loads(r.stdout)
    assert facts["path"] == shown
    assert all(f["path"].startswith(shown) for f in facts["files"]), facts["files"]
    r = run("info", secret, env=env)
    assert r.returncode == 0 and r.stdout.decode().startswith(f"{shown}: idx, 2 split(s)")
    assert "s3cret" not in r.stdout.decode() + stderr_of(r)
    # a stalled read, and an output that exists (the site answers every path)
    trickle = site.serve(data, trickle=True)
    r = run("info", trickle.replace("http://", "http://ann:s3cret@") + "t10k-labels-idx1-"
            "ubyte", "--timeout", "0.5", env=env)
    assert (r.returncode, stderr_of(r)) == (
        1, f"Error: {trickle.replace('http://', 'http://ann:***@')}t10k-labels-idx1-ubyte: "
           f"no progress for 0.5 s; {STALLED}\n")
    r = run("convert", data, secret + "up.npz", "--json", env=env)
    assert (r.returncode, stderr_of(r)) == \
        (2, f"Error: {shown}up.npz: already exists; use --force to overwrite it\n")
    assert "s3cret" not in stderr_of(r) + r.stdout.decode()
    assert os.listdir(tmp_path / "spool") == []


def test_redact():
    from mnistconv.errors import redact
    assert redact("https://u:p@ss@host:8/a, http://a@b/c, ftp://u:@h/ s3://K:S@b/k") == \
        "https://u:***@host:8/a, http://a@b/c, ftp://u:***@h/ s3://K:***@b/k"


def test_server_bytes_for_an_unknown_path_are_evil(site):
    """The test server answers any path it does not hold with EVIL bytes, as a hostile
    server would: what a client that followed a link out would have written."""
    import urllib.request
    with urllib.request.urlopen(site.base + "/../../etc/x") as response:
        assert response.read() == EVIL


# --- S3: object keys are names too (moto's S3 server on 127.0.0.1) ----------------------

def test_s3_key_with_dot_dot_is_refused(tmp_path, s3_server, bucket):
    from test_remote import s3_env
    fs, name = bucket
    images, labels = small_digits(20, seed=2)
    folder = make_idx_dir(tmp_path / "src", images, labels, "train")
    for p in folder.iterdir():
        fs.pipe(f"{name}/data/{p.name}", p.read_bytes())
    fs.pipe(f"{name}/data/../../evil", EVIL)
    env = dict(s3_env(s3_server), **spool_env(tmp_path))
    r = run("convert", f"s3://{name}/data/", tmp_path / "out.npz", env=env)
    assert (r.returncode, stderr_of(r)) == \
        (1, f"Error: s3://{name}/data/: its listing names '..', which is not a file "
            f"name inside it; {HINT}\n")
    assert sorted(os.listdir(tmp_path)) == ["spool", "src"]
    assert os.listdir(tmp_path / "spool") == []


def test_progress_lines_redact_passwords():
    from mnistconv.cli.common import RichProgress
    progress = RichProgress()
    try:
        progress.start("https://ann:s3cret@host/m.npz -> npz", 10)
        assert [t.description for t in progress.bars.tasks] == \
            ["https://ann:***@host/m.npz -> npz"]
    finally:
        progress.close()


@pytest.mark.parametrize("name, safe", [
    ("train-images-idx3-ubyte.gz", True), ("T-shirt top", True), (".hidden", True),
    ("..a", True), ("\u65e5\u672c.png", True), ("x" * 255, True), ("x" * 256, False),
    ("\u00e9" * 128, False), ("", False), (".", False), ("..", False), ("a/b", False),
    ("a\\b", False), ("C:x", False), ("ev\x00il", False), ("ev\nil", False),
    ("\x7f", False), ("\ud800", False), (None, False)])
def test_safe_file_name(name, safe):
    from mnistconv.limits import is_safe_file_name
    assert is_safe_file_name(name) is safe


@pytest.mark.parametrize("url", ["memory://x/..", "memory://x/../", "memory://x/."])
def test_an_output_url_must_end_in_a_name(url, data, tmp_path):
    """Its last name also names the local staging file: '..' would be the staging
    folder's parent."""
    r = run("convert", data, url, env=spool_env(tmp_path))
    assert (r.returncode, stderr_of(r)) == \
        (2, f"Error: {url}: does not end in a file or folder name; name the output, e.g. "
            "s3://bucket/mnist.npz\n")
    assert os.listdir(tmp_path / "spool") == []
