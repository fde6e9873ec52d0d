"""The Hugging Face metadata of a Parquet image classification dataset, as `datasets`
writes it (features.py Features.arrow_schema and _to_yaml_list; info.py
DatasetInfosDict.to_dataset_card_data): the features JSON in each file's Arrow schema
(key `huggingface`), and README.md, whose YAML header (dataset_info: features, splits
with num_bytes and num_examples, download_size, dataset_size; configs: data_files per
split) the Hub and `datasets.load_dataset(<directory>)` read.

The YAML is written by hand (no YAML library needed); every string is a JSON string,
which YAML reads as a double-quoted scalar, so a class name holding quotes, colons or a
newline cannot change the document's structure.
"""

import json
import re


def features_json(names, extra=()) -> str:
    """The `huggingface` schema metadata value: Image, ClassLabel(names) and a
    Value("int32") for each extra field.

        features_json(["0", "1"])  # '{"info": {"features": {"image": ...'
    """
    features = {"image": {"_type": "Image"},
                "label": {"names": list(names), "_type": "ClassLabel"}}
    features.update((name, {"dtype": "int32", "_type": "Value"}) for name in extra)
    return json.dumps({"info": {"features": features}})


def _q(text) -> str:
    return json.dumps(str(text), ensure_ascii=True)


# The Hub's license identifiers of the licenses the MNIST family is published under.
HUB_LICENSES = {
    "https://creativecommons.org/licenses/by-sa/3.0/": "cc-by-sa-3.0",
    "https://creativecommons.org/licenses/by-sa/4.0/": "cc-by-sa-4.0",
    "https://creativecommons.org/licenses/by/4.0/": "cc-by-4.0",
    "https://opensource.org/licenses/MIT": "mit",
}
_HUB_ID = re.compile(r"[a-z0-9][a-z0-9.-]{0,63}\Z")


def license_lines(license_) -> list:
    """The card's license keys: a Hub identifier as it is (`mit`, `cc-by-sa-3.0`, also
    from the family's URL), else `other` with the license's link or name."""
    if not license_:
        return []
    known = HUB_LICENSES.get(license_) or (license_ if _HUB_ID.match(license_) else None)
    if known:
        return [f"license: {_q(known)}"]
    key = "license_link" if re.match(r"https?://", license_) else "license_name"
    return ['license: "other"', f"{key}: {_q(license_)}"]


def dataset_card(config, folder, names, splits, extra=(), identity=None) -> str:
    """README.md for a directory written by mnistconv. config: its config_name;
    folder: where its files are ('data' or the config); names: class names; splits:
    [(name, num_examples, num_bytes, download bytes)] in order; extra: the names of
    the int32 columns after label (extra fields), if any; identity: what the card
    states of the dataset (identity.Identity: name, license, citation, ...)."""
    lines = ["---"]
    if identity is not None:
        lines += [f"pretty_name: {_q(identity.name)}"] + license_lines(identity.license)
    lines += ["dataset_info:"]
    if config != "default":
        lines.append(f"  config_name: {_q(config)}")
    lines += ["  features:", "  - name: image", "    dtype: image", "  - name: label",
              "    dtype:", "      class_label:", "        names:"]
    lines += [f"          {_q(i)}: {_q(name)}" for i, name in enumerate(names)]
    for name in extra:
        lines += [f"  - name: {_q(name)}", "    dtype: int32"]
    lines.append("  splits:")
    for name, count, size, _ in splits:
        lines += [f"  - name: {_q(name)}", f"    num_bytes: {size}",
                  f"    num_examples: {count}"]
    lines += [f"  download_size: {sum(s[3] for s in splits)}",
              f"  dataset_size: {sum(s[2] for s in splits)}",
              "configs:", f"- config_name: {_q(config)}", "  data_files:"]
    for name, *_ in splits:
        lines += [f"  - split: {_q(name)}", f"    path: {_q(f'{folder}/{name}-*')}"]
    about = []
    if identity is not None:
        about = [identity.description, ""]
        if identity.homepage:
            about += [f"Home page: <{identity.homepage}>", ""]
        if identity.version:
            about += [f"Version: {identity.version}", ""]
        if identity.license:
            about += [f"License: {identity.license}", ""]
        if identity.citation:
            about += ["## Citation", "", "```bibtex" if identity.citation.lstrip()
                      .startswith("@") else "```", identity.citation.rstrip("\n"), "```", ""]
        elif identity.note:
            about += ["No license or citation is stated: the dataset's files are not "
                      "a published dataset's (no published checksum matches).", ""]
    title = identity.name if identity is not None else "Image classification dataset"
    lines += ["---", "", f"# {title}", ""] + about + [
              "Written by mnistconv in the Hugging Face Hub's Parquet layout: one or more "
              f"`{folder}/<split>-NNNNN-of-NNNNN.parquet` files per split, with columns "
              "`image` (PNG bytes) and `label` (a class index; names in the features "
              "above)" + (f", then int32 columns {', '.join(f'`{n}`' for n in extra)} "
                          "(each record's extra fields)" if extra else "") + ".", "",
              "| split | examples |", "| --- | --- |"]
    lines += [f"| {name} | {count} |" for name, count, *_ in splits]
    lines += ["", "```python", "from datasets import load_dataset",
              'ds = load_dataset("path/to/this/directory"'
              + ("" if config == "default" else f", {_q(config)}")
              + ")  # or the Hub's name once pushed",
              "```", ""]
    return "\n".join(lines)
