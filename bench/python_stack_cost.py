"""The program of bench/python_stack_cost.sh: cudaMalloc/cudaFree pairs made through ctypes from a
Python stack of a given depth, timed; prints one line with the nanoseconds per pair.

Run under LD_PRELOAD=libgpuleak.so with GPULEAK_PYTHON=1 and =0, the difference per pair is what
recording the Python stack costs: the walk of the frames, the code objects' ids, and interning.

Usage: python_stack_cost.py LIBCUDART DEPTH PAIRS WARMUP
"""
import ctypes
import sys
import time


def run_pairs(cudart, pairs):
    pointer = ctypes.c_void_p()
    malloc = cudart.cudaMalloc
    free = cudart.cudaFree
    for _ in range(pairs):
        if malloc(ctypes.byref(pointer), 256) != 0:
            raise SystemExit("python_stack_cost: cudaMalloc failed")
        free(pointer)


def descend(frames_left, cudart, pairs, warmup):
    """Recurses until the stack holds the wanted Python frames, then runs the pairs from there."""
    if frames_left > 1:
        return descend(frames_left - 1, cudart, pairs, warmup)
    run_pairs(cudart, warmup)
    start = time.perf_counter_ns()
    cpu_start = time.thread_time_ns()
    run_pairs(cudart, pairs)
    return time.perf_counter_ns() - start, time.thread_time_ns() - cpu_start


def main():
    library, depth, pairs, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    cudart = ctypes.CDLL(library)
    cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    cudart.cudaFree.argtypes = [ctypes.c_void_p]
    # main, the module level and run_pairs are frames too: descend makes up the rest.
    wall, cpu = descend(depth - 3, cudart, pairs, warmup)
    print(f"python_stack_cost depth={depth} pairs={pairs} ns_per_pair={wall / pairs:.1f} "
          f"cpu_ns_per_pair={cpu / pairs:.1f}")


if __name__ == "__main__":
    main()
