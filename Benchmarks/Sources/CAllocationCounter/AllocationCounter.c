// Counting allocations by interposition: the executable defines malloc and friends, so every shared library the
// process loads (the Swift runtime and Foundation included) calls these, and they forward to glibc's own
// implementations (InterposedAllocators.h, shared with ../../alloc-count's preload).
#define _GNU_SOURCE
#include "CAllocationCounter.h"

#include <stdatomic.h>
#include <stddef.h>

#if defined(__linux__) && defined(__GLIBC__)
#include <sched.h>

static _Atomic uint64_t allocations;

static inline void counted(void) {
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
}

#include "InterposedAllocators.h"

uint64_t CAllocationCounter_count(void) {
    return atomic_load_explicit(&allocations, memory_order_relaxed);
}

int CAllocationCounter_isAvailable(void) {
    return 1;
}

int CAllocationCounter_pinToCurrentCPU(void) {
    int cpu = sched_getcpu();
    if (cpu < 0) return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set) == 0 ? cpu : -1;
}

#else

uint64_t CAllocationCounter_count(void) {
    return 0;
}

int CAllocationCounter_isAvailable(void) {
    return 0;
}

int CAllocationCounter_pinToCurrentCPU(void) {
    return -1;
}

#endif
