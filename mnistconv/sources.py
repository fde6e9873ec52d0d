"""The MNIST family's published files: names, published digests (and, for MNIST, the
decompressed files' SHA-256 and size), and the mirrors that serve them, tried in order.
Data only; mnistconv/download.py fetches and checks them."""

from dataclasses import dataclass
from typing import Callable, Optional

from .errors import UsageError


@dataclass(frozen=True)
class RemoteFile:
    """One published file of a family: its name and the digests and sizes it is
    checked against once downloaded."""

    name: str  # the file's name on every mirror and in the target directory
    md5: Optional[str] = None  # as published by the project
    sha256: Optional[str] = None
    size: Optional[int] = None  # bytes, where published; progress total and --list
    # The decompressed file's SHA-256 and size, where known: a copy recompressed with
    # other gzip settings, or gunzipped, holds the same data under other archive hashes.
    content_sha256: Optional[str] = None
    content_size: Optional[int] = None

    def digests(self):
        """(algorithm, expected hex) pairs to check, strongest first."""
        return [(alg, value) for alg, value in (("sha256", self.sha256), ("md5", self.md5))
                if value]


@dataclass(frozen=True)
class Family:
    """A dataset `mnistconv download` knows: its files, the mirrors serving them, where
    their digests come from, and how an archive's members are laid out on disk."""

    name: str
    title: str
    homepage: str
    mirrors: tuple  # base URLs, tried in order; a file's URL is base + "/" + name
    files: tuple  # of RemoteFile
    checksums_from: str = ""  # where the published digests were taken from
    # For an archive: maps a member name to its path relative to the directory (None to
    # skip the member). None means the files are used as they are.
    extract: Optional[Callable[[str], Optional[str]]] = None
    note: str = ""


def _emnist_member(member):
    """gzip/emnist-<split>-<part>-... -> <split>/emnist-<split>-<part>-... for the IDX
    files and the label mappings; the zip holds nothing else we need."""
    base = member.rsplit("/", 1)[-1]
    if not base.startswith("emnist-") or not base.endswith((".gz", "-mapping.txt")):
        return None
    split = base.split("-")[1]
    return f"{split}/{base}"


_IDX = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _files(md5s, sha256s=None, sizes=None, contents=None):
    return tuple(RemoteFile(name, md5, (sha256s or {}).get(name), (sizes or {}).get(name),
                            *(contents or {}).get(name, (None, None)))
                 for name, md5 in zip(_IDX, md5s))


# SHA-256 and size of the decompressed official MNIST files (the browser pack's
# OFFICIAL_MNIST): every copy of MNIST holds these bytes, whatever its gzip wrapper.
_MNIST_CONTENT = {
    "train-images-idx3-ubyte.gz":
    ("ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db", 47040016),
    "train-labels-idx1-ubyte.gz":
    ("65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5", 60008),
    "t10k-images-idx3-ubyte.gz":
    ("0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7", 7840016),
    "t10k-labels-idx1-ubyte.gz":
    ("ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2", 10008),
}


FAMILIES = {
    f.name: f for f in (
        Family(
            "mnist", "MNIST handwritten digits (LeCun, Cortes, Burges)",
            "http://yann.lecun.com/exdb/mnist/",
            # ossci-datasets is PyTorch's copy (the one the browser pack was built from);
            # cvdf-datasets is the copy TensorFlow's tutorials read; LeCun's own site
            # has refused anonymous downloads at times, so it comes last.
            ("https://ossci-datasets.s3.amazonaws.com/mnist",
             "https://storage.googleapis.com/cvdf-datasets/mnist",
             "http://yann.lecun.com/exdb/mnist"),
            _files(
                ("f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
                 "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c"),
                {"train-images-idx3-ubyte.gz":
                 "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
                 "train-labels-idx1-ubyte.gz":
                 "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
                 "t10k-images-idx3-ubyte.gz":
                 "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
                 "t10k-labels-idx1-ubyte.gz":
                 "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"},
                {"train-images-idx3-ubyte.gz": 9912422, "train-labels-idx1-ubyte.gz": 28881,
                 "t10k-images-idx3-ubyte.gz": 1648877, "t10k-labels-idx1-ubyte.gz": 4542},
                _MNIST_CONTENT),
            # MD5s as in torchvision/datasets/mnist.py (MNIST.resources); SHA-256 and sizes
            # from the project's browser-v1 manifest (split_provenance.files), which
            # recorded the ossci-datasets copies; the content hashes are those of the
            # decompressed files of the MNIST database.
            checksums_from="torchvision/datasets/mnist.py (MD5); browser-v1 manifest "
                           "split_provenance.files (SHA-256, sizes); the decompressed "
                           "files' SHA-256 (content)"),
        Family(
            "fashion-mnist", "Fashion-MNIST: Zalando article images, 10 classes",
            "https://github.com/zalandoresearch/fashion-mnist",
            # The project's download links; its GitHub repository holds the same files.
            ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com",
             "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion"),
            # MD5s as published in the Fashion-MNIST README and torchvision's
            # FashionMNIST.resources.
            _files(("8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe",
                    "bef4ecab320f06d8554ea6380940ec79", "bb300cfdad3c16e7a12a480ee83cd310")),
            checksums_from="Fashion-MNIST README; torchvision/datasets/mnist.py "
                           "(FashionMNIST.resources)"),
        Family(
            "kmnist", "Kuzushiji-MNIST: cursive Japanese characters, 10 classes",
            "https://github.com/rois-codh/kmnist",
            ("https://codh.rois.ac.jp/kmnist/dataset/kmnist",
             "http://codh.rois.ac.jp/kmnist/dataset/kmnist"),
            # MD5s as in torchvision/datasets/mnist.py (KMNIST.resources).
            _files(("bdb82020997e1d708af4cf47b453dcf7", "e144d726b3acfaa3e44228e80efcd344",
                    "5c965bf0a639b31b8f53240b1b52f4d7", "7320c461ea6c1c855c0b718fb2a4b134")),
            checksums_from="torchvision/datasets/mnist.py (KMNIST.resources)"),
        Family(
            "emnist", "EMNIST: NIST Special Database 19 in MNIST form, all six splits",
            "https://www.nist.gov/itl/products-and-services/emnist-dataset",
            # NIST moved the file from www.itl.nist.gov to biometrics.nist.gov; the old
            # address now redirects to a web page (which the checksum rejects).
            ("https://biometrics.nist.gov/cs_links/EMNIST",
             "https://www.itl.nist.gov/iaui/vip/cs_links/EMNIST"),
            # MD5 as in torchvision/datasets/mnist.py (EMNIST.md5) for the gzip.zip archive.
            (RemoteFile("gzip.zip", "58c8d27c78d21e728a6bc7b3cc06412e"),),
            checksums_from="torchvision/datasets/mnist.py (EMNIST.md5)",
            extract=_emnist_member,
            note="about 560 MB; the splits are extracted to DIR/<split>/ "
                 "(byclass, bymerge, balanced, letters, digits, mnist); EMNIST images "
                 "are stored transposed"),
    )
}


def get_family(name) -> Family:
    """The family of that name (case, '_' for '-' and `fashion` forgiven), or a
    UsageError listing the known ones.

        get_family("Fashion_MNIST").files[0].name   # 'train-images-idx3-ubyte.gz'
    """
    key = str(name).lower().replace("_", "-")
    key = {"fashion": "fashion-mnist", "fashionmnist": "fashion-mnist"}.get(key, key)
    try:
        return FAMILIES[key]
    except KeyError:
        raise UsageError(None, f"unknown dataset '{name}'",
                         f"choose one of: {', '.join(FAMILIES)}") from None


# --- failures -------------------------------------------------------------------------
