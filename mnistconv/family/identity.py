"""What an output's metadata says the dataset is: its name, description, license,
citation, homepage and version (house rule 15). Each is what the user gave (--name,
--description, --license, --citation, --homepage, --version, or the same keywords of
write()), else what the bytes prove: a published family's facts only when every input
file is one of its published files (provenance.family_of, by checksum), else a neutral
name taken from the output and no license, citation or homepage, with a note saying how
to set them. Every metadata writer (TFDS' dataset_info.json, Parquet's README.md,
croissant.json, the HTML card) describes the dataset from one Identity.
"""

import os
import re
from dataclasses import dataclass
from typing import Optional

from ..errors import UsageError
from ..limits import printable
from ..model.spec import Option

# The keywords (and flags) every metadata-writing format takes.
KEYS = ("name", "description", "license", "citation", "homepage", "version",
        "date_published")

# Patterns as text, compiled on first use (re caches them): most runs check neither.
_VERSION = r"(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\Z"
# Text fields: any printable text; a description or citation may span lines.
_DATE = r"[0-9]{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12][0-9]|3[01]))?)?\Z"
_MOST = {"name": 200, "license": 2000, "homepage": 2000, "description": 20000,
         "citation": 20000}

NAME = Option("name", "--name", "The dataset's name in the metadata (default: a published "
              "dataset's when the input's files match its checksums, else the output's "
              "name)", "str")
DESCRIPTION = Option("description", "--description", "The dataset's description in the "
                     "metadata (default: a published dataset's when its checksums match, "
                     "else what the output holds)", "str")
LICENSE = Option("license", "--license", "The dataset's license in the metadata, e.g. "
                 "https://creativecommons.org/licenses/by-sa/3.0/ or MIT (default: a "
                 "published dataset's when its checksums match, else none)", "str")
CITATION = Option("citation", "--citation", "How to cite the dataset (BibTeX or text) in "
                  "the metadata (default: a published dataset's when its checksums match, "
                  "else none)", "str")
HOMEPAGE = Option("homepage", "--homepage", "The dataset's home page URL in the metadata "
                  "(default: a published dataset's when its checksums match, else none)",
                  "str")
VERSION = Option("version", "--version", "The dataset's version MAJOR.MINOR.PATCH in the "
                 "metadata (default: none; TFDS: 1.0.0)", "str")
DATE_PUBLISHED = Option("date_published", "--date-published", "When the dataset was "
                        "published, YYYY, YYYY-MM or YYYY-MM-DD, in the metadata (default: "
                        "a published dataset's year when its checksums match, else none)",
                        "str")
OPTIONS = (NAME, DESCRIPTION, LICENSE, CITATION, HOMEPAGE, VERSION, DATE_PUBLISHED)

HOW_TO_SET = ("describe it with --name, --description, --license, --citation, "
              "--homepage, --version and --date-published (the same keywords of "
              "mnistconv.write)")


@dataclass(frozen=True)
class Identity:
    """What the metadata states; "" (None for version) where nothing is known."""

    name: str
    title: str  # a heading: the family's title, the given name, or the neutral name
    description: str
    license: str = ""
    citation: str = ""
    homepage: str = ""
    version: Optional[str] = None
    date_published: str = ""
    family: object = None  # the sources.Family the bytes proved, or None
    note: str = ""  # how to set what is missing, when nothing was given or proved
    given: tuple = ()  # the keys the user gave


def check_version(version, flag="--version"):
    """MAJOR.MINOR.PATCH without leading zeros (TFDS' and Croissant's rule), else exit 2."""
    if not isinstance(version, str) or not re.match(_VERSION, version):
        raise UsageError(None, f"{flag} {printable(version)} is not a version",
                         "use MAJOR.MINOR.PATCH without leading zeros, e.g. 1.0.0")
    return version


def check_date(value):
    """An ISO 8601 date: YYYY, YYYY-MM or YYYY-MM-DD, else exit 2."""
    if not isinstance(value, str) or not re.match(_DATE, value):
        raise UsageError(None, f"--date-published {printable(value)} is not a date",
                         "use YYYY, YYYY-MM or YYYY-MM-DD, e.g. 2024-05-01")
    return value


def check_text(key, value):
    """A given text: a non-empty string of printable characters (a description or
    citation may hold line breaks), not too long, else exit 2."""
    flag = f"--{key}"
    if not isinstance(value, str) or not value.strip():
        raise UsageError(None, f"{flag} must be non-empty text, not {printable(value)}",
                         f"give {flag} some text, or leave it out")
    lines = key in ("description", "citation")
    if any(not (c.isprintable() or (lines and c in "\n\t")) for c in value):
        raise UsageError(None, f"{flag} {printable(value)} holds control characters",
                         "give printable text" + (" (line breaks are kept)" if lines else ""))
    if len(value) > _MOST[key]:
        raise UsageError(None, f"{flag} is {len(value):,} characters, more than "
                               f"{_MOST[key]:,}", "shorten it")
    if key == "homepage" and not re.match(r"https?://\S+\Z", value):
        raise UsageError(None, f"--homepage {printable(value)} is not an http(s) URL",
                         "give the dataset's page, e.g. https://example.org/my-digits")
    return value


def given(options) -> dict:
    """The identity keywords set in a write's options (a dict or an options dataclass),
    each checked."""
    get = options.get if isinstance(options, dict) else \
        (lambda key: getattr(options, key, None))
    out = {}
    for key in KEYS:
        value = get(key)
        if value is not None:
            out[key] = check_version(value) if key == "version" else \
                check_date(value) if key == "date_published" else check_text(key, value)
    return out


def neutral_name(dst) -> str:
    """A name from the output's own name: out/hf/ -> hf, digits.npz -> digits."""
    base = os.path.basename(str(dst).rstrip("/" + os.sep)) if dst not in (None, "-") else ""
    return base.split(".")[0] or "dataset"


def summary(dataset) -> str:
    """What the output holds, in the words of a description nothing else supplies."""
    splits = list(dataset.splits.values())
    shape = "x".join(map(str, splits[0].header.shape)) if splits else ""
    counts = ", ".join(f"{s.header.count} {n}" for n, s in dataset.splits.items())
    return f"{shape} images with class labels ({counts})"


def resolve(dataset, dst, options=None, family=False, default_name=None) -> Identity:
    """The Identity of `dataset` written to `dst`: `options` the write's (identity
    keywords among them); `family` the sources.Family already proved (False: prove it
    here); `default_name` the name a format gives when none is given or proved."""
    from .provenance import family_of
    said = given(options or {})
    if family is False:
        family = family_of(dataset)
    name = said.get("name") or default_name or \
        (family.name if family else neutral_name(dst))
    title = said.get("name") or (family.title if family else name)
    described = f"{summary(dataset)}, written by mnistconv."
    if family is not None and family:
        description = f"{family.title}: {described}"
    else:
        description = f"{described[0].upper()}{described[1:]}"
    missing = not family and "license" not in said
    from ..errors import redact  # (a URL's password never reaches a note)
    note = (f"{redact(str(dst))}: the metadata names the dataset '{name}' and states no license or "
            "citation: its input is not a published dataset's files (no published "
            f"checksum matches); {HOW_TO_SET}") if missing else ""
    return Identity(
        name=name, title=title, description=said.get("description", description),
        license=said.get("license", family.license if family else ""),
        citation=said.get("citation", family.citation if family else ""),
        homepage=said.get("homepage", family.homepage if family else ""),
        version=said.get("version"),
        date_published=said.get("date_published", family.published if family else ""),
        family=family or None, note=note, given=tuple(said))


def add_note(dataset, identity) -> None:
    """The identity's note among the dataset's notes (once), for the CLI to print."""
    if identity.note and identity.note not in dataset.notes:
        dataset.notes.append(identity.note)
