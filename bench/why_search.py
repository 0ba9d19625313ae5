"""How fast gpuleak.why() searches a heap: a program's objects, built here as training scripts hold theirs
(a list of records, each a dict of lists and a small object), reachable from __main__'s globals, and
every module's globals after them. The search is given a block no object lies in, so that it goes through
all of it, as it does when some of the sites' memory is held by C++ code; no library, trace or report is
involved (the search is what the time limit bounds).

usage: python bench/why_search.py [OBJECTS...]   (default 100000 1000000)
Prints one line per heap: objects searched, seconds, objects per second.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from gpuleak import _why  # noqa: E402
from gpuleak._why import _search, _sites  # noqa: E402


class Record:
    def __init__(self, step):
        self.step = step
        self.metrics = {"loss": [float(step)], "accuracy": [0.5]}


def heap(objects):
    # Each record is about five objects: itself, its __dict__, the metrics dict and its two lists.
    return [Record(step) for step in range(objects // 5)]


def search(limit_s=600.0):
    blocks = _sites.BlockIndex()
    blocks.add(0, [[1, 1]])
    result = _why.Why(pid=os.getpid(), trace=None, sites=[_why.Site("nowhere", 1, 1, False)])
    started = time.monotonic()
    _search.Search(blocks, result, started + limit_s).run()
    return result.objects_searched, time.monotonic() - started


if __name__ == "__main__":
    import gc

    for objects in [int(argument) for argument in sys.argv[1:]] or [100_000, 1_000_000]:
        records = heap(objects)
        gc.disable()
        searched, seconds = search()
        gc.enable()
        print(
            "why_search python=%d.%d heap=%d searched=%d seconds=%.3f objects_per_second=%.0f"
            % (sys.version_info[0], sys.version_info[1], objects, searched, seconds, searched / seconds)
        )
        del records
