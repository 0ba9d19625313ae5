"""How large gpuleak-report's HTML page gets, how long it takes to make, and how long a browser takes to
open it, on the report benchmark's traces (bench_report_workload: 256 call stacks, one marker per
hundredth of the run, a slow leak): one process of each size of EVENTS, and PROCESSES processes of the
first size in one directory. The browser is Debian's Chromium, headless, at 1280x800, driven as the
HTML tests drive it (tests/analyzer/render/html/devtools_browser.py); the time is from the navigation to
the page's load event, after which the page has drawn everything (its script runs before it). A
benchmark, not a test: it prints figures and checks nothing about them. Figures in bench/README.md.

usage: python3.12 bench/html_page.py        (under the interpreter scripts/setup.sh gives websocket-client)
environment: EVENTS (default "1000000 20000000"), PROCESSES (default 16), REPS (page loads per page,
default 5; the median is printed), BUILD (build tree, default build/), CHROMIUM (default chromium)
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "tests", "analyzer", "render", "html"))
from devtools_browser import Browser  # noqa: E402

build = os.environ.get("BUILD", os.path.join(root, "build"))
sizes = [int(size) for size in os.environ.get("EVENTS", "1000000 20000000").split()]
processes = int(os.environ.get("PROCESSES", "16"))
reps = int(os.environ.get("REPS", "5"))
chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")


def trace(directory, events):
    environment = dict(
        os.environ,
        LD_PRELOAD=os.path.join(build, "interpose", "libgpuleak.so"),
        LD_LIBRARY_PATH=os.path.join(build, "simdevice"),
        GPULEAK_OUTPUT=os.path.join(directory, "trace.%p"),
        GPULEAK_QUIET="1",
        GPULEAK_SIM_QUIET="1",
    )
    subprocess.run(
        [os.path.join(build, "bench", "bench_report_workload"), "cuda", "--pairs", str(events // 2), "--keep-every", "1000"],
        env=environment,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def page_of(directory):
    page = os.path.join(directory, "report.html")
    started = time.monotonic()
    subprocess.run(
        [os.path.join(build, "analyzer", "gpuleak-report"), "--format", "html", "-o", page, directory],
        check=True,
        stderr=subprocess.DEVNULL,
    )
    return page, time.monotonic() - started


def load_time(browser, page):
    times = []
    for _ in range(reps):
        started = time.monotonic()
        opened = browser.open("file://" + page)
        times.append(time.monotonic() - started)
        drawn = opened.evaluate("document.querySelectorAll('svg.flame rect').length")
        assert drawn > 0, "the page drew no flame graph"
        opened.close()
    return statistics.median(times), min(times), max(times)


def main():
    with tempfile.TemporaryDirectory() as work:
        cases = []
        for events in sizes:
            directory = os.path.join(work, "events_%d" % events)
            os.mkdir(directory)
            trace(directory, events)
            cases.append(("1 process, %d events" % events, directory))
        directory = os.path.join(work, "processes")
        os.mkdir(directory)
        for _ in range(processes):
            trace(directory, sizes[0])
        cases.append(("%d processes, %d events each" % (processes, sizes[0]), directory))
        browser = Browser(chromium, os.path.join(work, "profile"))
        try:
            for name, directory in cases:
                page, made_s = page_of(directory)
                median, low, high = load_time(browser, page)
                print(
                    "html_page %s: %.2f MB, made in %.2f s, opened in %.2f s (median of %d, %.2f-%.2f)"
                    % (name, os.path.getsize(page) / 1e6, made_s, median, reps, low, high)
                )
        finally:
            browser.close()


if __name__ == "__main__":
    main()
