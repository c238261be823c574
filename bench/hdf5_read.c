/* sc-hdf5-read: how fast each rank reads its tiles of an HDF5 data set,
 * by three ways of reading the same hyperslabs: HDF5's POSIX driver, each
 * rank on its own (posix, what starconv-train does), MPI-IO with
 * independent reads (independent), and MPI-IO with collective reads
 * (collective).  bench/hdf5-read runs it, alternating the modes.
 *
 *   mpirun -np P sc-hdf5-read FILE MODE GH GW SAMPLES [ROUNDS]
 *
 * The ranks form a GH x GW grid over rows and columns (GH * GW = P), as
 * --parallel hGHwGW splits the first layer; each rank reads its block of
 * SAMPLES samples (indices drawn alike on every rank, as a shuffled epoch
 * does), one H5Dread a sample, into a float buffer of the block's shape.
 * Prints one line: the slowest rank's time of the best round, MB/s per
 * rank and in all. */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int die(const char *msg)
{
    fprintf(stderr, "sc-hdf5-read: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 6)
        return die("usage: sc-hdf5-read FILE posix|independent|collective GH GW SAMPLES [ROUNDS]");
    const char *path = argv[1], *mode = argv[2];
    int gh = atoi(argv[3]), gw = atoi(argv[4]), nsamples = atoi(argv[5]), rounds = argc > 6 ? atoi(argv[6]) : 3;
    int posix = !strcmp(mode, "posix"), coll = !strcmp(mode, "collective");
    if (!posix && !coll && strcmp(mode, "independent"))
        return die("MODE is posix, independent or collective");
    if (gh < 1 || gw < 1 || gh * gw != size || nsamples < 1 || rounds < 1)
        return die("GH x GW must be the number of ranks; SAMPLES and ROUNDS >= 1");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), dxpl = H5Pcreate(H5P_DATASET_XFER);
    if (!posix) {
        H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
        H5Pset_dxpl_mpio(dxpl, coll ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT);
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl), d = f < 0 ? -1 : H5Dopen2(f, "images", H5P_DEFAULT);
    if (d < 0)
        return die("cannot open the file or its data set 'images'");
    hid_t fs = H5Dget_space(d);
    hsize_t dims[4];
    if (H5Sget_simple_extent_ndims(fs) != 4)
        return die("'images' is not N x C x H x W");
    H5Sget_simple_extent_dims(fs, dims, NULL);
    int pr = rank / gw, pc = rank % gw;
    hsize_t r0 = dims[2] * pr / gh, r1 = dims[2] * (pr + 1) / gh, c0 = dims[3] * pc / gw, c1 = dims[3] * (pc + 1) / gw;
    hsize_t start[4] = {0, 0, r0, c0}, count[4] = {1, dims[1], r1 - r0, c1 - c0};
    size_t per = dims[1] * count[2] * count[3];
    float *buf = malloc(per * sizeof *buf);
    hid_t ms = H5Screate_simple(4, count, NULL);
    double best = 1e30;
    unsigned state = 12345;
    for (int r = 0; r < rounds; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int s = 0; s < nsamples; s++) {
            state = state * 1103515245u + 12345u;
            start[0] = (state >> 8) % dims[0];
            if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
                H5Dread(d, H5T_NATIVE_FLOAT, ms, fs, dxpl, buf) < 0)
                return die("a read failed");
        }
        double t = MPI_Wtime() - t0, slowest;
        MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (slowest < best)
            best = slowest;
    }
    double mb = nsamples * per * sizeof(float) / 1e6;
    if (rank == 0)
        printf("%s %s %dx%d: %d tiles of %.2f MB per rank in %.3f s: %.0f MB/s per rank, %.0f MB/s in all\n", path,
               mode, gh, gw, nsamples, mb / nsamples, best, mb / best, size * mb / best);
    free(buf);
    H5Sclose(ms), H5Sclose(fs), H5Dclose(d), H5Fclose(f), H5Pclose(fapl), H5Pclose(dxpl);
    MPI_Finalize();
    return 0;
}
