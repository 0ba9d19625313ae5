"""gpuleak-report --format json against its JSON Schema, docs/reference/report.schema.json.

The reports of scenario programs run under libgpuleak.so on the simulated device (a leak, cache growth,
failed allocations, forked workers, processes killed, signalled, still running and replaced by exec, two
devices, a trace too small for its allocations, a Python program), with --live-blocks, --between and --diff,
must be valid under the schema; and the schema must name exactly the keys analyzer/render/render_json.cpp
writes, so that neither can change without the other.

ctest sets GPULEAK_TEST_LIBRARY, GPULEAK_TEST_SIMDEVICE_DIR, GPULEAK_TEST_PROGRAMS and GPULEAK_TEST_REPORT
(tests/analyzer/render/json/CMakeLists.txt).
"""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import jsonschema
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from report_schema import SCHEMA_FILE, load_schema, validation_problems  # noqa: E402
from scenario_traces import program, report, setting, traced, traced_environment  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
RENDERER_FILE = HERE.parents[3] / "analyzer" / "render" / "render_json.cpp"
# Fewer keys than this found in render_json.cpp means the extractor no longer reads how it writes them.
FEWEST_RENDERER_KEYS = 150


# Where render_json.cpp writes a key: a pair `{"key", value}` of an initializer list, or `json["key"]`.
KEY_PATTERNS = (re.compile(r'\{\s*"([A-Za-z_][A-Za-z0-9_]*)"\s*,'), re.compile(r'\[\s*"([A-Za-z_][A-Za-z0-9_]*)"\s*\]'))
# String literals (kept: a key is one) and comments (dropped: a key named in words is not written).
LITERAL_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)


def renderer_keys(source):
    """The keys the C++ `source` writes into its JSON."""
    code = LITERAL_OR_COMMENT.sub(lambda match: match.group(0) if match.group(0).startswith('"') else " ", source)
    return {key for pattern in KEY_PATTERNS for key in pattern.findall(code)}


def schema_properties(node):
    """Every property name the schema defines, wherever it defines it."""
    names = set()
    if isinstance(node, dict):
        for name, value in (node.get("properties") or {}).items():
            if value is not False:
                names.add(name)
        for value in node.values():
            names |= schema_properties(value)
    elif isinstance(node, list):
        for value in node:
            names |= schema_properties(value)
    return names


def mismatches(keys, properties):
    """(keys the renderer writes that the schema lacks, properties of the schema the renderer never writes)."""
    return sorted(keys - properties), sorted(properties - keys)


def test_the_schema_is_a_draft_2020_12_schema():
    schema = load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] and schema["title"]
    jsonschema.Draft202012Validator.check_schema(schema)


def subschemas(node, path="#"):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from subschemas(value, "%s/%s" % (path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from subschemas(value, "%s/%d" % (path, index))


def test_every_property_of_the_schema_says_in_words_what_it_is():
    # Conditions (if, then, else) only narrow properties defined, and described, beside them.
    undescribed = [
        "%s/properties/%s" % (path, name)
        for path, node in subschemas(load_schema())
        if not {"if", "then", "else"} & set(path.split("/")) and isinstance(node.get("properties"), dict)
        for name, value in node["properties"].items()
        if value is not False and not value.get("description")
    ]
    assert undescribed == []


def test_every_object_of_the_schema_forbids_keys_it_does_not_name():
    open_objects = [path for path, node in subschemas(load_schema())
                    if node.get("type") == "object" and node.get("additionalProperties") is not False]
    assert open_objects == []


def test_the_extractor_reads_both_ways_the_renderer_writes_keys_and_not_comments():
    source = '''
        // {"commented", 1} is not written
        json entry = {{"kind", "leak"}, {"pid", model.pid}};
        entry["source_name"] = frame.source_name;
        ended = {{"how", "exit"}, {"code", end.exit_code}};
    '''
    assert renderer_keys(source) == {"kind", "pid", "source_name", "how", "code"}


def test_the_renderer_writes_as_many_keys_as_the_extractor_expects():
    keys = renderer_keys(RENDERER_FILE.read_text())
    assert len(keys) >= FEWEST_RENDERER_KEYS, "only %d keys found in %s: %s" % (len(keys), RENDERER_FILE, sorted(keys))


def test_every_key_the_renderer_writes_is_a_property_of_the_schema():
    unknown, _ = mismatches(renderer_keys(RENDERER_FILE.read_text()), schema_properties(load_schema()))
    assert unknown == [], "render_json.cpp writes keys that %s does not define" % SCHEMA_FILE


def test_every_property_of_the_schema_is_a_key_the_renderer_writes():
    _, unwritten = mismatches(renderer_keys(RENDERER_FILE.read_text()), schema_properties(load_schema()))
    assert unwritten == [], "%s defines properties that render_json.cpp never writes" % SCHEMA_FILE


def test_a_key_the_renderer_writes_that_the_schema_lacks_is_reported():
    source = RENDERER_FILE.read_text().replace(
        '{"text", ended_text(model)}};', '{"text", ended_text(model)}, {"exit_reason", 1}};')
    assert mismatches(renderer_keys(source), schema_properties(load_schema())) == (["exit_reason"], [])


def test_a_property_of_the_schema_the_renderer_no_longer_writes_is_reported():
    source = RENDERER_FILE.read_text().replace('{"python_modules", ', '{"python_module_count", ')
    assert mismatches(renderer_keys(source), schema_properties(load_schema())) == (
        ["python_module_count"], ["python_modules"])


def test_a_report_that_breaks_the_schema_is_told_by_the_path_of_the_field():
    schema = load_schema()
    document = {"schema": "gpuleak-report/1", "run": {"memory_peak": None}, "processes": [{"pid": "1"}]}
    problems = validation_problems(document, schema)
    assert "$.processes[0].pid: '1' is not of type 'integer'" in problems
    assert any(problem.startswith("$.processes[0]: 'leaks' is a required property") for problem in problems)


# The scenarios: each runs programs under libgpuleak.so in a directory and returns the JSON documents of
# gpuleak-report on their traces.


def json_report(*arguments):
    return json.loads(report("--format", "json", *arguments))


def leak(directory):
    traces = traced(directory, [program("scenario_leak"), "20", "5"])
    return [json_report(*traces), json_report("--live-blocks", *traces),
            json_report("--between", "iteration 2", "iteration 9", *traces)]


def diff(directory):
    (directory / "before").mkdir()
    (directory / "after").mkdir()
    before = traced(directory / "before", [program("scenario_leak"), "20"])
    after = traced(directory / "after", [program("scenario_stable"), "20"])
    return [json_report("--diff", *before, *after), json_report("--diff", *after, *before)]


def wait_for_trace(directory, process):
    for _ in range(200):
        if list(directory.glob("trace.*")):
            # The loop's first steps, so that the trace holds some.
            time.sleep(0.3)
            return sorted(directory.glob("trace.*"))
        assert process.poll() is None
        time.sleep(0.05)
    raise AssertionError("no trace in %s" % directory)


def ended_by_the_test(directory):
    """A loop that is reported while it runs, then ended by SIGTERM from its parent; another ended by SIGKILL."""
    documents = []
    for name, signal_number in (("terminated", signal.SIGTERM), ("killed", signal.SIGKILL)):
        run_directory = directory / name
        run_directory.mkdir()
        process = subprocess.Popen([program("scenario_killed")], env=traced_environment(run_directory),
                                   cwd=run_directory)
        try:
            traces = wait_for_trace(run_directory, process)
            if signal_number == signal.SIGTERM:
                documents.append(json_report(*traces))
            process.send_signal(signal_number)
            assert process.wait(timeout=30) == -signal_number
        finally:
            process.kill()
            process.wait()
        documents.append(json_report(*traces))
    return documents


def python_program(directory):
    traces = traced(directory, [sys.executable, str(HERE / "python_program.py")], returncode=1,
                    GPULEAK_REPORT=setting("GPULEAK_TEST_REPORT"), GPULEAK_WHY="none")
    return [json_report(*traces), json_report("--native", "--live-blocks", *traces),
            json_report("--between", "epoch 0", "epoch 2", directory)]


def merged(directory):
    """Two ranks' runs, each with the report.json gpuleak run writes, read by --merge."""
    for rank in (0, 1):
        run = directory / ("vm.task%d" % rank)
        run.mkdir()
        traces = traced(run, [program("scenario_rank_device")] + (["context"] if rank else []), GPULEAK_SIM_DEVICES="2",
                        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
        (run / "report.json").write_text(report("--format", "json", *traces))
    return [json_report("--merge", directory)]


def single(command, returncode=0, **extra):
    return lambda directory: [json_report(*traced(directory, command(), returncode, **extra))]


SCENARIOS = {
    "leak": leak,
    "diff": diff,
    "cache_growth": single(lambda: [program("scenario_cache_growth"), "20"]),
    "oom": single(lambda: [program("scenario_oom")], GPULEAK_SIM_CAPACITY="64MiB"),
    "allocator_cap": single(lambda: [program("scenario_allocator_oom"), "cap"], GPULEAK_SIM_CAPACITY="256MiB"),
    "allocator_device_full": single(lambda: [program("scenario_allocator_oom"), "device"],
                                    GPULEAK_SIM_CAPACITY="64MiB"),
    "worker_leak": single(lambda: [program("scenario_worker_leak")]),
    # A forked worker that kills itself with SIGKILL near its parent's dataset, and one whose copies of its
    # parent's pages grow.
    "host_memory_killed": single(lambda: [program("scenario_host_memory"), "kill", "50"]),
    "host_memory_copy_on_write": single(lambda: [program("scenario_host_memory"), "cow", "0"]),
    # One rank of two, on the first of torchrun's machines.
    "two_devices": single(lambda: [program("scenario_two_devices"), "20", "5"], GPULEAK_SIM_DEVICES="2", RANK="1",
                          LOCAL_RANK="1", WORLD_SIZE="2", GROUP_RANK="0", TORCHELASTIC_RUN_ID="job-7"),
    # A trace too small for its live allocations: most have no slot of their own.
    "many_live": single(lambda: [program("scenario_many_live"), "50000"], GPULEAK_MAX_MB="4"),
    "raised_sigsegv": single(lambda: [program("process_end"), "log", "raise_segv"], -signal.SIGSEGV),
    "exec": single(lambda: [program("exec_child"), "log", "reexec"]),
    "ended_by_the_test": ended_by_the_test,
    "python": python_program,
    "merged": merged,
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Each scenario's documents, run once for every test that reads them."""
    setting("GPULEAK_TEST_REPORT")
    cache = {}

    def of(name):
        if name not in cache:
            cache[name] = SCENARIOS[name](tmp_path_factory.mktemp(name))
        return cache[name]

    return of


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_json_report_of_the_scenario_is_valid_under_the_schema(name, reports):
    schema = load_schema()
    for document in reports(name):
        assert validation_problems(document, schema) == [], json.dumps(document)[:2000]


UNREAD = object()


def fields(node, schema, scope, value=UNREAD):
    """The fields the schema `node` defines, as `definition.path` (`leak.held_by[].root`, `frame.line`); with
    a `value`, only those it has a value other than null in."""
    if node is False:
        return set()
    found = set()
    if "$ref" in node:
        definition = node["$ref"].rsplit("/", 1)[1]
        found |= fields(schema["$defs"][definition], schema, definition, value)
    for name, subschema in (node.get("properties") or {}).items():
        field = "%s.%s" % (scope, name)
        if subschema is False:
            continue
        if value is UNREAD:
            found |= {field} | fields(subschema, schema, field)
        elif isinstance(value, dict) and value.get(name) is not None:
            found |= {field} | fields(subschema, schema, field, value[name])
    if isinstance(node.get("items"), dict):
        for item in [UNREAD] if value is UNREAD else value if isinstance(value, list) else []:
            found |= fields(node["items"], schema, scope + "[]", item)
    for choice in node.get("anyOf") or []:
        if value is UNREAD or value is not None and choice.get("type") != "null":
            found |= fields(choice, schema, scope, value)
    return found


# What no scenario here writes a value into, and why; anything else the schema defines, some scenario must.
NOT_WRITTEN_HERE = {
    "diagnosis.framework_pool": "a framework's own pool: tests/jax, tests/tensorflow",
    "diagnosis.framework_allocator": "a framework's allocator: tests/jax, tests/tensorflow",
    "role.worker_id": "a DataLoader worker: tests/torch",
    "diagnosis.pressure": "a run near the memory cgroup's limit or the machine's memory",
    "report.job": "a job of several ranks: tests/launcher/test_launcher.cpp, tests/analyzer/report",
}
# Host figures that the machine's kernel, cgroup or swap decide.
MACHINE_DEPENDENT = re.compile(r"(uss|pss|swap|cgroup|cgroup_limit|available|shmem)_bytes$|memory_peak")


def test_the_scenarios_together_write_a_value_into_every_field_of_the_schema(reports):
    schema = load_schema()
    defined = set()
    for definition in ("report", "changes"):
        defined |= fields(schema["$defs"][definition], schema, definition)
    documents = [document for scenario in SCENARIOS for document in reports(scenario)]
    written = set()
    for document in documents:
        definition = "changes" if document["schema"] == "gpuleak-changes/1" else "report"
        written |= fields(schema["$defs"][definition], schema, definition, document)
    assert written <= defined
    unwritten = sorted(field for field in defined - written
                       if not MACHINE_DEPENDENT.search(field) and not field.startswith(tuple(NOT_WRITTEN_HERE)))
    print("%d of the schema's %d fields written, by %d documents" % (len(written), len(defined), len(documents)))
    assert unwritten == [], unwritten
