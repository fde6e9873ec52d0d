"""Per-record fields beyond the label (stream.extra_fields: QMNIST's seven extra label
columns), checked here for the formats that keep them (KEPT_BY), on writing and reading.
"""

import json

import numpy as np

from ..errors import CorruptData, FormatError
from ..limits import is_safe_name, printable
from ..model.stream import extra_fields

# QMNIST's label columns: the class, then the extra fields, in this order in every format.
QMNIST_COLUMNS = ("class", "hsf_series", "writer_id", "writer_digit_index",
                  "nist_class_code", "nist_digit_index", "duplicate", "unused")
# The end of the reader's note on extra fields (idx/family.py); kept() removes it.
KEPT_BY = ("npz (extra_<split>, extra_columns), Parquet (int32 columns), WebDataset "
           "(.json keys) and TFRecord (int64 features) keep them; other formats drop "
           "them")
INT32 = (-(1 << 31), (1 << 31) - 1)


def check_names(names, where, reserved=(), what=""):
    """Extra field names are data (they become column names and JSON keys): plain
    names, each once, none of the format's own. `what` starts each message."""
    seen = set()
    for name in names:
        if not isinstance(name, str) or not is_safe_name(name):
            shown = printable(name if isinstance(name, str) else repr(name), 70)
            raise FormatError(where, f"{what}extra field name {shown} is not a plain "
                                     "name (letters, digits, _ . -; at most 64 "
                                     "characters)", "rename the field")
        if name in reserved:
            raise FormatError(where, f"{what}extra field {name} has the name of a field "
                                     "the format writes itself",
                              f"names taken: {', '.join(reserved)}")
        if name in seen:
            raise FormatError(where, f"{what}extra field {name} is named twice", "name each field once")
        seen.add(name)
    return tuple(names)


def checked(split, reserved=()):
    """(names, N x k int32 table) of a split's extra fields, checked: a row per record,
    a column per name, integers that fit int32; or None when it has none."""
    extra = extra_fields(split)
    if extra is None:
        return None
    names, table = extra
    where = split.header.source or split.name
    names = check_names(names, where, reserved)
    table = np.asarray(table)
    if table.ndim != 2 or table.shape != (split.header.count, len(names)) or \
            table.dtype.kind not in "iu":
        raise CorruptData(where, f"its extra fields are a {table.dtype.name} table of "
                                 f"shape {table.shape}, not {split.header.count} x "
                                 f"{len(names)} integers")
    if table.size and (table.min() < INT32[0] or table.max() > INT32[1]):
        bad = table[(table < INT32[0]) | (table > INT32[1])][0]
        raise FormatError(where, f"extra field value {int(bad)} does not fit int32",
                          "extra fields are int32")
    return names, table.astype(np.int32, copy=False)


def same_names(found, where):
    """The one list of extra field names every split shares, from {split: checked()};
    () when none has any."""
    lists = {name: (e[0] if e else ()) for name, e in found.items()}
    first = next(iter(lists.items()), (None, ()))
    for name, names in lists.items():
        if names != first[1]:
            raise FormatError(where, f"split {name} has extra fields "
                                     f"({', '.join(names) or 'none'}), split {first[0]} "
                                     f"has ({', '.join(first[1]) or 'none'})",
                              "write one split at a time (--split)")
    return first[1]


def integer_keys(obj, skip, path, member):
    """A WebDataset split's extra fields: the first sample's integer .json keys."""
    names = [k for k, v in obj.items() if k not in skip and type(v) is int]
    return check_names(names, path, skip, f"member {member}: ")


def json_values(obj, names, skip, path, member):
    """A sample's values of the split's extra fields, checked: every one there, an
    integer that fits int32, and no other integer key beside `skip`."""
    same = "every sample's .json holds the same extra fields"
    values = []
    for name in names:
        if name not in obj:
            raise FormatError(path, f"member {member} has no {name}, which the split's "
                                    "first sample has", same)
        value = obj[name]
        if type(value) is not int:
            shown = json.dumps(value)  # ASCII, one line
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise FormatError(path, f"member {member}: {name} is {shown}, not an integer",
                              "extra fields are int32")
        if not INT32[0] <= value <= INT32[1]:
            raise FormatError(path, f"member {member}: {name} is {value}, which does not "
                                    "fit int32", "extra fields are int32")
        values.append(value)
    others = [k for k, v in obj.items() if k not in skip and type(v) is int
              and k not in names]
    if others:
        raise FormatError(path, f"member {member} has {printable(others[0], 70)}, which "
                                "the split's first sample has not", same)
    return values


def kept(dataset):
    """The writer keeps the extra fields: the reader's note that they are dropped goes."""
    dataset.notes[:] = [n for n in dataset.notes if not n.endswith(KEPT_BY)]


def _single_int(feature):
    """A tf.train.Feature's value when it holds exactly one int64, else None."""
    if feature.WhichOneof("kind") == "int64_list" and len(feature.int64_list.value) == 1:
        return feature.int64_list.value[0]
    return None


def example_names(feature, skip, path):
    """A TFRecord split's extra fields: the first record's single int64 features beside
    `skip`, QMNIST's in QMNIST's order, others sorted after them."""
    order = QMNIST_COLUMNS[1:]
    names = [k for k in feature if k not in skip and _single_int(feature[k]) is not None]
    names.sort(key=lambda k: (order.index(k) if k in order else len(order), k))
    return check_names(names, path, skip)


def example_values(feature, names, skip, path, where):
    """A record's values of the split's extra fields, checked as json_values() checks
    a .json's."""
    same = "every record holds the same extra fields"
    values = []
    for name in names:
        value = _single_int(feature[name]) if name in feature else None
        if value is None:
            raise FormatError(path, f"{where}: no single int64 {name} feature, which the "
                                    "first record has", same)
        if not INT32[0] <= value <= INT32[1]:
            raise FormatError(path, f"{where}: {name} is {value}, which does not fit "
                                    "int32", "extra fields are int32")
        values.append(value)
    others = [k for k in feature if k not in skip and k not in names and
              _single_int(feature[k]) is not None]
    if others:
        raise FormatError(path, f"{where} has {printable(others[0], 70)}, which the "
                                "first record has not", same)
    return values
