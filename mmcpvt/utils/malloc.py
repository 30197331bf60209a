"""Keep freed memory in the process on glibc (CPU runs).

A transformer forward on the CPU allocates and frees tensors of several
MiB per layer. glibc's ``malloc`` serves those from fresh ``mmap`` pages or
gives the top of its heap back to the system once more than its (dynamic)
trim threshold is free; either way the next allocation of the same size
faults every page in again, and zeroing those pages can take longer than
the arithmetic: on this project's CPU machine mmpretrain's DeiT-Ti forward
at batch 16 took about 15 000 minor page faults and ran at 73 img/s,
against none and 84 img/s with freed memory retained (docs/benchmarks.md).
Which tensors fault depends on the exact sequence of allocations, so two
implementations of the same model can differ by 10 % for this reason alone.

``retain_freed_memory()`` fixes both thresholds, as the allocators that
PyTorch's CPU performance guide recommends (jemalloc, tcmalloc) do in
effect: freed blocks stay in the heap and are reused. The cost is that the
process keeps its peak heap size. It changes process-wide settings, so
mmcpvt never calls it on import; the benchmark tool offers it
(``--malloc retain``) to take the allocator out of a comparison.
"""
import ctypes
import ctypes.util

# glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def retain_freed_memory(mmap_threshold: int = 32 * 2**20,
                        trim_threshold: int = 2**30) -> bool:
    """Serve allocations up to ``mmap_threshold`` bytes from the heap and
    return freed heap memory to the system only above ``trim_threshold``.

    Returns False (and changes nothing) where the C library is not glibc.
    """
    name = ctypes.util.find_library('c')
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # glibc only
    except (OSError, AttributeError, TypeError):
        return False
    # glibc caps the mmap threshold at 32 MiB on 64-bit systems (it rejects
    # larger values); both calls return 1 on success.
    return bool(mallopt(M_MMAP_THRESHOLD, int(mmap_threshold))
                and mallopt(M_TRIM_THRESHOLD, int(trim_threshold)))
