// Counting allocations by interposition: the executable defines malloc and friends, so every shared library the
// process loads (the Swift runtime and Foundation included) calls these, and they forward to glibc's own
// implementations through its exported __libc_* entry points. No dlsym is needed, so there is no bootstrap
// recursion to handle. Frees are not counted: a benchmark wants the number of allocations, not the balance.
#define _GNU_SOURCE
#include "CAllocationCounter.h"

#include <stdatomic.h>
#include <stddef.h>

#if defined(__linux__) && defined(__GLIBC__)
#include <errno.h>
#include <sched.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static _Atomic uint64_t allocations;

static inline void counted(void) {
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
}

void *malloc(size_t size) {
    counted();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    counted();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    counted();
    return __libc_realloc(pointer, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    counted();
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return ENOMEM;
    *result = pointer;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t size) {
    counted();
    return __libc_memalign(alignment, size);
}

void *memalign(size_t alignment, size_t size) {
    counted();
    return __libc_memalign(alignment, size);
}

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
