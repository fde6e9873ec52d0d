"""JPEG tiles (codecs.jpeg_segments) give each image's own JPEG whether the caller pads
the images to blocks or not, and the pixels decode_jpeg() reads back from each."""

import numpy as np
import pytest

from mnistconv import codecs


@pytest.mark.parametrize("shape", [(28, 28), (13, 21), (5, 3), (16, 24), (9, 8),
                                   (8, 12), (20, 40)])
def test_tiles_give_each_images_own_jpeg_and_error(shape):
    h, w = shape
    rng = np.random.default_rng(h * 100 + w)
    images = rng.integers(0, 256, (40, h, w), np.uint8)
    images[:, : h // 2] //= 16  # some smooth parts, some noise
    padded = codecs.pad_to_blocks(images)
    assert padded.shape[1:] == codecs.block_padded_shape(h, w)
    own = [codecs.encode_jpeg(im, 95) for im in images]
    for given in (images, padded):
        header, segments, err_sum, err_max = codecs.encode_jpeg_measured(
            given, 95, (h, w), 10)
        assert [header + s + codecs.EOI for s in segments] == own
        diff = [np.abs(codecs.decode_jpeg(j).astype(int) - im) for j, im in
                zip(own[:10], images[:10])]
        assert (err_sum, err_max) == (sum(int(d.sum()) for d in diff),
                                      max(int(d.max()) for d in diff))


@pytest.mark.parametrize("rows", [1, 3, 13, 14])
def test_the_error_measured_rows_at_a_time_is_the_whole_images_error(rows, monkeypatch):
    """Large images (--max-image-size raised) are compared a block of rows at a time, so
    that the error's temporaries stay small: the sum and the max are the whole images'
    whatever the block, one row, blocks that do not divide the height, or all of it."""
    h, w, measure = 13, 21, 6
    monkeypatch.setattr(codecs, "_ERROR_BLOCK_PIXELS", measure * w * rows)
    rng = np.random.default_rng(rows)
    images = rng.integers(0, 256, (9, h, w), np.uint8)
    _, segments, err_sum, err_max = codecs.encode_jpeg_measured(images, 75, (h, w),
                                                                measure)
    assert len(segments) == 9
    diff = np.abs(np.stack([codecs.decode_jpeg(codecs.encode_jpeg(im, 75))
                            for im in images[:measure]]).astype(int) - images[:measure])
    assert (err_sum, err_max) == (int(diff.sum()), int(diff.max()))
    # the largest difference in the last row only: a block that misses a row misses it
    images[measure - 1, h - 1, w - 1] = 255 - images[measure - 1, h - 1, w - 1] // 8
    images[measure - 1, h - 1, :w - 1] = 0
    _, _, _, last_max = codecs.encode_jpeg_measured(images, 75, (h, w), measure)
    decoded = codecs.decode_jpeg(codecs.encode_jpeg(images[measure - 1], 75))
    assert last_max >= int(np.abs(decoded[h - 1].astype(int) -
                                  images[measure - 1, h - 1]).max())


@pytest.mark.parametrize("shape", [(28, 28), (13, 22), (7, 4), (9, 8)])
def test_padding_is_libjpegs_edge_replication(shape):
    """pad_to_blocks repeats the last row and column, as libjpeg pads a partial
    block."""
    h, w = shape
    images = np.random.default_rng(w).integers(0, 256, (5, h, w), np.uint8)
    hp, wp = codecs.block_padded_shape(h, w)
    expected = np.pad(images, ((0, 0), (0, hp - h), (0, wp - w)), mode="edge")
    np.testing.assert_array_equal(codecs.pad_to_blocks(images), expected)
    out = np.empty((5, hp, wp), np.uint8)
    codecs.pad_to_blocks(images[:, :, ::-1][:, :, ::-1], out=out)  # not contiguous
    np.testing.assert_array_equal(out, expected)


def test_images_too_wide_for_a_tile_are_encoded_one_by_one():
    """More than 8187 blocks an image cannot lie beside another within JPEG's 65500
    pixels: each is encoded alone, with the same bytes and decoded pixels."""
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (3, 16, 32800), np.uint8)
    jpegs, decoded = codecs.encode_jpeg_batch(images, 90, decoded=True)
    assert jpegs == [codecs.encode_jpeg(im, 90) for im in images]
    np.testing.assert_array_equal(decoded, np.stack([codecs.decode_jpeg(j)
                                                     for j in jpegs]))
