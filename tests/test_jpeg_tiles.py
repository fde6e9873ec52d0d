"""JPEG tiles (codecs.jpeg_segments) give each image's own JPEG whether the caller pads
an image's rows only (jpeg_input_shape: libjpeg pads a tile's columns itself) or rows
and columns, and the pixels decode_jpeg() reads back from each."""

import numpy as np
import pytest

from mnistconv import codecs


@pytest.mark.parametrize("shape", [(28, 28), (13, 21), (5, 3), (16, 24), (9, 8)])
def test_rows_only_padding_gives_each_images_own_jpeg(shape):
    h, w = shape
    rng = np.random.default_rng(h * 100 + w)
    images = rng.integers(0, 256, (40, h, w), np.uint8)
    images[:, : h // 2] //= 16  # some smooth parts, some noise
    rows = np.empty((40,) + codecs.jpeg_input_shape(h, w), np.uint8)
    codecs.pad_to_blocks(images, out=rows)
    assert rows.shape[2] == w
    own = [codecs.encode_jpeg(im, 95) for im in images]
    for padded in (rows, codecs.pad_to_blocks(images)):
        header, segments, err_sum, err_max = codecs.encode_jpeg_measured(
            padded, 95, (h, w), 10)
        assert [header + s + codecs.EOI for s in segments] == own
        diff = [np.abs(codecs.decode_jpeg(j).astype(int) - im) for j, im in
                zip(own[:10], images[:10])]
        assert (err_sum, err_max) == (sum(int(d.sum()) for d in diff),
                                      max(int(d.max()) for d in diff))
