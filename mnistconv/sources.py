"""The MNIST family as data: each dataset's published files and digests, the mirrors
serving them, and its other sources (Keras' mirror or npz, the Hugging Face Hub's
Parquet), whose conversion is checked against the official content SHA-256, so the same
dataset from any source is provably the same bytes. mnistconv/download.py fetches them."""

from dataclasses import dataclass, replace
from typing import Callable, Optional

from .errors import UsageError


@dataclass(frozen=True)
class RemoteFile:
    """One published file of a family and the digests it is checked against."""

    name: str  # the file's name on every mirror and in the target directory
    md5: Optional[str] = None  # as published by the project
    sha256: Optional[str] = None
    size: Optional[int] = None  # bytes, where published; progress total and --list
    # The decompressed file's, where known: a copy regzipped or gunzipped holds the same.
    content_sha256: Optional[str] = None
    content_size: Optional[int] = None

    def digests(self):
        """(algorithm, expected hex) pairs to check, strongest first."""
        return [(alg, value) for alg, value in (("sha256", self.sha256), ("md5", self.md5))
                if value]


@dataclass(frozen=True)
class Source:
    """Where else a family's data can be had: `files` fetched from `mirrors`; `kind`
    is "files" (the family's own, kept as they are), "npz" (Keras' layout) or "parquet"
    (the Hub's <config>/<split>-00000-of-00001.parquet), both converted to IDX."""

    name: str
    description: str
    mirrors: tuple
    files: tuple
    kind: str = "files"
    checksums_from: str = ""


@dataclass(frozen=True)
class Family:
    """A dataset `mnistconv download` knows: its files, mirrors and other sources."""

    name: str
    title: str
    homepage: str
    mirrors: tuple  # base URLs, tried in order; a file's URL is base + "/" + name
    files: tuple  # of RemoteFile
    checksums_from: str = ""  # where the published digests were taken from
    # For an archive: a member's name to its relative path (None: skipped).
    extract: Optional[Callable[[str], Optional[str]]] = None
    note: str = ""
    sources: tuple = ()  # other Sources, beside "original" (mirrors + files above)
    # As the publishers state them (for Croissant metadata and cards); "" if unstated.
    license: str = ""
    citation: str = ""
    class_names: tuple = ()  # by label, where the publishers name the classes

    def source(self, name="original") -> Source:
        """The source of that name: "original" is the publishers' files on `mirrors`."""
        if name in (None, "original"):
            return Source("original", "the publishers' files", self.mirrors, self.files,
                          checksums_from=self.checksums_from)
        for source in self.sources:
            if source.name == name:
                # No files of its own: the family's, from this source's mirrors.
                return source if source.files else replace(source, files=self.files)
        names = ", ".join(["original"] + [s.name for s in self.sources])
        raise UsageError(None, f"{self.name} has no source '{name}'",
                         f"its sources: {names}")


def _emnist_member(member):
    """gzip/emnist-<split>-... -> <split>/emnist-<split>-..., IDX files and mappings."""
    base = member.rsplit("/", 1)[-1]
    if not base.startswith("emnist-") or not base.endswith((".gz", "-mapping.txt")):
        return None
    return f"{base.split('-')[1]}/{base}"


_IDX = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _bibtex(key, kind, title, authors, year, **more):
    """A BibTeX entry, as Croissant's citeAs and dataset cards carry it."""
    lines = [f"@{kind}{{{key},", f"  title={{{title}}},", f"  author={{{authors}}},"]
    lines += [f"  {name}={{{value}}}," for name, value in more.items()]
    return "\n".join(lines + [f"  year={{{year}}}", "}"])


_KERAS = "https://storage.googleapis.com/tensorflow/tf-keras-datasets"
_HUB = "https://huggingface.co/datasets"


def _hub_files(config):
    """The Hub's Parquet files of a dataset (no digests published)."""
    return tuple(RemoteFile(f"{config}/{split}-00000-of-00001.parquet")
                 for split in ("train", "test"))


def _files(md5s, sha256s, sizes, contents=((None, None),) * 4):
    """The four IDX files, each value given in _IDX's order."""
    return tuple(RemoteFile(name, *facts) for name, *facts in
                 zip(_IDX, md5s, sha256s, sizes, *zip(*contents)))


# The decompressed official MNIST files' SHA-256 and size: every copy holds these bytes.
_MNIST_CONTENT = (
    ("ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db", 47040016),
    ("65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5", 60008),
    ("0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7", 7840016),
    ("ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2", 10008))


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
            _files(("f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
                    "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c"),
                   ("440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
                    "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
                    "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
                    "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"),
                   (9912422, 28881, 1648877, 4542),
                   _MNIST_CONTENT),
            checksums_from="torchvision/datasets/mnist.py (MD5); browser-v1 manifest "
                           "split_provenance.files (SHA-256, sizes); the decompressed "
                           "files' SHA-256 (content)",
            sources=(
                Source("keras", "Keras' mnist.npz (keras.datasets.mnist), converted to "
                       "IDX", (_KERAS,),
                       (RemoteFile("mnist.npz", sha256="731c5ac602752760c8e48fbffcf8c3b8"
                                                       "50d9dc2a2aedcf2cc48468fc17b673d1"),),
                       "npz", "keras/src/datasets/mnist.py (file_hash)"),
                Source("hf", "the Hugging Face Hub's Parquet (ylecun/mnist), converted "
                       "to IDX", (f"{_HUB}/ylecun/mnist/resolve/main",), _hub_files("mnist"),
                       "parquet", "the official files' content SHA-256"),
            ),
            # The publishers' page states no license.
            citation=_bibtex("lecun1998gradient", "article",
                             "Gradient-based learning applied to document recognition",
                             "LeCun, Yann and Bottou, L{\\'e}on and Bengio, Yoshua and "
                             "Haffner, Patrick", 1998, journal="Proceedings of the IEEE",
                             volume="86", number="11", pages="2278--2324")),
        Family(
            "fashion-mnist", "Fashion-MNIST: Zalando article images, 10 classes",
            "https://github.com/zalandoresearch/fashion-mnist",
            # The project's download links; its GitHub repository holds the same files.
            ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com",
             "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion"),
            _files(("8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe",
                    "bef4ecab320f06d8554ea6380940ec79", "bb300cfdad3c16e7a12a480ee83cd310"),
                   ("3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
                    "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
                    "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
                    "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5"),
                   (26421880, 29515, 4422102, 5148)),
            checksums_from="Fashion-MNIST README; torchvision/datasets/mnist.py "
                           "(FashionMNIST.resources); TensorFlow Datasets' "
                           "url_checksums/fashion_mnist.txt (SHA-256, sizes)",
            sources=(
                # Keras' fashion_mnist.py fetches the same four files from its mirror.
                Source("keras", "the same files on Keras' mirror "
                       "(keras.datasets.fashion_mnist)", (_KERAS,), (), "files",
                       "the publishers' digests"),
                Source("hf", "the Hugging Face Hub's Parquet "
                       "(zalando-datasets/fashion_mnist), converted to IDX",
                       (f"{_HUB}/zalando-datasets/fashion_mnist/resolve/main",),
                       _hub_files("fashion_mnist"), "parquet",
                       "the converted files' content, where its SHA-256 is known"),
            ),
            license="https://opensource.org/licenses/MIT",  # the repository's LICENSE
            # As published: Fashion-MNIST's README and torchvision's FashionMNIST.classes.
            class_names=("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                         "Shirt", "Sneaker", "Bag", "Ankle boot"),
            citation=_bibtex("xiao2017fashion", "article",
                             "Fashion-MNIST: a Novel Image Dataset for Benchmarking "
                             "Machine Learning Algorithms",
                             "Xiao, Han and Rasul, Kashif and Vollgraf, Roland", 2017,
                             journal="arXiv preprint arXiv:1708.07747")),
        Family(
            "kmnist", "Kuzushiji-MNIST: cursive Japanese characters, 10 classes",
            "https://github.com/rois-codh/kmnist",
            ("https://codh.rois.ac.jp/kmnist/dataset/kmnist",
             "http://codh.rois.ac.jp/kmnist/dataset/kmnist"),
            _files(("bdb82020997e1d708af4cf47b453dcf7", "e144d726b3acfaa3e44228e80efcd344",
                    "5c965bf0a639b31b8f53240b1b52f4d7", "7320c461ea6c1c855c0b718fb2a4b134"),
                   ("51467d22d8cc72929e2a028a0428f2086b092bb31cfb79c69cc0a90ce135fde4",
                    "e38f9ebcd0f3ebcdec7fc8eabdcdaef93bb0df8ea12bee65224341c8183d8e17",
                    "edd7a857845ad6bb1d0ba43fe7e794d164fe2dce499a1694695a792adfac43c5",
                    "20bb9a0ef54c7db3efc55a92eef5582c109615df22683c380526788f98e42a1c"),
                   (18165135, 29497, 3041136, 5120)),
            checksums_from="torchvision/datasets/mnist.py (KMNIST.resources); TensorFlow "
                           "Datasets' url_checksums/kmnist.txt (SHA-256, sizes)",
            # The repository's README: CC BY-SA 4.0.
            license="https://creativecommons.org/licenses/by-sa/4.0/",
            # KMNIST's kmnist_classmap.csv (char column); torchvision spells them in
            # romaji (o, ki, su, tsu, na, ha, ma, ya, re, wo).
            class_names=("\u304a", "\u304d", "\u3059", "\u3064", "\u306a", "\u306f",
                         "\u307e", "\u3084", "\u308c", "\u3092"),
            citation=_bibtex("clanuwat2018deep", "article",
                             "Deep Learning for Classical Japanese Literature",
                             "Clanuwat, Tarin and Bober-Irizar, Mikel and Kitamoto, Asanobu "
                             "and Lamb, Alex and Yamamoto, Kazuaki and Ha, David", 2018,
                             journal="arXiv preprint arXiv:1812.01718")),
        Family(
            "emnist", "EMNIST: NIST Special Database 19 in MNIST form, all six splits",
            "https://www.nist.gov/itl/products-and-services/emnist-dataset",
            # NIST moved the file from www.itl.nist.gov to biometrics.nist.gov; the old
            # address now redirects to a web page (which the checksum rejects).
            ("https://biometrics.nist.gov/cs_links/EMNIST",
             "https://www.itl.nist.gov/iaui/vip/cs_links/EMNIST"),
            (RemoteFile("gzip.zip", "58c8d27c78d21e728a6bc7b3cc06412e"),),
            checksums_from="torchvision/datasets/mnist.py (EMNIST.md5)",
            extract=_emnist_member,
            note="about 560 MB; the splits are extracted to DIR/<split>/ "
                 "(byclass, bymerge, balanced, letters, digits, mnist); EMNIST images "
                 "are stored transposed",
            citation=_bibtex("cohen2017emnist", "article",
                             "EMNIST: an extension of MNIST to handwritten letters",
                             "Cohen, Gregory and Afshar, Saeed and Tapson, Jonathan and "
                             "van Schaik, Andr{\\'e}", 2017,
                             journal="arXiv preprint arXiv:1702.05373")),
    )
}


def get_family(name) -> Family:
    """The family of that name (case, '_' for '-' and `fashion` forgiven), or a UsageError."""
    key = str(name).lower().replace("_", "-")
    key = {"fashion": "fashion-mnist", "fashionmnist": "fashion-mnist"}.get(key, key)
    if key not in FAMILIES:
        raise UsageError(None, f"unknown dataset '{name}'",
                         f"choose one of: {', '.join(FAMILIES)}")
    return FAMILIES[key]
