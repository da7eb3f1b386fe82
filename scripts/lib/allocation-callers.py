#!/usr/bin/env python3
"""Who asks for the heap allocations of a worker run.

Reads `perf script -F tid,comm,ip,sym,dso,trace --show-mmap-events` of a recording of glibc's `malloc` with its
return address (the uprobe `probe_libc:mallocra`, `caller=+0(%sp)`, that scripts/profile-worker.sh --allocations
adds) and prints the calls per delivery: by thread, by library, and by the function that asked for the memory.

Why the return address: at malloc's first instruction the frame-pointer chain starts at the *caller's caller* (the
caller has not been left, but only its own return address, on the stack, names it), so a call graph alone
attributes a direct `malloc` call (a coroutine frame, say) to the wrong function. The owner is the immediate caller
when it is the worker's own code; when it is an allocator or Swift's runtime (`swift_slowAlloc`), the first frame
of the chain outside them.

The recording covers the whole run (start-up, the setup phase and the measured notifications): the figures are per
delivery of the run (--deliveries, printed by `worker-load preload`), not of the measured window alone.
"""
import argparse
import bisect
import collections
import re
import subprocess
import sys

# Frames that only pass an allocation on: the allocators, Swift's runtime and the standard library's buffer growth.
PASS_THROUGH = re.compile(
    r"^(malloc|__GI___libc_malloc|__libc_malloc|_int_malloc|operator new|swift_slowAlloc|swift_allocObject"
    r"|swift_allocBox|swift_allocEmptyBox|_swift_allocObject_|swift::|_swift_|__swift|\[unknown\]"
    r"|\$ss|\$sSa|\$sSD|\$sSh|\$sSS|\$sSJ|\$sSr|\$sSR)")
RUNTIME = ("libc.so.6", "libswiftCore.so", "libstdc++.so.6")


class Symbols:
    """Function names of one ELF file by virtual address (`nm`), and its loadable segments (`readelf -l`)."""

    def __init__(self, path):
        self.starts, self.names, self.segments = [], [], []
        try:
            nm = subprocess.run(["nm", "-n", "--defined-only", path], capture_output=True, text=True).stdout
            for line in nm.splitlines():
                parts = line.split(maxsplit=2)
                if len(parts) == 3 and parts[1] in "tTwW":
                    self.starts.append(int(parts[0], 16))
                    self.names.append(parts[2])
            headers = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout
            for line in headers.splitlines():
                fields = line.split()
                if fields and fields[0] == "LOAD":
                    self.segments.append((int(fields[1], 16), int(fields[2], 16), int(fields[4], 16)))
        except OSError:
            pass

    def name(self, file_offset):
        for offset, vaddr, size in self.segments:
            if offset <= file_offset < offset + size:
                address = file_offset - offset + vaddr
                index = bisect.bisect_right(self.starts, address) - 1
                return self.names[index] if index >= 0 else None
        return None


class Mappings:
    """The executable mappings of the recorded process (PERF_RECORD_MMAP2), to name a raw return address."""

    MMAP = re.compile(r"PERF_RECORD_MMAP2? .*\[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ (0x[0-9a-f]+|0) .*\]: r-xp (/\S+)")

    def __init__(self):
        self.maps = []
        self.symbols = {}

    def add(self, line):
        match = self.MMAP.search(line)
        if match:
            base, size, offset, path = match.groups()
            self.maps.append((int(base, 16), int(size, 16), int(offset, 16), path))

    def resolve(self, address):
        for base, size, offset, path in self.maps:
            if base <= address < base + size:
                if path not in self.symbols:
                    self.symbols[path] = Symbols(path)
                return self.symbols[path].name(address - base + offset), path
        return None, None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--deliveries", type=int, required=True)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()

    mappings = Mappings()
    by_thread = collections.Counter()
    by_owner = collections.Counter()
    by_library = collections.Counter()
    total = 0
    sample = None  # (thread, caller address or None, frames)

    def flush():
        nonlocal total, sample
        if sample is None:
            return
        thread, caller, frames = sample
        sample = None
        total += 1
        by_thread[thread] += 1
        name, path = mappings.resolve(caller) if caller is not None else (None, None)
        if name and path and not path.endswith(RUNTIME) and not PASS_THROUGH.match(name):
            owner = (name, path)
        else:
            owner = next(((s, d) for s, d in frames[1:]
                          if not d.endswith(RUNTIME) and not PASS_THROUGH.match(s)),
                         frames[-1] if frames else ("?", "?"))
        library = owner[1].rsplit("/", 1)[-1]
        by_owner[(re.sub(r"\+0x[0-9a-f]+$", "", owner[0]), library)] += 1
        by_library[library] += 1

    for line in sys.stdin:
        line = line.rstrip("\n")
        if "PERF_RECORD_MMAP" in line:
            mappings.add(line)
        elif not line:
            flush()
        elif not line.startswith(("\t", " ")):
            flush()
            # "comm tid ... caller=0x..": a thread's name may contain spaces (amqp-io publish).
            match = re.match(r"^(.*?)\s+(\d+)\s", line)
            caller = re.search(r"caller=(0x[0-9a-f]+)", line)
            sample = (f"{match.group(1).strip()}" if match else line,
                      int(caller.group(1), 16) if caller else None, [])
        elif sample is not None:
            match = re.match(r"^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)$", line)
            if match:
                sample[2].append((match.group(1), match.group(2)))
    flush()
    if total == 0:
        sys.exit("allocation-callers: no malloc samples in the recording")

    per = lambda n: n / args.deliveries
    print(f"== heap allocations (glibc malloc): {total:,} for {args.deliveries:,} deliveries: "
          f"{per(total):.1f} per delivery (the whole run) ==")
    print("-- by thread (threads of one name together) --")
    for name, count in by_thread.most_common(8):
        print(f"  {per(count):7.2f}  {100 * count / total:5.1f}%  {name}")
    print("-- by library of the code that asked --")
    for name, count in by_library.most_common(8):
        print(f"  {per(count):7.2f}  {100 * count / total:5.1f}%  {name}")
    print(f"-- by the code that asked (top {args.top}) --")
    names = [symbol for (symbol, _), _ in by_owner.most_common(args.top)]
    try:
        demangled = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(names),
                                   capture_output=True, text=True).stdout.splitlines()
    except OSError:
        demangled = names
    if len(demangled) != len(names):
        demangled = names
    for ((symbol, library), count), readable in zip(by_owner.most_common(args.top), demangled):
        print(f"  {per(count):7.2f}  {100 * count / total:5.1f}%  {readable[:120]}  [{library}]")


if __name__ == "__main__":
    main()
