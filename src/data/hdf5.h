/* Data sets read by tile from HDF5 files (hdf5.c; the public side is
 * sc_dataset_hdf5 in dataset.h).  The file stays open while training
 * runs; every load task reads the block of its samples that its tile
 * holds (a hyperslab: samples x channels x rows x columns), and nothing
 * else, so that a rank's memory for input is its tiles. */
#ifndef SC_DATA_HDF5_H
#define SC_DATA_HDF5_H

#include <stdint.h>

#include "codelets/codelets.h"
#include "src/data/dataset.h"

/* The read function of the load tasks (sc_insert_load_read), with
 * ds->file as the source: the images' block converted to float (uint8
 * scaled by 1/255 as the IDX loader does), labels from memory (one a
 * sample) or read (per pixel).  A failed read is recorded
 * (sc_fail_record) and leaves x NaN and the labels -1. */
void sc_data_file_read(void *source, const struct sc_load_read *req, const int32_t *idx, float *x, int32_t *labels);

/* The per-pixel labels' resolution (0 x 0: one label a sample, or ds is
 * not read from a file). */
void sc_data_file_label_shape(const struct sc_dataset *ds, int *lh, int *lw);

/* What this process has read from ds's file since it was opened, as
 * stored (elements times their stored size): bytes of images and labels;
 * of images alone, and how many blocks (one a sample and tile); the
 * seconds spent reading; and the bytes of one whole sample, so that
 * image_bytes / image_reads / sample_bytes is the part of a sample a read
 * covers.  Zeros when ds is not read from a file. */
struct sc_data_file_stats {
    uint64_t bytes, image_bytes, image_reads;
    double seconds, sample_bytes;
};
void sc_data_file_stats(const struct sc_dataset *ds, struct sc_data_file_stats *out);

/* The file's path and images' data set, for messages ("" when none). */
const char *sc_data_file_name(const struct sc_dataset *ds);

/* The most specific entry of HDF5's error stack, which it then clears
 * ("file signature not found"), for a one-line message; HDF5's own
 * printing of the stack is off once a file was opened here, or after this
 * is called.  Only in a build with HDF5. */
const char *sc_data_file_h5_error(char buf[256]);

/* Closes the file and frees what it holds (sc_dataset_free calls it). */
void sc_data_file_close(struct sc_data_file *f);

#endif
