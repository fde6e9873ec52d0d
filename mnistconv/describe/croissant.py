"""Croissant 1.0 metadata (MLCommons' JSON-LD dataset description), written as
`croissant.json` at the root of a folder output whose format declares what its files
are (spec.Described: a Parquet directory, an ImageFolder tree), so
`mlcroissant` and TFDS' CroissantBuilder load the output and dataset sites index it.
It holds what identity.py resolves: name, description, and url, license, citeAs, version
and datePublished only where the user gave them or the input's bytes proved a published
dataset's (house rule 15); the files (a
cr:FileObject per file where the format lists them, a cr:FileSet per split of shards or
of images); the
"classes" record set when names are known; and a record set per split (image, label,
and ImageFolder's index). Every name in it is one mnistconv wrote, never a path read.
"""

import fnmatch
import json
import os

NAME = "croissant.json"
CONFORMS_TO = "http://mlcommons.org/croissant/1.0"
# The @context every Croissant 1.0 file carries (as mlcroissant's own examples do).
CONTEXT = {
    "@language": "en", "@vocab": "https://schema.org/", "sc": "https://schema.org/",
    "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "dct": "http://purl.org/dc/terms/",
    "citeAs": "cr:citeAs", "column": "cr:column", "conformsTo": "dct:conformsTo",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "equivalentProperty": "cr:equivalentProperty", "samplingRate": "cr:samplingRate",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract", "field": "cr:field", "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject", "fileSet": "cr:fileSet", "format": "cr:format",
    "includes": "cr:includes", "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath", "key": "cr:key", "md5": "cr:md5",
    "parentField": "cr:parentField", "path": "cr:path", "recordSet": "cr:recordSet",
    "references": "cr:references", "regex": "cr:regex", "repeated": "cr:repeated",
    "replace": "cr:replace", "separator": "cr:separator", "source": "cr:source",
    "subField": "cr:subField", "transform": "cr:transform",
}
def target(root) -> str:
    """Where an output directory's croissant.json goes."""
    return os.path.join(str(root), NAME)


def document(dataset, root, files, described, identity) -> dict:
    """The Croissant document of an output: `files` its OutputFiles, `described` what
    its format says of them (spec.Described), `identity` what it states of the dataset
    (identity.Identity)."""
    root = os.path.abspath(str(root))
    names = next((tuple(s.header.class_names) for s in dataset.splits.values()
                  if s.header.class_names), ())
    description = identity.description if "description" in identity.given else \
        f"{identity.description.rstrip('.')}, as {described.called}."
    doc = {"@context": CONTEXT, "@type": "sc:Dataset", "conformsTo": CONFORMS_TO,
           "name": identity.name, "description": description}
    # Only what the user said or the bytes proved: no url, license or citeAs otherwise.
    for key, value in (("url", identity.homepage), ("license", identity.license),
                       ("citeAs", identity.citation), ("version", identity.version),
                       ("datePublished", identity.date_published)):
        if value:
            doc[key] = value
    relative = [(os.path.relpath(os.path.abspath(f.path), root), f) for f in files]
    doc["distribution"], sources = _distribution(dataset, relative, described)
    doc["recordSet"] = ([_classes(names)] if names else []) + [
        _split_records(name, sources[name], bool(names)) for name in dataset.splits]
    return doc


def _distribution(dataset, relative, described):
    """Per split, a FileObject per file when the format lists them, and a FileSet of its
    files unless one listed file is the whole split."""
    media = dict(described.media)
    kind = "column" if described.records == "table" else "files"
    distribution, sources = [], {}
    for split_name in dataset.splits:
        mine = [(name, f) for name, f in relative if os.path.splitext(name)[1] in media
                and fnmatch.fnmatchcase(name, described.files.format(
                    split=split_name, folder="*", suffix="*"))]
        first = mine[0][0] if mine else ""
        suffix = os.path.splitext(first)[1] or described.media[0][0]
        if described.listed:
            distribution += [{"@type": "cr:FileObject", "@id": name, "name": name,
                              "contentUrl": name, "encodingFormat": media[suffix],
                              "contentSize": f"{f.bytes} B", "sha256": f.sha256}
                             for name, f in mine]
            if len(mine) == 1:
                sources[split_name] = ({"fileObject": {"@id": first}}, kind)
                continue
        set_id = f"{split_name}-{'files' if kind == 'column' else 'images'}"
        distribution.append({
            "@type": "cr:FileSet", "@id": set_id, "name": set_id,
            "encodingFormat": media[suffix],
            "includes": described.files.format(split=split_name, suffix=suffix,
                                               folder=os.path.dirname(first) or "*")})
        sources[split_name] = ({"fileSet": {"@id": set_id}}, kind)
    return distribution, sources


def _classes(names):
    return {"@type": "cr:RecordSet", "@id": "classes", "name": "classes",
            "description": "The name of each class, by label.",
            "dataType": "sc:Enumeration", "key": {"@id": "classes/label"},
            "field": [{"@type": "cr:Field", "@id": "classes/label", "name": "label",
                       "dataType": "sc:Integer"},
                      {"@type": "cr:Field", "@id": "classes/name", "name": "name",
                       "dataType": "sc:Text"}],
            "data": [{"classes/label": i, "classes/name": str(n)}
                     for i, n in enumerate(names)]}


def _split_records(split_name, source, named):
    where, kind = source
    if kind == "column":
        image = {**where, "extract": {"column": "image"}, "transform": {"jsonPath": "bytes"}}
        label = {**where, "extract": {"column": "label"}}
    else:
        image = {**where, "extract": {"fileProperty": "content"}}
        # <split>/<class number>[_<name>]/<index>.png: the number is the label.
        label = {**where, "extract": {"fileProperty": "fullpath"},
                 "transform": {"regex": f"^/?{split_name}/([0-9]+)[^/]*/[^/]+$"}}
    label_field = {"@type": "cr:Field", "@id": f"{split_name}/label", "name": "label",
                   "description": "The class number.", "dataType": "sc:Integer",
                   "source": label}
    if named and kind == "column":
        # Not a label cut from a path: it is text, which mlcroissant's join refuses.
        label_field["references"] = {"field": {"@id": "classes/label"}}
    fields = [{"@type": "cr:Field", "@id": f"{split_name}/image", "name": "image",
               "description": "The image.", "dataType": "sc:ImageObject",
               "source": image}, label_field]
    if kind == "files":  # the file's name is the example's original index
        fields.append({"@type": "cr:Field", "@id": f"{split_name}/index", "name": "index",
                       "description": "The example's original index (its file name).",
                       "dataType": "sc:Integer",
                       "source": {**where, "extract": {"fileProperty": "fullpath"},
                                  "transform": {"regex": "^.*/([0-9]+)[.][a-z]+$"}}})
    return {"@type": "cr:RecordSet", "@id": split_name, "name": split_name,
            "description": f"The {split_name} split.", "field": fields}


def write(dataset, root, files, described, options=None):
    """Write croissant.json for an output just written (files: its OutputFiles;
    described: its format's spec.Described; options: the write's, the identity keywords
    among them). Returns its OutputFile."""
    from ..errors import redact
    from ..io.fileio import write_text_output
    from ..family.identity import add_note, resolve
    identity = resolve(dataset, root, options)
    add_note(dataset, identity)
    _note_what_completes(dataset, root, identity)
    doc = document(dataset, root, files, described, identity)
    # No URL's password in a published file (a file name may quote it).
    return write_text_output(target(root), redact(json.dumps(doc, indent=2, ensure_ascii=False))
                             + "\n", force=True)


# What mlcroissant validate recommends of a dataset (it warns of each one missing), and
# the flag that states it: facts only the user knows unless the bytes prove a family.
RECOMMENDED = (("license", "--license", "license"), ("version", "--version", "version"),
               ("citeAs", "--citation", "citation"),
               ("datePublished", "--date-published", "date_published"))


def _note_what_completes(dataset, root, identity):
    """Where the user described the dataset but not wholly: a note naming the flags
    that would state what mlcroissant recommends (never a guessed value, rule 15).
    Without any, identity's own note already lists every flag."""
    if identity.note or not identity.given:
        return
    missing = [(key, flag) for key, flag, field in RECOMMENDED
               if not getattr(identity, field)]
    if missing:
        from ..errors import redact

        def listed(words, last):
            return f"{', '.join(words[:-1])} {last} {words[-1]}" if len(words) > 1 \
                else words[0]
        dataset.notes.append(
            f"{redact(target(root))}: states no {listed([k for k, _ in missing], 'or')}, "
            "which mlcroissant validate recommends (it warns without them); add "
            f"{listed([f for _, f in missing], 'and')} if the dataset has them (the same "
            "keywords of mnistconv.write)")


def check_target(root, force):
    """Refuse, before anything is written, a croissant.json there (without force)."""
    from ..io.staging import check_later_file
    check_later_file(target(root), force, "the output's croissant.json")
