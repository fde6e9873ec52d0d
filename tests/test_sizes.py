"""One meaning of a size for every size option: kB, MB, GB, TB count powers of 1000 and
KiB, MiB, GiB, TiB powers of 1024 (SI and IEC), for TFDS' and WebDataset's
--shard-size alike; a bare K, M or G is refused, never guessed. (Before, --shard-size
100MB meant 100,000,000 bytes for WebDataset and 104,857,600 for TFDS.)"""

import pytest

from mnistconv.errors import BadOption
from mnistconv.formats.tfds.format import parse_size
from mnistconv.formats.webdataset.writer import parse_shard_size
from mnistconv.limits import parse_bytes


@pytest.mark.parametrize("text, size", [
    ("100MB", 100_000_000), ("100MiB", 104_857_600), ("100mb", 100_000_000),
    ("512kB", 512_000), ("1 KiB", 1024), ("1.5GiB", 1_610_612_736), ("2GB", 2 * 10 ** 9),
    ("1TB", 10 ** 12), ("1TiB", 2 ** 40), ("4096B", 4096), ("0.5MB", 500_000),
])
def test_units_mean_the_same_everywhere(text, size):
    assert parse_bytes(text, "--x") == size
    if size >= 1024 and size <= 2 ** 40:
        assert parse_size(text) == size
    assert parse_shard_size(text) == (None, size)


@pytest.mark.parametrize("text", ["100M", "1G", "5K", "100", "MB", "1e3MB", "-1MB", "1.MB",
                                  "0B", "1.1234567MB", "１MB", "1" * 16 + "MB", ""])
def test_ambiguous_or_malformed_sizes_are_refused(text):
    with pytest.raises(BadOption, match="MB = 1,000,000 bytes, MiB = 1,048,576"):
        parse_size(text)


def test_the_range_is_in_the_message():
    with pytest.raises(BadOption, match=r"1 KiB to 1 TiB\), not '1000B'"):
        parse_size("1000B")
    with pytest.raises(BadOption, match=r"not '2TiB'"):
        parse_size("2TiB")
    assert parse_size("1TiB") == 2 ** 40


def test_webdataset_counts_samples_without_a_unit():
    assert parse_shard_size("10000") == (10000, None)
    assert parse_shard_size("1") == (1, None)
    for bad in ("0", "lots", "100M"):
        with pytest.raises(BadOption, match="number of samples"):
            parse_shard_size(bad)


# Every size flag of every format, with the function its writer parses it by: a format
# that adds one fails test_every_size_flag_is_declared_once until it is named here.
SIZE_PARSERS = {("tfds", "shard_size"): parse_size,
                ("webdataset", "shard_size"): lambda text: parse_shard_size(text)[1]}


def test_every_size_flag_is_declared_once_and_parsed_by_parse_bytes():
    """Issue 39: one size parser and one stated meaning for every size flag."""
    from mnistconv.formats import registry
    from mnistconv.formats.tfds import format as tfds_format
    from mnistconv.formats.webdataset import writer as webdataset_writer
    from mnistconv.limits import SIZE_UNITS_HELP
    flags = {(f.name, o.name): o for f in registry.FORMATS.values()
             for o in (*f.read_options, *f.write_options)
             if o.type == "str" and ("size" in o.name or "bytes" in o.help.lower())}
    assert set(flags) == set(SIZE_PARSERS)
    for option in flags.values():
        assert SIZE_UNITS_HELP in option.help and "256MB or 1GiB" in option.help
    assert tfds_format.parse_bytes is webdataset_writer.parse_bytes is parse_bytes
    for parse in SIZE_PARSERS.values():
        assert (parse("100MB"), parse("100MiB")) == (100_000_000, 104_857_600)
