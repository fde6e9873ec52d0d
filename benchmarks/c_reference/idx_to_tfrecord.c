/* A C reference for `mnistconv idx-to-tfrecord --split train SRC OUT`: what a competent C
 * programmer would write with libjpeg-turbo and zlib, single-threaded. bench_tfrecord.py
 * times it beside mnistconv to say how fast this machine is compared with the one the
 * issue's targets were set on (where such a program took about 0.17 s). It is a
 * calibration, not a product: its output must be byte-identical to mnistconv's.
 *
 *   idx_to_tfrecord DIR OUT.tfrecord
 *
 * reads DIR/train-images-idx3-ubyte.gz and DIR/train-labels-idx1-ubyte.gz and writes one
 * TFRecord per image: a tf.train.Example {"image": JPEG bytes, "label": one-hot int64[10]}.
 *
 * Build: gcc -std=c99 -O2 -march=native idx_to_tfrecord.c -o idx_to_tfrecord -ljpeg -lz
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <zlib.h>

#ifdef __SSE4_2__
#include <nmmintrin.h>
#endif

#define ROWS 28
#define COLS 28
#define PIXELS (ROWS * COLS)
#define CLASSES 10
#define BATCH 4096             /* images inflated per gzread: 3.2 MB, not the whole 47 MB */
#define OUT_BUFFER (4u << 20)  /* records are gathered here and written 4 MB at a time */

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "idx_to_tfrecord: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        die("out of memory", NULL);
    return p;
}

/* ---- CRC-32C (Castagnoli), as TFRecord framing needs ------------------------------- */

#ifdef __SSE4_2__
/* The SSE4.2 crc32 instruction computes exactly CRC-32C, 8 bytes per instruction. */
static uint32_t crc32c(const unsigned char *p, size_t n)
{
    uint64_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8); /* unaligned-safe load; compiles to one mov */
        c = _mm_crc32_u64(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}
static void crc32c_init(void) {}
#else
/* Portable fallback: slicing-by-8 tables (reflected polynomial 0x82F63B78), 8 bytes per
 * step instead of one. Assumes a little-endian host, as the framing itself does. */
static uint32_t crc_table[8][256];

static void crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t crc32c(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
            crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
            crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
    }
    while (n--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xFF];
    return ~c;
}
#endif

/* TFRecord stores CRCs "masked" so that a CRC of data holding CRCs stays well-behaved. */
static uint32_t masked_crc(const unsigned char *p, size_t n)
{
    uint32_t c = crc32c(p, n);
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* ---- JPEG into a reusable memory buffer -------------------------------------------- */

/* A destination manager writing into one buffer that outlives every image (jpeg_mem_dest
 * would hand back a fresh malloc per image). It grows only if an image outgrows it. */
struct mem_dest {
    struct jpeg_destination_mgr pub;
    unsigned char *buf;
    size_t cap, len;
};

static void dest_init(j_compress_ptr cinfo)
{
    struct mem_dest *d = (struct mem_dest *)cinfo->dest;
    d->pub.next_output_byte = d->buf;
    d->pub.free_in_buffer = d->cap;
}

static boolean dest_grow(j_compress_ptr cinfo)
{
    /* Called when the buffer is full (free_in_buffer == 0): all cap bytes are used. */
    struct mem_dest *d = (struct mem_dest *)cinfo->dest;
    size_t used = d->cap;
    unsigned char *bigger = realloc(d->buf, d->cap * 2);
    if (!bigger)
        die("out of memory", NULL);
    d->buf = bigger;
    d->cap *= 2;
    d->pub.next_output_byte = d->buf + used;
    d->pub.free_in_buffer = d->cap - used;
    return TRUE;
}

static void dest_term(j_compress_ptr cinfo)
{
    struct mem_dest *d = (struct mem_dest *)cinfo->dest;
    d->len = d->cap - d->pub.free_in_buffer;
}

/* libjpeg's default error_exit calls exit() too, but without saying which program failed. */
static void jpeg_die(j_common_ptr cinfo)
{
    char msg[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, msg);
    die("libjpeg", msg);
}

/* ---- protobuf wire format ----------------------------------------------------------- */

static size_t varint_len(size_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static unsigned char *put_varint(unsigned char *p, size_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* The "label" map entry never changes size: key, then Feature{int64_list (field 3):
 * Int64List{value (field 1, packed): ten one-byte varints}}. Only the 1 moves. */
static const unsigned char LABEL_ENTRY[] = {
    0x0A, 0x05, 'l', 'a', 'b', 'e', 'l', /* MapEntry.key */
    0x12, 0x0E,                          /* MapEntry.value: Feature, 14 bytes */
    0x1A, 0x0C,                          /* Feature.int64_list, 12 bytes */
    0x0A, 0x0A,                          /* Int64List.value, packed, 10 bytes */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
#define LABEL_ONE_HOT 13 /* offset of the first of the ten values */

/* Serialized tf.train.Example{features: Features{feature: {"image", "label"}}}, map entries
 * in key order as mnistconv writes them. Returns the bytes written at out. */
static size_t build_example(unsigned char *out, const unsigned char *jpeg, size_t jpeg_len,
                            unsigned label)
{
    size_t bytes_list = 1 + varint_len(jpeg_len) + jpeg_len;       /* BytesList{value} */
    size_t feature = 1 + varint_len(bytes_list) + bytes_list;      /* Feature{bytes_list} */
    size_t image_entry = 7 + 1 + varint_len(feature) + feature;    /* MapEntry{key, value} */
    size_t features = 1 + varint_len(image_entry) + image_entry    /* Features{feature...} */
                      + 2 + sizeof LABEL_ENTRY;
    unsigned char *p = out;
    *p++ = 0x0A; p = put_varint(p, features);                      /* Example.features */
    *p++ = 0x0A; p = put_varint(p, image_entry);                   /* Features.feature */
    memcpy(p, "\x0A\x05image", 7); p += 7;                         /* MapEntry.key */
    *p++ = 0x12; p = put_varint(p, feature);                       /* MapEntry.value */
    *p++ = 0x0A; p = put_varint(p, bytes_list);                    /* Feature.bytes_list */
    *p++ = 0x0A; p = put_varint(p, jpeg_len);                      /* BytesList.value */
    memcpy(p, jpeg, jpeg_len); p += jpeg_len;
    *p++ = 0x0A; *p++ = (unsigned char)sizeof LABEL_ENTRY;         /* Features.feature */
    memcpy(p, LABEL_ENTRY, sizeof LABEL_ENTRY);
    p[LABEL_ONE_HOT + label] = 1;
    return (size_t)(p + sizeof LABEL_ENTRY - out);
}

/* ---- IDX input ----------------------------------------------------------------------- */

static void read_exact(gzFile gz, void *buf, size_t n, const char *path)
{
    /* gzread takes an unsigned int count; every request here is far below 4 GB. */
    int got = gzread(gz, buf, (unsigned)n);
    if (got < 0 || (size_t)got != n) {
        int err;
        const char *msg = gzerror(gz, &err);
        if (got >= 0 && err == Z_OK)
            die(path, "file is truncated");
        die(msg, NULL); /* zlib's message already names the file */
    }
}

static uint32_t read_be32(gzFile gz, const char *path)
{
    unsigned char b[4];
    read_exact(gz, b, 4, path);
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static gzFile open_idx(const char *dir, const char *name, uint32_t magic, char *path,
                       size_t path_size, uint32_t *count)
{
    snprintf(path, path_size, "%s/%s", dir, name);
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        die(path, "cannot open");
    gzbuffer(gz, 1u << 17); /* fewer, larger reads than zlib's 8 KB default */
    if (read_be32(gz, path) != magic)
        die(path, "bad magic number");
    *count = read_be32(gz, path);
    return gz;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s DIR OUT.tfrecord\n", argv[0]);
        return 2;
    }
    crc32c_init();

    char images_path[4096], labels_path[4096];
    uint32_t n_images, n_labels;
    gzFile images = open_idx(argv[1], "train-images-idx3-ubyte.gz", 0x00000803, images_path,
                             sizeof images_path, &n_images);
    gzFile labels = open_idx(argv[1], "train-labels-idx1-ubyte.gz", 0x00000801, labels_path,
                             sizeof labels_path, &n_labels);
    if (read_be32(images, images_path) != ROWS || read_be32(images, images_path) != COLS)
        die(images_path, "images are not 28x28");
    if (n_images != n_labels)
        die("image and label counts differ", NULL);

    unsigned char *label = xmalloc(n_labels ? n_labels : 1);
    read_exact(labels, label, n_labels, labels_path);
    gzclose(labels);

    /* One compressor for every image: set up once, parameters kept across images. */
    struct jpeg_compress_struct cinfo;
    struct jpeg_error_mgr jerr;
    cinfo.err = jpeg_std_error(&jerr);
    jerr.error_exit = jpeg_die;
    jpeg_create_compress(&cinfo);
    struct mem_dest dest = {{0}, xmalloc(1u << 16), 1u << 16, 0};
    dest.pub.init_destination = dest_init;
    dest.pub.empty_output_buffer = dest_grow;
    dest.pub.term_destination = dest_term;
    cinfo.dest = &dest.pub;
    cinfo.image_width = COLS;
    cinfo.image_height = ROWS;
    cinfo.input_components = 1;
    cinfo.in_color_space = JCS_GRAYSCALE;
    /* Defaults = what OpenCV and Pillow ask for: baseline, standard Huffman tables (no
     * optimize_coding), islow DCT, JFIF APP0 with 1:1 density. Only the quality differs. */
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, 95, TRUE);

    FILE *out = fopen(argv[2], "wb");
    if (!out)
        die(argv[2], "cannot create");
    setvbuf(out, NULL, _IONBF, 0); /* we buffer ourselves; stdio would only copy again */
    size_t out_cap = OUT_BUFFER, out_len = 0;
    unsigned char *obuf = xmalloc(out_cap);
    unsigned char *pixels = xmalloc((size_t)BATCH * PIXELS);
    JSAMPROW rows[ROWS];

    for (uint32_t first = 0; first < n_images; first += BATCH) {
        uint32_t batch = n_images - first < BATCH ? n_images - first : BATCH;
        read_exact(images, pixels, (size_t)batch * PIXELS, images_path);
        for (uint32_t i = 0; i < batch; i++) {
            unsigned lab = label[first + i];
            if (lab >= CLASSES)
                die(labels_path, "label out of range 0..9");
            for (int r = 0; r < ROWS; r++)
                rows[r] = pixels + (size_t)i * PIXELS + (size_t)r * COLS;
            jpeg_start_compress(&cinfo, TRUE);
            while (cinfo.next_scanline < cinfo.image_height)
                jpeg_write_scanlines(&cinfo, rows + cinfo.next_scanline,
                                     cinfo.image_height - cinfo.next_scanline);
            jpeg_finish_compress(&cinfo);

            /* Record: length, masked CRC of length, Example, masked CRC of Example. The
             * Example is at most the JPEG plus 64 bytes of protobuf framing. */
            size_t need = 12 + dest.len + 64 + 4;
            if (out_cap - out_len < need) {
                if (out_len && fwrite(obuf, 1, out_len, out) != out_len)
                    die(argv[2], "write failed");
                out_len = 0;
                if (out_cap < need) {
                    free(obuf);
                    obuf = xmalloc(out_cap = need);
                }
            }
            unsigned char *rec = obuf + out_len;
            size_t n = build_example(rec + 12, dest.buf, dest.len, lab);
            for (int b = 0; b < 8; b++)
                rec[b] = (unsigned char)((uint64_t)n >> (8 * b));
            put_le32(rec + 8, masked_crc(rec, 8));
            put_le32(rec + 12 + n, masked_crc(rec + 12, n));
            out_len += 12 + n + 4;
        }
    }
    if (gzgetc(images) != -1)
        die(images_path, "more pixel data than the header says");
    gzclose(images);
    if ((out_len && fwrite(obuf, 1, out_len, out) != out_len) || fclose(out) != 0)
        die(argv[2], "write failed");
    jpeg_destroy_compress(&cinfo);
    free(dest.buf);
    free(obuf);
    free(pixels);
    free(label);
    return 0;
}
