"""The MNIST family as data: each dataset's published files and digests, the mirrors
serving them, and its other sources (Keras' mirror or npz, the Hugging Face Hub's
Parquet), whose conversion is checked against the official content SHA-256, so the same
dataset from any source is provably the same bytes. mnistconv/family/download.py fetches them."""

from dataclasses import dataclass, replace
from typing import Callable, Optional

from ..errors import UsageError


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
    published: str = ""  # the year of the publication the citation names
    class_names: tuple = ()  # by label, where the publishers name the classes
    # Known slices of the published files (RemoteFiles: the bundled sample's), which
    # prove the family as the published files do (provenance.py).
    samples: tuple = ()

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


# The bundled sample's files: (name, SHA-256, bytes, content SHA-256, content bytes).
_MNIST_SAMPLE = (
    ("train-images-idx3-ubyte.gz",
     "0a725c351dacd1932a68938c0366707d4a6069c4a542eeb44ba6f7b8126ee1b5", 161728,
     "386bb018796babeaca208787b77c1b9db39532c4098951ea35f4694e744eb4b7", 784016),
    ("train-labels-idx1-ubyte.gz",
     "699722d875ade1a0fab522aef419b4506c45b83e05c71f6b7a13b57b2aba9212", 517,
     "895f65588e45d05babf0b5fa7aee2a0d782d8143b40b5764e596df91bc9dddeb", 1008),
    ("t10k-images-idx3-ubyte.gz",
     "420b2e16ea0de6226cb272b43c337a943de254713959643ede826b4b6f9e7f70", 31045,
     "cefe86a05637f831a20aef251bd9db19004a2c986ec848d345c40ffd09264afc", 156816),
    ("t10k-labels-idx1-ubyte.gz",
     "35e471546a21d6ea8a8f2157a0cbcc16c25dcba8115fe3e71d1379e1b393f1e3", 129,
     "181dda88fbf8032cf747bf0766ad9d035b6bb747997214d834eb8d2f33a72210", 208),
)


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
            # LeCun's page: "made available under the terms of the Creative Commons
            # Attribution-Share Alike 3.0 license" (so says the official files' README).
            license="https://creativecommons.org/licenses/by-sa/3.0/", published="1998",
            # examples/data/mnist-sample: the first 1000 training and 200 test examples
            # of the official files (headers counting them), checked against them.
            samples=tuple(RemoteFile(name, sha256=sha, size=size, content_sha256=content,
                                     content_size=content_size)
                          for name, sha, size, content, content_size in _MNIST_SAMPLE),
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
            published="2017",
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
            license="https://creativecommons.org/licenses/by-sa/4.0/", published="2018",
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
            # NIST's EMNIST page states no license: none is claimed.
            published="2017",
            citation=_bibtex("cohen2017emnist", "article",
                             "EMNIST: an extension of MNIST to handwritten letters",
                             "Cohen, Gregory and Afshar, Saeed and Tapson, Jonathan and "
                             "van Schaik, Andr{\\'e}", 2017,
                             journal="arXiv preprint arXiv:1702.05373")),
    )
}


# --- colour and multi-label MNIST-likes (issue 37) -----------------------------------

@dataclass(frozen=True)
class MedMnist:
    """One 2-D MedMNIST dataset as medmnist's info.py (v3.0.2) publishes it: its flag
    (the file name's stem), channels, task, official split sizes (train, val, test), the
    MD5 of its file at each size (MEDMNIST_SIZES order) and its class names by label."""

    flag: str
    title: str
    channels: int
    task: str  # multi-class | binary-class | ordinal-regression | multi-label, binary-class
    counts: tuple
    license: str
    md5: tuple
    labels: tuple

    def file_name(self, size: int = 28) -> str:
        """pathmnist.npz at 28 pixels, pathmnist_<size>.npz at the others."""
        return f"{self.flag}.npz" if size == 28 else f"{self.flag}_{size}.npz"

    @property
    def multi_label(self) -> bool:
        """ChestMNIST: 14 labels per image, each 0 or 1."""
        return self.task.startswith("multi-label")


MEDMNIST_SIZES = (28, 64, 128, 224)
_CC_BY = "https://creativecommons.org/licenses/by/4.0/"
_CC_BY_NC = "https://creativecommons.org/licenses/by-nc/4.0/"
# medmnist/info.py (MedMNIST/MedMNIST, v3.0.2): url, MD5, MD5_64, MD5_128, MD5_224,
# n_channels, task, n_samples, label and license of each 2-D dataset.
MEDMNIST = {m.flag: m for m in (
    MedMnist("pathmnist", "PathMNIST", 3, "multi-class",
             (89996, 10004, 7180), _CC_BY,
             ("a8b06965200029087d5bd730944a56c1", "55aa9c1e0525abe5a6b9d8343a507616",
              "ac42d08fb904d92c244187169d1fd1d9", "2c51a510bcdc9cf8ddb2af93af1eadec"),
             ("adipose", "background", "debris", "lymphocytes", "mucus", "smooth muscle",
              "normal colon mucosa", "cancer-associated stroma", "colorectal adenocarcinoma epithelium")),
    MedMnist("chestmnist", "ChestMNIST", 1, "multi-label, binary-class",
             (78468, 11219, 22433), _CC_BY,
             ("02c8a6516a18b556561a56cbdd36c4a8", "9de6cd0b934ebb5b7426cfba5efbae16",
              "db107e5590b27930b62dbaf558aebee3", "45bd33e6f06c3e8cdb481c74a89152aa"),
             ("atelectasis", "cardiomegaly", "effusion", "infiltration", "mass", "nodule", "pneumonia",
              "pneumothorax", "consolidation", "edema", "emphysema", "fibrosis", "pleural", "hernia")),
    MedMnist("dermamnist", "DermaMNIST", 3, "multi-class",
             (7007, 1003, 2005), _CC_BY_NC,
             ("0744692d530f8e62ec473284d019b0c7", "b70a2f5635c6199aeaa28c31d7202e1f",
              "2defd784463fa5243564e855ed717de1", "8974907d8e169bef5f5b96bc506ae45d"),
             ("actinic keratoses and intraepithelial carcinoma", "basal cell carcinoma",
              "benign keratosis-like lesions", "dermatofibroma", "melanoma", "melanocytic nevi",
              "vascular lesions")),
    MedMnist("octmnist", "OCTMNIST", 1, "multi-class",
             (97477, 10832, 1000), _CC_BY,
             ("c68d92d5b585d8d81f7112f81e2d0842", "e229e9440236b774d9f0dfef9d07bdaf",
              "0a97e76651ace45c5d943ee3f65b63ae", "abc493b6d529d5de7569faaef2773ba3"),
             ("choroidal neovascularization", "diabetic macular edema", "drusen", "normal")),
    MedMnist("pneumoniamnist", "PneumoniaMNIST", 1, "binary-class",
             (4708, 524, 624), _CC_BY,
             ("28209eda62fecd6e6a2d98b1501bb15f", "8f4eceb4ccffa70c672198ea285246c6",
              "05b46931834c231683c68f40c47b2971", "d6a3c71de1b945ea11211b03746c1fe1"),
             ("normal", "pneumonia")),
    MedMnist("retinamnist", "RetinaMNIST", 3, "ordinal-regression",
             (1080, 120, 400), _CC_BY,
             ("bd4c0672f1bba3e3a89f0e4e876791e4", "afda852cc34dcda56f86ad2b2457dbcc",
              "e48e916a24454daf90583d4e6efb1a18", "eae7e3b6f3fcbda4ae613ebdcbe35348"),
             ("0", "1", "2", "3", "4")),
    MedMnist("breastmnist", "BreastMNIST", 1, "binary-class",
             (546, 78, 156), _CC_BY,
             ("750601b1f35ba3300ea97c75c52ff8f6", "742edef2a1fd1524b2efff4bd7ba9364",
              "363e4b3f8d712e9b5de15470a2aaadf1", "b56378a6eefa9fed602bb16d192d4c8b"),
             ("malignant", "normal, benign")),
    MedMnist("bloodmnist", "BloodMNIST", 3, "multi-class",
             (11959, 1712, 3421), _CC_BY,
             ("7053d0359d879ad8a5505303e11de1dc", "2b94928a2ae4916078ca51e05b6b800b",
              "adace1e0ed228fccda1f39692059dd4c", "b718ff6835fcbdb22ba9eacccd7b2601"),
             ("basophil", "eosinophil", "erythroblast",
              "immature granulocytes(myelocytes, metamyelocytes and promyelocytes)", "lymphocyte",
              "monocyte", "neutrophil", "platelet")),
    MedMnist("tissuemnist", "TissueMNIST", 1, "multi-class",
             (165466, 23640, 47280), _CC_BY,
             ("ebe78ee8b05294063de985d821c1c34b", "123ece2eba09d0aa5d698fda57103344",
              "61b955355d7425a89687b06cca3ce0c2", "b077128c4a949f0a4eb01517f9037b9c"),
             ("Collecting Duct, Connecting Tubule", "Distal Convoluted Tubule",
              "Glomerular endothelial cells", "Interstitial endothelial cells", "Leukocytes",
              "Podocytes", "Proximal Tubule Segments", "Thick Ascending Limb")),
    MedMnist("organamnist", "OrganAMNIST", 1, "multi-class",
             (34561, 6491, 17778), _CC_BY,
             ("68e3f8846a6bd62f0c9bf841c0d9eacc", "2dcccc29b88e6da5a01161ef20cda288",
              "eeae80d0a227a8d099027e1b3cfd3b60", "50747347e05c87dd3aaf92c49f9f3170"),
             ("bladder", "femur-left", "femur-right", "heart", "kidney-left", "kidney-right", "liver",
              "lung-left", "lung-right", "pancreas", "spleen")),
    MedMnist("organcmnist", "OrganCMNIST", 1, "multi-class",
             (12975, 2392, 8216), _CC_BY,
             ("b9ceb9546e10131b32923c5bbeaea2b1", "3ce34a8724ea6f548e6db4744d03b6a9",
              "773c1f009daa3fe5d9a2a201b2a7ed94", "050f5e875dc056f6768abf94ec9995d1"),
             ("bladder", "femur-left", "femur-right", "heart", "kidney-left", "kidney-right", "liver",
              "lung-left", "lung-right", "pancreas", "spleen")),
    MedMnist("organsmnist", "OrganSMNIST", 1, "multi-class",
             (13932, 2452, 8827), _CC_BY,
             ("9ab87b696fb54e2a387ebe992d6ed5f1", "53a6d115339d874c25e309a994ff46d3",
              "ded0c5fa01a95dc4978b956f613e9b8e", "b354719e553fbbb2513d5533f52a4cb1"),
             ("bladder", "femur-left", "femur-right", "heart", "kidney-left", "kidney-right", "liver",
              "lung-left", "lung-right", "pancreas", "spleen")),
)}
_MEDMNIST_MIRROR = "https://zenodo.org/records/10519652/files"
_MEDMNIST_CITATION = _bibtex(
    "yang2023medmnist", "article",
    "MedMNIST v2 - A large-scale lightweight benchmark for 2D and 3D biomedical image "
    "classification", "Yang, Jiancheng and Shi, Rui and Wei, Donglai and Liu, Zequan and "
    "Zhao, Lin and Ke, Bilian and Pfister, Hanspeter and Ni, Bingbing", 2023,
    journal="Scientific Data", volume="10", number="1", pages="41")


def _medmnist_family(m: MedMnist) -> Family:
    """A MedMNIST dataset: its 28-pixel file, the other sizes as sources 64, 128, 224."""
    files = [RemoteFile(m.file_name(size), md5) for size, md5 in zip(MEDMNIST_SIZES, m.md5)]
    return Family(
        m.flag, f"{m.title} (MedMNIST v2/MedMNIST+, {m.task}, {m.channels} channel"
                f"{'s' if m.channels > 1 else ''})",
        "https://medmnist.com/", (_MEDMNIST_MIRROR,), (files[0],),
        checksums_from="medmnist/info.py (MD5, MD5_64, MD5_128, MD5_224)",
        note="28 x 28 pixels; --source 64, 128 or 224 fetches that size (MedMNIST+)",
        sources=tuple(Source(str(size), f"{m.title} at {size} x {size} pixels",
                             (_MEDMNIST_MIRROR,), (f,), "files",
                             "medmnist/info.py (MD5_%d)" % size)
                      for size, f in zip(MEDMNIST_SIZES[1:], files[1:])),
        license=m.license, citation=_MEDMNIST_CITATION, class_names=m.labels)


_CIFAR_MIRRORS = ("https://www.cs.toronto.edu/~kriz",)
_CIFAR_CITATION = _bibtex("krizhevsky2009learning", "techreport",
                          "Learning Multiple Layers of Features from Tiny Images",
                          "Krizhevsky, Alex", 2009, institution="University of Toronto")
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")


def _tar_member(*folders):
    """The extract rule of a CIFAR archive: the files right under one of `folders`
    (the binary or the python version's) keep their path."""
    def member(name):
        top, _, rest = name.partition("/")
        return name if top in folders and rest and "/" not in rest else None
    return member


COLOUR_FAMILIES = (
    Family(
        "cifar10", "CIFAR-10: 60,000 32 x 32 colour images in 10 classes (Krizhevsky)",
        "https://www.cs.toronto.edu/~kriz/cifar.html", _CIFAR_MIRRORS,
        (RemoteFile("cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530",
                    size=170052171),),
        checksums_from="the CIFAR page (MD5 of each version); torchvision/datasets/"
                       "cifar.py (tgz_md5 of the python version)",
        extract=_tar_member("cifar-10-batches-bin", "cifar-10-batches-py"),
        note="the binary version, extracted to DIR/cifar-10-batches-bin/; --source "
             "python fetches cifar-10-python.tar.gz (DIR/cifar-10-batches-py/)",
        sources=(Source("python", "the python version (pickled batches)", _CIFAR_MIRRORS,
                        (RemoteFile("cifar-10-python.tar.gz",
                                    "c58f30108f718f92721af3b95e74349a"),),
                        "files", "torchvision/datasets/cifar.py (tgz_md5)"),),
        citation=_CIFAR_CITATION, class_names=CIFAR10_CLASSES),
    Family(
        "cifar100", "CIFAR-100: 60,000 32 x 32 colour images, 100 classes in 20 superclasses",
        "https://www.cs.toronto.edu/~kriz/cifar.html", _CIFAR_MIRRORS,
        (RemoteFile("cifar-100-binary.tar.gz", "03b5dce01913d631647c71ecec9e9cb8",
                    size=168513733),),
        checksums_from="the CIFAR page (MD5 of each version); torchvision/datasets/"
                       "cifar.py (CIFAR100.tgz_md5 of the python version)",
        extract=_tar_member("cifar-100-binary", "cifar-100-python"),
        note="the binary version, extracted to DIR/cifar-100-binary/; --source python "
             "fetches cifar-100-python.tar.gz (DIR/cifar-100-python/)",
        sources=(Source("python", "the python version (pickled batches)", _CIFAR_MIRRORS,
                        (RemoteFile("cifar-100-python.tar.gz",
                                    "eb9058c3a382ffc7106e4002c42a8d85"),),
                        "files", "torchvision/datasets/cifar.py (CIFAR100.tgz_md5)"),),
        citation=_CIFAR_CITATION),
    Family(
        "svhn", "SVHN cropped digits: 32 x 32 colour house numbers (format 2)",
        "http://ufldl.stanford.edu/housenumbers/", ("http://ufldl.stanford.edu/housenumbers",),
        (RemoteFile("train_32x32.mat", "e26dedcc434d2e4c54c9b2d4a06d8373"),
         RemoteFile("test_32x32.mat", "eb5a983be6a315427106f1b164d9cef3")),
        checksums_from="torchvision/datasets/svhn.py (split_list MD5s)",
        note="MATLAB .mat files; label 10 is the digit 0 (read as 0); --source extra adds "
             "extra_32x32.mat (531,131 more images, about 1.3 GB)",
        sources=(Source("extra", "train, test and the extra split",
                        ("http://ufldl.stanford.edu/housenumbers",),
                        (RemoteFile("train_32x32.mat", "e26dedcc434d2e4c54c9b2d4a06d8373"),
                         RemoteFile("test_32x32.mat", "eb5a983be6a315427106f1b164d9cef3"),
                         RemoteFile("extra_32x32.mat", "a93ce644f1a588dc4d68dda5feec44a7")),
                        "files", "torchvision/datasets/svhn.py"),),
        class_names=tuple(str(d) for d in range(10)),
        citation=_bibtex("netzer2011reading", "inproceedings",
                         "Reading Digits in Natural Images with Unsupervised Feature "
                         "Learning", "Netzer, Yuval and Wang, Tao and Coates, Adam and "
                         "Bissacco, Alessandro and Wu, Bo and Ng, Andrew Y.", 2011,
                         booktitle="NIPS Workshop on Deep Learning and Unsupervised "
                                   "Feature Learning")),
) + tuple(_medmnist_family(m) for m in MEDMNIST.values())
FAMILIES.update((f.name, f) for f in COLOUR_FAMILIES)


def get_family(name) -> Family:
    """The family of that name (case, '_' for '-' and `fashion` forgiven), or a UsageError."""
    key = str(name).lower().replace("_", "-")
    key = {"fashion": "fashion-mnist", "fashionmnist": "fashion-mnist",
           "cifar-10": "cifar10", "cifar-100": "cifar100"}.get(key, key)
    if key not in FAMILIES:
        raise UsageError(None, f"unknown dataset '{name}'",
                         f"choose one of: {', '.join(FAMILIES)}")
    return FAMILIES[key]
