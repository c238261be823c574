/* Counter-based random numbers: the same value for the same inputs on any
 * rank, worker or number of either. */
#ifndef SC_BASE_RNG_H
#define SC_BASE_RNG_H

#include <stdint.h>

/* splitmix64's finalizer, the hash behind every draw (initial weights,
 * shuffles, synthetic data). */
static inline uint64_t sc_splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

#endif
