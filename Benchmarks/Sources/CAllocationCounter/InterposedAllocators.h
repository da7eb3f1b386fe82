// malloc and friends, defined to count and forward to glibc's own implementations through its exported __libc_*
// entry points (no dlsym, so no bootstrap recursion). Shared by the two counters: CAllocationCounter (linked into a
// benchmark executable) and ../../alloc-count/alloc_count_preload.c (preloaded into any process). The includer
// defines `static inline void counted(void)` first, and builds with _GNU_SOURCE on Linux with glibc.
// Frees are not counted: a benchmark wants the number of allocations, not the balance.
#ifndef WALLET_INTERPOSED_ALLOCATORS_H
#define WALLET_INTERPOSED_ALLOCATORS_H

#include <errno.h>
#include <stddef.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

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

#endif
