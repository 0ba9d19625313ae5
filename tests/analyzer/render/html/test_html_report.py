"""gpuleak-report --format html in a real browser: Debian's Chromium, headless, through DevTools.

Scenario programs run under libgpuleak.so on the simulated device; the page of each report must load
from its file with no request, no console message and no error; its timeline must draw the JSON
report's values; its flame graph's root must be what the process holds; a click on a box must list the
box's sites; a stretch dragged across the timeline must list what it made. Each page is kept as a
screenshot, light and dark, 1280x800, in GPULEAK_TEST_ARTIFACTS.

ctest sets GPULEAK_TEST_LIBRARY, GPULEAK_TEST_SIMDEVICE_DIR, GPULEAK_TEST_PROGRAMS, GPULEAK_TEST_REPORT,
GPULEAK_TEST_CHROMIUM and GPULEAK_TEST_ARTIFACTS (tests/analyzer/render/html/CMakeLists.txt).
"""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from devtools_browser import Browser  # noqa: E402
from scenario_traces import program, report, setting, traced, traced_environment  # noqa: E402

MiB = 1 << 20

PYTHON_SCRIPT = textwrap.dedent(
    """\
    import ctypes, os

    cudart = ctypes.CDLL(os.path.join(os.environ["SIMDEVICE_DIR"], "libcudart.so.13"))
    cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    kept = []

    def train_step(step):
        pointer = ctypes.c_void_p()
        assert cudart.cudaMalloc(ctypes.byref(pointer), 3 << 20) == 0
        kept.append(pointer)

    for step in range(12):
        train_step(step)
    """
)


SCENARIOS = {
    # Steps of 5 ms: a hundredth of the run is shorter than a step.
    "leak": lambda d: traced(d, [program("scenario_leak"), "20", "5"]),
    "cache_growth": lambda d: traced(d, [program("scenario_cache_growth"), "20"]),
    "oom": lambda d: traced(d, [program("scenario_oom")], GPULEAK_SIM_CAPACITY="64MiB"),
    "worker_leak": lambda d: traced(d, [program("scenario_worker_leak")]),
    "python": lambda d: traced(d, [sys.executable, str(d / "train.py")]),
    "two_devices": lambda d: traced(d, [program("scenario_two_devices"), "20", "5"], GPULEAK_SIM_DEVICES="2"),
    # A trace too small for its live allocations: most have no slot of their own.
    "many_live": lambda d: traced(d, [program("scenario_many_live"), "50000"], GPULEAK_MAX_MB="4"),
    # More processes than the page draws: 69 stable ones and one that leaks.
    "many_processes": lambda d: many_processes(d, 69),
    "job": lambda d: job(d, 8),
}


def many_processes(directory, stable):
    for _ in range(stable):
        traced(directory, [program("scenario_stable")], GPULEAK_MAX_MB="4")
    return traced(directory, [program("scenario_leak"), "20"], GPULEAK_MAX_MB="4")


def job(directory, ranks):
    """A job of `ranks` ranks, a device each, in which rank 3 leaks, rank 5 only makes a context on device 0
    before it picks its own, and the others allocate there first."""
    for rank in range(ranks):
        if rank == 3:
            command = [program("scenario_leak"), "30"]
        else:
            command = [program("scenario_rank_device")] + (["context"] if rank == 5 else [])
        traced(directory, command, GPULEAK_SIM_DEVICES=str(ranks), RANK=str(rank), LOCAL_RANK=str(rank),
               WORLD_SIZE=str(ranks))
    return sorted(directory.glob("trace.*"))


def drawn_in_page(document, page):
    """The JSON report's processes that the page draws, in its order."""
    pids = page.evaluate("[...document.querySelectorAll('section[data-pid]')].map((s) => Number(s.dataset.pid))")
    by_pid = {process["pid"]: process for process in document["processes"]}
    return [by_pid[pid] for pid in pids]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    setting("GPULEAK_TEST_REPORT")
    chromium = Browser(setting("GPULEAK_TEST_CHROMIUM"), tmp_path_factory.mktemp("chromium-profile"))
    yield chromium
    chromium.close()


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def scenario(request, tmp_path_factory, browser):
    """A scenario's traces, its JSON report, and its HTML page open in the browser."""
    directory = tmp_path_factory.mktemp(request.param)
    (directory / "train.py").write_text(PYTHON_SCRIPT)
    traces = SCENARIOS[request.param](directory)
    document = json.loads(report("--format", "json", *traces))
    page_file = directory / "report.html"
    report("--format", "html", "-o", page_file, *traces)
    page = browser.open(page_file.as_uri())
    yield request.param, document, page, page_file
    page.close()


def problems_of(browser, page, page_file):
    """What went wrong on the page: exceptions, console messages, logged errors and warnings, requests."""
    problems = []
    for event in browser.events(page.session):
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            problems.append(params["exceptionDetails"])
        elif method == "Runtime.consoleAPICalled":
            problems.append((params["type"], params.get("args")))
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            problems.append(params["entry"])
        elif method == "Network.requestWillBeSent" and params["request"]["url"] != page_file.as_uri():
            problems.append(params["request"]["url"])
        elif method == "Network.loadingFailed":
            problems.append(params)
    return problems


def test_the_page_loads_from_its_file_alone_without_a_message(scenario, browser):
    name, document, page, page_file = scenario
    assert page_file.stat().st_size < 5 * MiB
    assert problems_of(browser, page, page_file) == []
    # The sites' frames are the page's, each once, not each drawn process's.
    frames, distinct, per_process = page.evaluate(
        "(() => { const data = JSON.parse(document.getElementById('gpuleak-data').textContent);"
        " return [data.frames.length, new Set(data.frames.map((f) => JSON.stringify(f))).size,"
        " data.processes.some((p) => p.pictures && 'frames' in p.pictures)]; })()"
    )
    assert frames > 0 and distinct == frames and not per_process
    sections = page.evaluate("[...document.querySelectorAll('section[data-pid]')].map((s) => Number(s.dataset.pid))")
    every_pid = [process["pid"] for process in document["processes"]]
    if len(every_pid) <= 64:
        assert sections == every_pid
    else:
        # The page draws 64 in the report's order, the leak among them, and lists them all.
        assert len(sections) == 64 and sections == [pid for pid in every_pid if pid in sections]
        leaking = [process["pid"] for process in document["processes"] if process["diagnosis"]["kind"] == "leak"]
        assert leaking and set(leaking) <= set(sections)
        rows = page.evaluate("[...document.querySelectorAll('tbody tr[data-drawn]')].map((r) => r.dataset.drawn)")
        assert len(rows) == len(every_pid) and rows.count("true") == 64
        assert "the other %d are in the table only" % (len(every_pid) - 64) in page.evaluate("document.body.innerText")
    artifacts = pathlib.Path(setting("GPULEAK_TEST_ARTIFACTS"))
    artifacts.mkdir(parents=True, exist_ok=True)
    page.screenshot(artifacts / ("%s-light.png" % name))
    dark = browser.open(page_file.as_uri(), dark=True)
    try:
        background = dark.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(22, 22, 22)"
        assert problems_of(browser, dark, page_file) == []
        dark.screenshot(artifacts / ("%s-dark.png" % name))
    finally:
        dark.close()


DRAWN = """[...document.querySelectorAll('section[data-pid]')].map((section) => ({
  pid: Number(section.dataset.pid),
  charts: [...section.querySelectorAll('svg.timeline')].map((chart) => {
    const series = {};
    for (const line of chart.querySelectorAll('polyline[data-series]'))
      series[line.dataset.series] = [...line.points].map((p) => [p.x, p.y]);
    return {end: Number(chart.dataset.endS), highest: Number(chart.dataset.highestBytes),
            left: Number(chart.dataset.left), top: Number(chart.dataset.top),
            width: Number(chart.dataset.plotWidth), height: Number(chart.dataset.plotHeight), series};
  }),
}))"""


def wanted_charts(process):
    """The series each timeline of a process must draw: the process's, then one per device where it used
    more than one."""
    devices = process["summary"]["devices"]

    def driver(device):
        return [(p["t_s"], p["bytes"]) for p in device["driver_used"]]

    first = {
        "reserved": [(p["t_s"], p["reserved_bytes"]) for p in process["timeline"]],
        "allocated": [(p["t_s"], p["allocated_bytes"]) for p in process["timeline"]],
        "rss": [(p["t_s"], p["rss_bytes"]) for p in process["host"]["timeline"] if p["rss_bytes"] is not None],
        "driver": driver(devices[0]) if len(devices) == 1 else [],
    }
    charts = [first]
    if len(devices) > 1:
        for device in devices:
            charts.append({
                "reserved": [(p["t_s"], p["reserved_bytes"]) for p in device["timeline"]],
                "allocated": [(p["t_s"], p["allocated_bytes"]) for p in device["timeline"]],
                "driver": driver(device),
            })
    return charts


def test_the_timeline_draws_the_values_of_the_json_report(scenario):
    name, document, page, _ = scenario
    for drawn_process, process in zip(page.evaluate(DRAWN), drawn_in_page(document, page)):
        assert drawn_process["pid"] == process["pid"]
        charts = wanted_charts(process)
        assert len(drawn_process["charts"]) == len(charts)
        if name == "two_devices":
            assert len(charts) == 3 and all(chart["driver"] for chart in charts[1:])
        for drawn, wanted in zip(drawn_process["charts"], charts):
            for key, points in wanted.items():
                # Steps: point i is vertex 2i, and the vertex between two points holds the earlier value.
                vertices = drawn["series"].get(key, [])
                assert len(vertices) == max(2 * len(points) - 1, 0), key
                for index in range(1, len(points)):
                    assert vertices[2 * index - 1][0] == vertices[2 * index][0], key
                    assert vertices[2 * index - 1][1] == vertices[2 * index - 2][1], key
                for (x, y), (t, value) in zip(vertices[::2], points):
                    t_drawn = (x - drawn["left"]) / drawn["width"] * drawn["end"]
                    value_drawn = (drawn["top"] + drawn["height"] - y) / drawn["height"] * drawn["highest"]
                    assert abs(t_drawn - t) <= drawn["end"] * 1e-4, (key, t, t_drawn)
                    assert abs(value_drawn - value) <= drawn["highest"] * 1e-4 + 1, (key, value, value_drawn)


def test_the_flame_graph_root_is_what_the_process_holds(scenario):
    _, document, page, _ = scenario
    roots = page.evaluate(
        "[...document.querySelectorAll('section[data-pid]')].map((s) => "
        "Number(s.querySelector('svg.flame').dataset.rootBytes))"
    )
    for root, process in zip(roots, drawn_in_page(document, page)):
        summary = process["summary"]
        # What the program holds at the end, and with a caching allocator what it keeps cached besides.
        held = summary["final_reserved_bytes"] if summary["allocator_reports_blocks"] else summary["final_allocated_bytes"]
        assert root == held
    # At the peak: what was allocated then (these programs hold device memory only).
    peaks = page.evaluate(
        "[...document.querySelectorAll('section[data-pid]')].map((s) => {"
        " const peak = [...s.querySelectorAll('button.state')].find((b) => b.textContent.startsWith('the peak at '));"
        " if (!peak) return null; peak.click(); const root = Number(s.querySelector('svg.flame').dataset.rootBytes);"
        " s.querySelector('button.state').click(); return root; })"
    )
    for root, process in zip(peaks, drawn_in_page(document, page)):
        if process["summary"]["peak_allocated_bytes"] == 0:
            assert root is None
            continue
        # The summary adds up each device's own peak; the moment of the peak is when all of them together
        # held the most, which these scenarios' timelines (too few points to be thinned) show.
        if len(process["summary"]["devices"]) == 1:
            assert root == process["summary"]["peak_allocated_bytes"]
        else:
            assert root == max(point["allocated_bytes"] for point in process["timeline"])


def center_of(page, selector):
    """Scrolls the element into view and returns the middle of its box on the screen."""
    box = page.evaluate(
        "(() => { const e = document.querySelector(%s); e.scrollIntoView({block: 'center'});"
        " const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()" % json.dumps(selector)
    )
    return box[0] + box[2] / 2, box[1] + box[3] / 2, box


def test_a_click_on_a_box_of_the_flame_graph_lists_its_sites(scenario, browser):
    name, _, page, page_file = scenario
    if name != "leak":
        pytest.skip("the leak scenario's sites are known")
    x, y, _ = center_of(page, "svg.flame rect[data-label^='keep_history  scenario_leak.cpp:']")
    page.click(x, y)
    details = page.evaluate("document.querySelector('.details').innerText")
    assert re.search(r"20\.0 MiB in 20 device allocations made at keep_history +scenario_leak\.cpp:\d+", details)
    assert re.search(r"\nkeep_history  scenario_leak\.cpp:\d+\nmain  scenario_leak\.cpp:\d+\n", details)
    # Zoomed in: the box is the top of the graph now; a click on it zooms out a level.
    top = "document.querySelector('svg.flame rect').dataset.label"
    assert page.evaluate(top).startswith("keep_history ")
    x, y, _ = center_of(page, "svg.flame rect")
    page.click(x, y)
    assert page.evaluate(top).startswith("main ")
    assert problems_of(browser, page, page_file) == []


def stretch_table(page):
    """The stretch's rows: [site, still alive, made, freed]."""
    return page.evaluate(
        "[...document.querySelectorAll('.stretch tbody tr')].map((row) => [row.dataset.site,"
        " ...[...row.querySelectorAll('td[data-bytes]')].map((cell) => Number(cell.dataset.bytes))])"
    )


def stretch_rows(page):
    """The stretch's sites, by function: [still alive, made, freed]."""
    return {row[0].split()[0]: row[1:] for row in stretch_table(page)}


def drag_across(page, t_from=None, t_to=None):
    """Drags across the first timeline from t_from to t_to (seconds; the whole run by default)."""
    _, _, box = center_of(page, "svg.timeline")
    chart = page.evaluate(DRAWN)[0]["charts"][0]
    scale = box[2] / 1180  # the chart's viewBox width
    y = box[1] + box[3] / 2

    def screen_x(t):
        return box[0] + (chart["left"] + t / chart["end"] * chart["width"]) * scale

    start = screen_x(t_from) if t_from is not None else screen_x(0) + 1
    end = screen_x(t_to) if t_to is not None else screen_x(chart["end"]) - 1
    page.drag((start, y), (end, y))


def test_a_stretch_dragged_across_the_timeline_lists_what_it_made(scenario, browser):
    name, document, page, page_file = scenario
    if name != "leak":
        pytest.skip("the leak scenario's sites are known")
    # The whole run: everything still alive, and the steps' scratch buffers made and freed.
    drag_across(page)
    rows = stretch_rows(page)
    assert rows["keep_history"] == [20 * MiB, 20 * MiB, 0]
    assert rows["main"] == [32 * MiB, 32 * MiB, 0]
    assert rows["step"] == [0, 20 * 8 * MiB, 20 * 8 * MiB]

    # From the marker of iteration 10 on: the history kept from then, and not the weights made before
    # the loop. The stretch is the run's hundredths it touches, so it may take in a step before the
    # marker too.
    marker = next(m["t_s"] for m in document["processes"][0]["markers"] if m["label"] == "iteration 10")
    drag_across(page, marker)
    rows = stretch_rows(page)
    assert 10 * MiB <= rows["keep_history"][0] < 20 * MiB
    assert "main" not in rows
    assert problems_of(browser, page, page_file) == []


def test_a_stretch_counts_what_is_alive_without_a_slot_of_its_own(scenario, browser):
    name, document, page, page_file = scenario
    if name != "many_live":
        pytest.skip("the scenario whose live allocations outgrew the trace")
    (process,) = document["processes"]
    assert process["summary"]["exactness"]["spilled"] > 0
    # The whole run made everything the program still holds: its blocks, one by one or by site.
    drag_across(page)
    rows = stretch_table(page)
    assert len(rows) < 25, "the table lists every site"
    assert sum(live for _, live, _, _ in rows) == process["summary"]["final_allocated_bytes"]
    notes = page.evaluate("[...document.querySelectorAll('.stretch p.muted')].map((p) => p.textContent).join(' ')")
    assert "counted as if made evenly" in notes
    assert problems_of(browser, page, page_file) == []


def test_what_changed_between_two_markers_is_drawn_as_bars_then_and_now(scenario, browser):
    name, _, _, page_file = scenario
    if name != "leak":
        pytest.skip("the leak scenario's markers are known")
    changes = page_file.parent / "changes.html"
    traces = sorted(page_file.parent.glob("trace.*"))
    report("--format", "html", "-o", changes, "--between", "iteration 2", "iteration 9", *traces)
    page = browser.open(changes.as_uri())
    try:
        assert problems_of(browser, page, changes) == []
        drawn = page.evaluate(
            "[...document.querySelectorAll('section.change')].map((s) => [Number(s.dataset.changeBytes),"
            " ...[...s.querySelectorAll('rect[data-bytes]')].map((r) => Number(r.dataset.bytes)), s.querySelector('.frames').innerText])"
        )
        ((change, before, after, frames),) = drawn
        assert (change, before, after) == (7 * MiB, 2 * MiB, 9 * MiB)
        assert frames.startswith("keep_history  scenario_leak.cpp:")
    finally:
        page.close()


def test_a_process_a_signal_ended_says_so_with_who_sent_it_before_its_diagnosis(tmp_path, browser):
    script = tmp_path / "wait.py"
    script.write_text(PYTHON_SCRIPT + "print('ready', flush=True)\nimport time\ntime.sleep(120)\n")
    child = subprocess.Popen([sys.executable, str(script)], env=traced_environment(tmp_path), cwd=tmp_path,
                             stdout=subprocess.PIPE, universal_newlines=True)
    assert child.stdout.readline() == "ready\n"
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=60) == -signal.SIGTERM
    child.stdout.close()
    page_file = tmp_path / "report.html"
    report("--format", "html", "-o", page_file, *sorted(tmp_path.glob("trace.*")))
    page = browser.open(page_file.as_uri())
    try:
        said = page.evaluate(
            "[...document.querySelectorAll('section[data-pid] .diagnosis')].map((d) => d.textContent)")
    finally:
        page.close()
    assert said[0].startswith("Killed by signal 15 (SIGTERM) after "), said
    assert said[0].endswith(": sent by pid %d (%s), its parent" % (os.getpid(), own_command_name())), said
    # Then the verdict, as for any process.
    assert re.match(r"(leak|stable|cache growth|host ram growth|outside allocators|incomplete): ", said[1]), said


def test_a_job_draws_a_bar_per_rank_and_says_what_the_text_says(tmp_path, browser):
    traces = job(tmp_path, 8)
    document = json.loads(report("--format", "json", *traces))
    text = report("--no-color", *traces)
    page_file = tmp_path / "report.html"
    report("--format", "html", "-o", page_file, *traces)
    page = browser.open(page_file.as_uri())
    try:
        assert problems_of(browser, page, page_file) == []
        bars = page.evaluate("[...document.querySelectorAll('section.job rect.rank-peak')].map((bar) => "
                             "({rank: Number(bar.dataset.rank), height: bar.height.baseVal.value, "
                             "classes: [...bar.classList]}))")
        findings = page.evaluate("[...document.querySelectorAll('section.job p.diagnosis')].map((p) => p.textContent)")
        shared = page.evaluate("document.querySelector('section.shared-devices').innerText")
    finally:
        page.close()
    ranks = document["job"]["ranks"]
    assert [bar["rank"] for bar in bars] == [row["rank"] for row in ranks] == list(range(8))
    # Heights in proportion to the peaks, the leaking rank in the failure colour.
    highest = max(row["peak_reserved_bytes"] for row in ranks)
    tallest = max(bar["height"] for bar in bars)
    for bar, row in zip(bars, ranks):
        assert abs(bar["height"] - tallest * row["peak_reserved_bytes"] / highest) < 0.5
        assert ("leak" in bar["classes"]) == (row["diagnosis"] == "leak")
    assert "leak" in bars[3]["classes"]
    # What the text report says after its table, sentence for sentence; many intruders told as one.
    assert findings and all(" ".join(finding.split()) in " ".join(text.split()) for finding in findings)
    assert any(finding.startswith("5 ranks (ranks 1, 2, 4, 6 and 7) made contexts or memory on another rank's "
                                  "device of their machine (first at main (") for finding in findings), findings
    assert any(finding.startswith("Rank 5 made a context or memory on another rank's device of its machine (first "
                                  "at main (") for finding in findings), findings
    # Device 0 was every rank's: rank 0's own, the others' before they picked theirs.
    assert "Device 0 on " in shared and "was used by 8 processes" in shared


def test_the_page_of_merged_reports_draws_the_job_and_lists_every_process(tmp_path, browser):
    for rank in range(3):
        run = tmp_path / ("vm.task%d" % rank)
        run.mkdir()
        command = [program("scenario_leak"), "30"] if rank == 2 else [program("scenario_rank_device")]
        traces = traced(run, command, GPULEAK_SIM_DEVICES="3", RANK=str(rank), LOCAL_RANK=str(rank),
                        WORLD_SIZE="3")
        (run / "report.json").write_text(report("--format", "json", *traces))
    page_file = tmp_path / "merged.html"
    report("--merge", "--format", "html", "-o", page_file, tmp_path)
    page = browser.open(page_file.as_uri())
    try:
        assert problems_of(browser, page, page_file) == []
        bars = page.evaluate("document.querySelectorAll('section.job rect.rank-peak').length")
        rows = page.evaluate("[...document.querySelectorAll('tbody tr[data-drawn]')].map((r) => r.dataset.drawn)")
        findings = page.evaluate("[...document.querySelectorAll('section.job p.diagnosis')].map((p) => p.textContent)")
    finally:
        page.close()
    assert bars == 3
    # Each machine's own page draws its processes: the merged one lists them.
    assert rows == ["false"] * 3
    assert any(finding.startswith("Only rank 2 leaks") for finding in findings), findings


def own_command_name():
    with open("/proc/self/comm") as comm:
        return comm.read().rstrip("\n")
