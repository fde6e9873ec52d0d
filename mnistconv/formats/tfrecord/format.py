"""What mnistconv.read()/write() and the registry find in the tfrecord package, from the
modules that hold it (the package's docstring gives the byte layout)."""

from ...codecs.example import PRESETS, ExampleBuilder, Schema, example_class  # noqa: F401
from ...codecs.framing import (COMPRESSIONS, NOT_TFRECORD, NOT_TFRECORD_HINT,  # noqa: F401
                               Framer, iter_records, masked_crc)
from ...io.shards import SHARD_RE, shard_names  # noqa: F401
from .indexed import IndexedSplit, read  # noqa: F401
from .names import EXTENSIONS, matches_name, resolve, split_target  # noqa: F401
from .reader import TFRecordSplit, sniff  # noqa: F401
from .writer import CHUNK, ERROR_SAMPLE, Settings, encode_records  # noqa: F401
