"""Five realistic bugs a planted-bug sample found the suite let through, each pinned at the
boundary where it hides, in-process so `make check` sees them:

- the HTML card without escaping: only a name that forms markup shows it, and only in
  the raw HTML (a browser's DOM dump re-escapes text either way);
- TFRecord index offsets after the writer's first chunk (1,000 records): every other
  index test writes one chunk;
- a staged file opened through a link at its path (no O_NOFOLLOW);
- `--json` on a signal reporting the signal number while the process exits 128 + it;
- a one-hot width taken from the labels present instead of the split's class count
  (12 declared classes whose labels reach only 0..9).
"""

import html.parser
import json
import os
import signal

import numpy as np
import pytest

import mnistconv
from helpers import make_idx_dir, run_main, small_digits
from tfrecord_helpers import framed_sizes
from mnistconv import ArraySplit, Dataset

# --- the card: names that form markup ----------------------------------------------

# Each would hide what follows it if written raw: a comment opener swallows the rest of
# the page (class 9's samples, the Files section and its SHA-256s), an attribute quote
# and a closing tag end the cell early.
HOSTILE_NAMES = ['<img src=x alt="nine"><!--', '"><script>alert(1)</script>',
                 "</td></tr></table><!--", "a & b", "it's", "<b>bold</b>", "six", "seven",
                 "eight", "nine"]


class _Walk(html.parser.HTMLParser):
    """What a browser's parser makes of the raw page: the tags it opens (with their
    attributes) and the text of every <td class="name">."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.names, self.comments = [], [], []
        self._in_name = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        self._in_name = tag == "td" and attrs.get("class") == "name"
        if self._in_name:
            self.names.append("")

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_name = False

    def handle_data(self, data):
        if self._in_name:
            self.names[-1] += data

    def handle_comment(self, data):
        self.comments.append(data)


def test_card_escapes_class_names_that_form_markup(tmp_path, capsys):
    images, labels = small_digits(60, seed=2)
    data = tmp_path / "data"
    make_idx_dir(data, images, labels, "train")
    (data / "classes.txt").write_text("\n".join(HOSTILE_NAMES) + "\n")
    out = tmp_path / "card.html"
    code, _, err = run_main(capsys, "card", data, "-o", out, "-q")
    assert code == 0, err
    raw = out.read_text()
    page = _Walk()
    page.feed(raw)
    page.close()
    # Nothing from the data became markup: no comment, no script, no stray img.
    assert page.comments == []
    assert not [t for t, _ in page.tags if t in ("script", "b")]
    assert all(a.get("class") in ("sample", "mean") for t, a in page.tags if t == "img")
    # Every name is text, exactly as given, in its own cell, in label order.
    present = sorted(set(labels.tolist()))
    assert page.names == [HOSTILE_NAMES[k] for k in present]
    # What the comment opener would have hidden is still there: class 9's samples and
    # the files with their SHA-256.
    nine = [a for t, a in page.tags if t == "tr" and a.get("data-label") == "9"]
    assert nine, "class 9's row is missing"
    assert ("section", {"id": "files"}) in page.tags
    import hashlib
    digest = hashlib.sha256((data / "train-images-idx3-ubyte").read_bytes()).hexdigest()
    assert digest in raw
    # The escapes are html.escape's, attribute quotes included.
    assert "&lt;img src=x alt=&quot;nine&quot;&gt;&lt;!--" in raw


# --- TFRecord index files past the first writer chunk -------------------------------

def test_index_files_hold_past_the_first_chunk_in_every_split(tmp_path):
    pytest.importorskip("google.protobuf")
    from mnistconv.formats.tfrecord.writer import CHUNK
    n_train, n_test = 2 * CHUNK + 345, CHUNK + 1  # three chunks; just over one
    splits = {}
    for name, n, seed in (("train", n_train, 1), ("test", n_test, 2)):
        images, labels = small_digits(n, seed=seed)
        splits[name] = ArraySplit(name, images, labels)
    out = tmp_path / "m.tfrecord"
    files = mnistconv.write(Dataset("t", splits), str(out), "tfrecord",
                            image_format="png", shards=2, index_files=True)
    data = [f.path for f in files if not f.path.endswith(".idx")]
    assert len(data) == 4  # two splits, two shards each
    total = 0
    for path in data:
        lines = open(path + ".idx").read().splitlines()
        assert [tuple(map(int, line.split(" "))) for line in lines] == framed_sizes(path)
        total += len(lines)
    assert total == n_train + n_test
    # mnistconv's own check of an index against its file accepts every one.
    from mnistconv.formats.tfrecord.index_files import read_index
    for path in data:
        offsets, lengths = read_index(path + ".idx", path)
        assert len(offsets) == len(framed_sizes(path))


# --- staged files never written through a link --------------------------------------

@pytest.mark.parametrize("opener", ["create_staged", "open_staged"])
def test_a_link_at_a_staged_path_is_not_written_through(tmp_path, opener):
    from mnistconv.io import staging
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    link = tmp_path / "staged"
    link.symlink_to(victim)
    with pytest.raises(OSError):
        with getattr(staging, opener)(str(link)) as f:
            f.write(b"overwritten")
    assert victim.read_bytes() == b"keep me"
    assert link.is_symlink()


def test_idx_write_array_refuses_a_link_at_its_path(tmp_path):
    from mnistconv.formats.idx.format import write_array
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    (tmp_path / "out-idx1-ubyte").symlink_to(victim)
    with pytest.raises(OSError):
        write_array(str(tmp_path / "out-idx1-ubyte"), np.arange(5, dtype=np.uint8))
    assert victim.read_bytes() == b"keep me"


# --- --json on a signal --------------------------------------------------------------

@pytest.mark.parametrize("signum,code,message", [(signal.SIGTERM, 143, "terminated"),
                                                 (signal.SIGINT, 130, "interrupted")])
def test_json_on_a_signal_reports_the_exit_code_the_process_has(tmp_path, capsys,
                                                                monkeypatch, signum, code,
                                                                message):
    """The signal arrives while the writer works; the CLI's own handlers take it."""
    images, labels = small_digits(40)
    src = tmp_path / "in.npz"
    np.savez(src, x_train=images, y_train=labels)
    from mnistconv.io.staging import StagedOutput
    real = StagedOutput.file

    def signalled(self, target):
        # The writer is placing its first output: the signal lands mid-write.
        signal.raise_signal(signum)
        return real(self, target)
    monkeypatch.setattr(StagedOutput, "file", signalled)
    out = tmp_path / "out.npz"
    exit_code, stdout, _ = run_main(capsys, "convert", src, out, "--json", "-q")
    assert exit_code == code
    report = json.loads(stdout)
    assert report == {"error": message, "exit": code}
    assert not out.exists() and os.listdir(tmp_path) == ["in.npz"]


# --- one-hot width is the split's class count ---------------------------------------

def _label_widths(path):
    from mnistconv.codecs.example import example_class
    Example = example_class()
    widths = set()
    blob = open(path, "rb").read()
    pos = 0
    while pos < len(blob):
        length = int.from_bytes(blob[pos:pos + 8], "little")
        ex = Example()
        ex.ParseFromString(blob[pos + 12:pos + 12 + length])
        widths.add(len(ex.features.feature["label"].int64_list.value))
        pos += 16 + length
    return widths


def test_one_hot_width_is_the_class_count_not_the_labels_present(tmp_path):
    pytest.importorskip("google.protobuf")
    splits = {}
    for name, seed in (("train", 1), ("test", 2)):
        images, labels = small_digits(30, seed=seed)  # labels 0..9 only
        splits[name] = ArraySplit(name, images, labels, num_classes=12)
    first = tmp_path / "a.tfrecord"
    mnistconv.write(Dataset("t", splits), str(first), "tfrecord", image_format="png")
    for name in ("train", "test"):
        assert _label_widths(tmp_path / f"a-{name}.tfrecord") == {12}
    # Read back and written again: still 12 wide, in both splits.
    second = tmp_path / "b.tfrecord"
    mnistconv.convert(str(tmp_path / "a-train.tfrecord"), str(second))
    assert _label_widths(second) == {12}
    # 2 declared classes: 2 wide, never the family's 10.
    images, _ = small_digits(8)
    two = ArraySplit("train", images, np.array([0, 1] * 4, np.uint8), num_classes=2)
    mnistconv.write(Dataset("t", {"train": two}), str(tmp_path / "two.tfrecord"),
                    "tfrecord", image_format="png")
    assert _label_widths(tmp_path / "two.tfrecord") == {2}
