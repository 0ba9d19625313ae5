"""What sampling host memory costs a process: run under libgpuleak.so (bench/host_sampling.sh), it holds
MIB MiB of its own, optionally forks a child that shares them or leaves HOLES blocks freed in malloc's
heap (each between two kept ones, so that none merge), idles SECONDS seconds while gpuleak's sampler
runs, and prints the sampler thread's CPU time as a share of one core over that time. `spawned` starts a
child with multiprocessing's spawn and measures in it while it imports this program, as spawn does
before the child's target runs: its sampler looks for the target at every sample meanwhile.

Usage: host_sampling.py MIB SECONDS alone|fork|holes|spawned [HOLES]"""

import multiprocessing
import os
import sys
import time


def sampler_cpu_ns():
    """The CPU time of this process's gpuleak sampler thread (/proc/self/task/*/schedstat, in ns)."""
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/comm") as comm:
            if comm.read().strip() == "gpuleak-sampler":
                with open(f"/proc/self/task/{task}/schedstat") as schedstat:
                    return int(schedstat.read().split()[0])
    raise SystemExit("host_sampling: no gpuleak-sampler thread (is libgpuleak.so preloaded?)")


def measure(seconds):
    before, start = sampler_cpu_ns(), time.monotonic()
    time.sleep(seconds)
    return (sampler_cpu_ns() - before) / ((time.monotonic() - start) * 1e9)


def main():
    mib, seconds, mode = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    held = bytearray(mib << 20)
    for offset in range(0, len(held), 4096):
        held[offset] = 1
    if mode == "holes":
        holes = int(sys.argv[4])
        # Past 512 bytes Python asks malloc for an object's memory.
        blocks = [bytearray(600) for _ in range(2 * holes + 1)]
        del blocks[1::2]
        print(f"process with {holes} blocks free in its heap: sampler {100 * measure(seconds):.3f}% of a core")
        return
    if mode == "spawned":
        child = multiprocessing.get_context("spawn").Process(target=print)
        child.start()
        child.join()
        return
    if mode != "fork":
        print(f"process holding {mib} MiB: sampler {100 * measure(seconds):.3f}% of a core")
        return
    child = os.fork()
    if child == 0:
        print(f"forked child sharing {mib} MiB: sampler {100 * measure(seconds):.3f}% of a core", flush=True)
        os._exit(0)
    os.waitpid(child, 0)


if __name__ == "__main__":
    main()
elif __name__ == "__mp_main__":
    # A spawned child imports the program as __mp_main__, with its parent's arguments.
    print(f"spawned child before its target: sampler {100 * measure(float(sys.argv[2])):.3f}% of a core", flush=True)
