"""WebDataset: tar shards of samples, each <key>.png (or .jpg), <key>.cls and <key>.json
(byte layout in format.py and mnistconv/codecs/tar.py). The declaration below is all `--help` loads."""

from ...model.spec import GREY, RGB, Format, Holds, Option
from ..common import JPEG_QUALITY, SPLIT_NAME, WORKERS, lazy_attributes, \
    shard_size_option

SPEC = Format(
    "webdataset", "mnistconv.formats.webdataset.format",
    "WebDataset tar shards <name>-<split>-000000.tar (<key>.png, .cls, .json per sample)",
    extensions=(".tar",),
    read_options=(SPLIT_NAME,),
    write_options=(
        shard_size_option("Samples per shard (10000), or bytes", "100000 samples, as "
                          "webdataset.ShardWriter; by bytes, no shard is larger unless one "
                          "sample is"),
        Option("image_format", "--image-format", "Image members: <key>.png (exact) or "
               "<key>.jpg (lossy)", "choice", ("png", "jpeg"), "png"),
        JPEG_QUALITY,
        WORKERS,
    ),
    writer="mnistconv.formats.webdataset.writer", plannable=True,
    # PNG members hold RGB; JPEGs are encoded grey only.
    holds=Holds(channels=GREY + RGB, extras=True),
    holds_when=(("image_format", "jpeg", Holds(extras=True)),),
)

__getattr__ = lazy_attributes(SPEC.module)
