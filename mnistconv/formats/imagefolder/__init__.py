"""ImageFolder: ROOT/<split>/<class>/<index>.png, as torchvision's ImageFolder and Keras'
image_dataset_from_directory read it (layout in format.py). This file is the format's
declaration, light enough for `--help`; the code is in format.py, imported on first
use."""

from ...family.identity import OPTIONS as IDENTITY
from ...model.spec import GREY, RGB, Described, Format, Holds, Option
from ..common import JPEG_QUALITY, SPLIT_NAME, WORKERS, lazy_attributes

SPEC = Format(
    "imagefolder", "mnistconv.formats.imagefolder.format",
    "ImageFolder tree <split>/<class>/<index>.png (torchvision, Keras)",
    read_options=(SPLIT_NAME,),
    write_options=(
        Option("image_format", "--image-format", "Image files: <index>.png (exact) or "
               "<index>.jpg (lossy)", "choice", ("png", "jpeg"), "png"),
        JPEG_QUALITY,
        WORKERS,
    ) + IDENTITY,
    output_is_directory=True,
    # PNGs hold RGB (torchvision's ImageFolder reads them as it reads any); JPEGs are
    # encoded grey only.
    holds=Holds(channels=GREY + RGB),
    holds_when=(("image_format", "jpeg", Holds()),),
    described=Described("an ImageFolder tree", "{split}/*/*{suffix}",
                        ((".png", "image/png"), (".jpg", "image/jpeg"))),
)

__getattr__ = lazy_attributes(SPEC.module)
