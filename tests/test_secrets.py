"""A URL's password never reaches an output or a message (issue 35): the card's title
and "Converted from", --json, and a store's own message quoting it (botocore's
`Invalid bucket name "KEY:SECRET@bucket"`). Real clients: an HTTP server on 127.0.0.1
(aiohttp through fsspec), s3fs/botocore pointed at 127.0.0.1."""

import json

import pytest

from helpers import make_idx_dir, run, small_digits, stderr_of
from test_remote import http_root  # noqa: F401  (the fixture)

SECRET = "hunter22-secret"


def test_card_of_a_url_with_a_password_shows_no_password(tmp_path, http_root):  # noqa: F811
    pytest.importorskip("aiohttp")
    root, url = http_root
    make_idx_dir(tmp_path / "src", *small_digits(30, seed=4), "test")
    assert run("convert", tmp_path / "src", root / "m.npz", "-q").returncode == 0
    secret_url = url.replace("http://", f"http://ann:{SECRET}@") + "/m.npz"
    shown = url.replace("http://", "http://ann:***@") + "/m.npz"
    r = run("card", secret_url, "-o", tmp_path / "card.html")
    assert r.returncode == 0, stderr_of(r)
    page = (tmp_path / "card.html").read_text()
    # The title is the dataset's neutral name (m); the URL shows in the notes, redacted.
    assert "<title>m</title>" in page and f"{shown}: " in page and SECRET not in page
    r = run("convert", secret_url, tmp_path / "out.npz", "--card", "--json")
    assert r.returncode == 0, stderr_of(r)
    page = (tmp_path / "out.npz.card.html").read_text()
    assert f"<code>{shown}</code> (npz)" in page and SECRET not in page
    assert SECRET not in r.stdout.decode() + stderr_of(r)
    assert json.loads(r.stdout)["input"]["path"] == shown


@pytest.mark.parametrize("command", [["info"], ["convert", "IDX"], ["convert", "IDX", "--json"]])
def test_a_store_message_quoting_the_bucket_shows_no_secret(tmp_path, command):
    """s3fs takes `KEY:SECRET@bucket` for the bucket's name and botocore's message quotes
    it whole: the one line shows the URL and the message with *** for the secret."""
    pytest.importorskip("s3fs")
    make_idx_dir(tmp_path / "src", *small_digits(10, seed=4), "test")
    env = {"FSSPEC_S3_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    url = f"s3://KEY:{SECRET}@bucket/m.npz"
    args = [tmp_path / "src" if a == "IDX" else a for a in command]
    args = args[:1] + ([url] if args[0] == "info" else args[1:2] + [url]) + args[2:]
    r = run(*args, env=env)
    out = r.stdout.decode() + stderr_of(r)
    assert r.returncode == 1, out
    assert SECRET not in out
    assert 'Invalid bucket name "KEY:***@bucket"' in out
    assert "s3://KEY:***@bucket/m.npz: " in out


def test_redact_covers_decoded_and_short_passwords():
    from mnistconv.errors import redact
    assert redact('s3://k:a%2Fb%2Bcd@bkt/x: bad name "k:a/b+cd@bkt" (a/b+cd)') == \
        's3://k:***@bkt/x: bad name "k:***@bkt" (***)'
    assert redact('https://u:pw@h/x: "u:pw@h" keeps pw elsewhere') == \
        'https://u:***@h/x: "u:***@h" keeps pw elsewhere'
