// Counts the heap allocations of a whole process, for the end-to-end benchmark (scripts/benchmark-worker.sh):
//
//   cc -O2 -shared -fPIC -o alloc-count.so alloc_count_preload.c
//   BENCH_ALLOC_COUNT_DIR=/tmp/allocs LD_PRELOAD=$PWD/alloc-count.so wallet-worker run ...
//
// Preloaded, it defines malloc and friends before glibc does, so every allocation of the process (the Swift runtime,
// Foundation, librabbitmq, SQLite, every thread) calls these; they count and forward to glibc's own implementations
// (../Sources/CAllocationCounter/InterposedAllocators.h, shared with the benchmarks' linked-in counter). The count
// lives in a file, BENCH_ALLOC_COUNT_DIR/<pid> (8 bytes, a native-endian uint64 mapped shared), so another process reads it at any
// moment without the counted one's help: `worker-load watch` reads it at the start and the end of the measured
// window.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

// Allocations before the file is mapped (the dynamic loader's, the constructors') count here, then move to the file.
static _Atomic uint64_t early;
static _Atomic(_Atomic uint64_t *) shared;

static inline void counted(void) {
    _Atomic uint64_t *counter = atomic_load_explicit(&shared, memory_order_relaxed);
    atomic_fetch_add_explicit(counter ? counter : &early, 1, memory_order_relaxed);
}

__attribute__((constructor)) static void map_counter(void) {
    const char *directory = getenv("BENCH_ALLOC_COUNT_DIR");
    if (directory == NULL || directory[0] == '\0') return;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%ld", directory, (long)getpid()) >= (int)sizeof path) return;
    int descriptor = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (descriptor < 0) return;
    if (ftruncate(descriptor, sizeof(uint64_t)) != 0) {
        close(descriptor);
        return;
    }
    void *mapping = mmap(NULL, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0);
    close(descriptor);
    if (mapping == MAP_FAILED) return;
    _Atomic uint64_t *counter = mapping;
    atomic_store_explicit(counter, atomic_load(&early), memory_order_relaxed);
    atomic_store_explicit(&shared, counter, memory_order_release);
}

#include "../Sources/CAllocationCounter/InterposedAllocators.h"
