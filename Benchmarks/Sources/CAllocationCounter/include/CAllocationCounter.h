#ifndef C_ALLOCATION_COUNTER_H
#define C_ALLOCATION_COUNTER_H

#include <stdint.h>

/// Heap allocations (malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign) made by the whole process
/// since it started. Always 0 where interposition is not available (anything but Linux with glibc).
uint64_t CAllocationCounter_count(void);

/// 1 when allocations are counted on this platform.
int CAllocationCounter_isAvailable(void);

/// Pins the calling thread to the CPU it is running on, so a run measures one core. Returns that CPU, or -1.
int CAllocationCounter_pinToCurrentCPU(void);

#endif
