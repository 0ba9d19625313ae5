"""A first run on a user's own script, usually one that just failed: set-up is never a leak, whatever
share of the program it was, and what ended the program comes first. Each leaking script of the workload
corpus, cut off after its set-up (the model made, before the loop that leaks; in a search, the first
trial's model), ends there with an exception or is killed with SIGKILL, and is reported without a leak;
the exception, with the line that raised it, before the verdict.

Environment: that of test_workloads.py.
"""

import ast
import os
import shutil
import sys

import pytest
from test_workloads import (
    CAPACITY,
    CORRECT_OF,
    COUNTERS_MODULE,
    DEFAULT_CAPACITY,
    WORKLOADS,
    main_process,
    run_script,
    skip_without_its_packages,
)
from test_workloads import pytestmark as workload_marks
from test_torch_adapter import adapter_cache  # noqa: F401 (a fixture)

pytestmark = workload_marks

ENDINGS = {
    "exception": 'raise ValueError("the batches are not what the model expects")',
    "sigkill": "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
}


def cut_after_set_up(name, ending):
    """The corpus script `name` with the statement `ending` where its set-up ends: before its first loop at
    the top level, or, where the model is made inside that loop (a search's trials), right after the first
    model is made; where a framework runs the loop (Lightning), as the first step's first statement. What
    follows it never runs."""
    with open(os.path.join(WORKLOADS, name)) as script:
        source = script.read()
    tree = ast.parse(source)
    lines = source.splitlines()
    loop = next((node for node in tree.body if isinstance(node, ast.For)), None)
    if loop is None:
        step = next(
            node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "training_step"
        )
        first = step.body[0]
        cut, indent = first.lineno - 1, " " * first.col_offset
        return "\n".join(lines[:cut] + [indent + ending] + lines[cut:]) + "\n"
    model = min(
        (
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == "model" for target in node.targets)
        ),
        key=lambda node: node.lineno,
    )
    if model.lineno < loop.lineno:
        cut, indent = loop.lineno - 1, ""
    else:
        cut, indent = model.end_lineno, " " * model.col_offset
    return "\n".join(lines[:cut] + [indent + ending] + lines[cut:]) + "\n"


@pytest.mark.parametrize("ending", sorted(ENDINGS))
@pytest.mark.parametrize("workload", sorted(CORRECT_OF))
def test_a_leaking_script_cut_off_after_its_set_up_has_no_leak(tmp_path, adapter_cache, workload, ending):
    skip_without_its_packages(workload)
    script = tmp_path / workload
    script.write_text(cut_after_set_up(workload, ENDINGS[ending]))
    shutil.copy(os.path.join(WORKLOADS, COUNTERS_MODULE), tmp_path)
    run = run_script(tmp_path, str(script), adapter_cache, True, CAPACITY.get(workload, DEFAULT_CAPACITY))
    assert run.returncode != 0, "the cut script ends as it was cut"
    process = main_process(tmp_path)
    assert any(device["peak_allocated_bytes"] > 0 for device in process["summary"]["devices"]), (
        "the set-up made its model on the device"
    )
    diagnosis = process["diagnosis"]
    assert diagnosis["kind"] == "stable", diagnosis["text"]
    assert process["growth"] == process["spent_graphs"] == process["kept_for_backward"] == []
    if ending == "sigkill":
        assert process["error"] is None
        assert "was killed by SIGKILL" in run.stderr
        return
    # The exception that ended it is the news, at the line that raised it, before the verdict.
    error = process["error"]
    assert error["type"] == "ValueError"
    where = error["frames"][error["program_frame"]]
    assert where["file"] == str(script)
    assert script.read_text().splitlines()[where["line"] - 1].strip() == ENDINGS["exception"]
    # The summary's lines are wrapped at 100 columns.
    summary = run.stderr.replace("\n         ", " ")
    said = "gpuleak: the program ended with ValueError: the batches are not what the model expects, at %s:%d in" % (
        script,
        where["line"],
    )
    assert said in summary
    assert summary.index(said) < summary.index("gpuleak: diagnosis: stable")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
