"""gpuleak.why() on the ways training scripts keep GPU memory alive (tests/torch/why/scenarios.py), with
real PyTorch under `gpuleak run`: it names the script's own root that holds the memory (the list, the
dict, the tensor, the traceback), how many bytes it holds and through what, names PyTorch's own holders
(a model's parameters, an optimizer's state) as such, and keeps nothing alive once it has answered.

Environment: that of test_workloads.py.
"""

import json
import os
import re

import pytest
from test_torch_adapter import MiB, adapter_cache  # noqa: F401 - a fixture
from test_workloads import HERE, run_script
from test_workloads import pytestmark as workload_marks

pytestmark = workload_marks
SCENARIOS = os.path.join(HERE, "why", "scenarios.py")
OUT_OF_MEMORY = os.path.join(HERE, "why", "out_of_memory.py")
STEPS = 12
# A forward pass of the scenarios' model on a batch: the input (512 x 256), the first layer's output and
# its ReLU (512 x 1024 each), in float32.
BATCH = 512 * 256 * 4
HIDDEN = 512 * 1024 * 4


@pytest.fixture(scope="module")
def answers(tmp_path_factory, adapter_cache):  # noqa: F811 - the fixture
    directory = tmp_path_factory.mktemp("why")
    completed = run_script(directory, SCENARIOS, adapter_cache, traced=True)
    assert completed.returncode == 0, completed.stderr[-4000:]
    lines = [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    answers = {line["scenario"]: line for line in lines}
    answers["report.txt"] = (directory / "run" / "report.txt").read_text()
    return answers


def holder(answer, name):
    """The holder whose root is the script's `name`."""
    (found,) = [entry for entry in answer["holders"] if entry["root"].startswith("`%s`," % name)]
    return found


def check_common(answer):
    assert answer["problem"] is None, answer["problem"]
    # Nothing of it stays alive once the scenario lets go: why() kept no tensor.
    assert answer["released"], answer["text"]
    # The model the scenarios share is named as what it is.
    model = holder(answer, "model")
    assert "parameter" in model["through"] and model["owner"] == "Sequential"
    assert "the parameters" in answer["text"] and "of a Sequential" in answer["text"]


@pytest.mark.parametrize(
    "scenario, root, description, through, at_least",
    [
        # Each step's graph: the batch and the activations it saved, for every step kept.
        ("losses_append", "losses", "a list with 12 items in __main__", "autograd graph", STEPS * (BATCH + HIDDEN)),
        ("total_loss", "total_loss", "a tensor in __main__", "autograd graph", STEPS * (BATCH + HIDDEN)),
        ("cache", "cache", "a dict with 12 items in __main__", None, STEPS * HIDDEN),
        ("closures", "callbacks", "a list with 12 items in __main__", "closure", STEPS * HIDDEN),
        # Four rows of each 4 MiB tensor, each keeping the whole of it.
        ("slices", "kept", "a list with 12 items in __main__", "view", STEPS * 4 * MiB),
    ],
)
def test_the_scripts_own_root_is_named_with_what_it_holds(answers, scenario, root, description, through, at_least):
    answer = answers[scenario]
    check_common(answer)
    found = holder(answer, root)
    assert found["root"] == "`%s`, %s" % (root, description)
    assert found["bytes"] >= at_least, answer["text"]
    # The largest holder, first in the text, is the script's.
    assert answer["holders"][0]["root"] == found["root"]
    assert answer["text"].splitlines()[1].endswith("held by " + found["root"])
    if through:
        assert through in found["through"], answer["text"]
    assert found["path"].startswith(root), found["path"]
    # Its line: the one that made the memory it holds, in the scenario's own function.
    assert any("scenarios.py" in site for site in found["sites"]), found["sites"]


def test_advice_fits_what_holds_it(answers):
    assert "`loss.item()`" in answers["losses_append"]["text"]
    assert "`.detach()`" in answers["total_loss"]["text"]
    assert "`x[...].clone()`" in answers["slices"]["text"]
    assert "closes over" in answers["closures"]["text"]
    assert "`loss.item()`" not in answers["cache"]["text"]
    assert "cache" in holder(answers["cache"], "cache")["through"]
    assert "key it by what repeats" in answers["cache"]["text"]
    # The chain is spelled as Python: the list's item, its graph, the saved tensor.
    assert holder(answers["losses_append"], "losses")["path"].startswith("losses[11].grad_fn.next_functions[0][0]")
    assert holder(answers["closures"], "callbacks")["path"] == "callbacks[11].__closure__[0].cell_contents"


def test_an_attribute_of_the_scripts_own_class_is_named_by_its_class_past_a_librarys_object(answers):
    answer = answers["attribute"]
    check_common(answer)
    (found,) = [entry for entry in answer["holders"] if "step_losses" in entry["root"]]
    assert found["root"] == (
        "`Recorder.step_losses`, a list with 12 items, reached from `trainer`, a SimpleNamespace in __main__"
    )
    assert found["path"].startswith("trainer.module.step_losses[11]"), found["path"]
    assert found["bytes"] >= STEPS * (BATCH + HIDDEN), answer["text"]
    assert "`Recorder.step_losses` lives as long as its object" in answer["text"]


def test_a_kept_dict_of_outputs_is_told_by_its_fields(answers):
    answer = answers["outputs"]
    check_common(answer)
    found = holder(answer, "history")
    # Each step's logits (512 x 10) with the graph that made them; the advice names the fields.
    assert "model output" in found["through"], found["through"]
    assert "each step's dict of outputs is kept whole: its `logits`" in answer["text"], answer["text"]
    assert "`outputs['loss'].item()` for the loss and `outputs['logits'].detach().cpu()`" in answer["text"]
    assert "each tensor kept with its autograd graph" not in answer["text"], "the output's advice replaces the graph's"


def test_a_kept_graph_is_told_by_the_passes_it_joins(answers):
    # A sum of losses with no backward(): every step's graph, with the activations it saved.
    total = answers["total_loss"]
    assert holder(total, "total_loss")["graph"] == [12, 0]
    assert "total_loss keeps the autograd graphs of 12 forward passes with the tensors they saved" in total["text"]
    # The same kept one loss a step in a list: the list keeps as many passes, one a tensor, and is no total.
    assert holder(answers["losses_append"], "losses")["graph"] == [12, 0]
    assert "its tensors keep the autograd graphs of 12 forward passes with the tensors they saved" in (
        answers["losses_append"]["text"]
    ), answers["losses_append"]["text"]
    assert "running total" not in answers["losses_append"]["text"]
    # A running total of losses over an epoch, each after its backward(): graphs that can never be used again.
    running = answers["running_total"]
    check_common(running)
    assert holder(running, "running_total_loss")["graph"] == [0, 40]
    assert "running_total_loss keeps the autograd graphs of 40 backward passes, which can never be used again" in (
        running["text"]
    ), running["text"]
    assert "add `loss.item()` (a number)" in running["text"]
    # The model and the optimizer keep parameters and state, no graph.
    assert holder(running, "model")["graph"] is None


def test_a_traceback_kept_by_the_session_is_named(answers):
    answer = answers["traceback"]
    check_common(answer)
    (found,) = [entry for entry in answer["holders"] if entry["kind"] == "traceback"]
    assert found["root"].startswith("the last exception's traceback (sys.last_traceback)")
    assert found["bytes"] >= STEPS * HIDDEN
    assert found["path"].startswith("sys.last_traceback.tb_next.tb_frame.f_locals['activations'][")
    assert "sys.last_traceback = sys.last_value = sys.last_exc = None" in answer["text"]
    assert any("in evaluate" in site for site in found["sites"])


def test_a_search_that_keeps_each_trials_model_names_the_list_and_the_models(answers):
    answer = answers["search"]
    check_common(answer)
    found = holder(answer, "results")
    assert found["models"] == 3 and found["owner"] == "Sequential"
    assert "the parameters of 3 models (Sequential)" in answer["text"]
    assert "drop the model" in answer["text"]


def test_a_failed_search_is_told_through_the_list_that_keeps_the_earlier_trials(answers):
    # The failing trial's model is the largest one the traceback keeps; the list keeps more of them.
    answer = answers["failed_search"]
    check_common(answer)
    (found,) = [entry for entry in answer["holders"] if entry["kind"] == "traceback"]
    assert found["bytes"] >= (1024**2 + 1280**2 + 1536**2 + 1792**2) * 4
    assert found["path"].startswith("sys.last_traceback.tb_next.tb_frame.f_locals['results'][2][1]"), found["path"]


def test_a_correct_loop_holds_only_the_models_parameters_and_the_optimizers_state(answers):
    answer = answers["correct"]
    check_common(answer)
    roots = sorted(entry["root"] for entry in answer["holders"])
    assert roots == ["`model`, a Sequential in __main__", "`optimizer`, an Adam in __main__"]
    optimizer = holder(answer, "optimizer")
    assert optimizer["through"] == ["optimizer state"] and optimizer["owner"] == "Adam"
    # Adam's two moments of each of the four parameters.
    assert optimizer["tensors"] == 8
    assert "the state of an Adam optimizer" in answer["text"]
    assert "parameters and gradients of a Sequential" in answer["text"]
    # No advice: nothing is wrong.
    assert "keep `" not in answer["text"] and "drop" not in answer["text"]
    # cuBLAS's workspaces, the main thread's and autograd's, which PyTorch keeps: said so, not a mystery.
    workspaces = [line for line in answer["text"].splitlines() if "cuBLAS's workspace" in line]
    assert len(workspaces) == 2, answer["text"]
    assert all(line.endswith("which PyTorch keeps for the rest of the process): not the program's to free") for line in workspaces)
    assert any("on PyTorch's autograd thread" in site for site in holder(answer, "model")["sites"]), answer["text"]


def test_every_answer_is_in_the_trace(answers):
    text = " ".join(answers["report.txt"].split())
    # The last answer of all, the record at exit: the model's parameters are held by `model`.
    assert re.search(
        r"at the program's exit \(\d+\.\d\d s\): 1\.0 MiB held by `model`, a Sequential in __main__: the parameters "
        r"of a Sequential",
        text,
    ), text


@pytest.mark.parametrize("killed", [False, True], ids=["raised", "killed"])
def test_an_out_of_memory_error_records_what_held_the_memory(tmp_path, adapter_cache, killed):  # noqa: F811
    completed = run_script(
        tmp_path, OUT_OF_MEMORY, adapter_cache, traced=True, capacity=256 * MiB, arguments=["--killed"] if killed else []
    )
    # The program's own ending, unchanged: its error, or the signal that killed it (128 + 9 from gpuleak run).
    assert completed.returncode == (137 if killed else 1), completed.stderr[-4000:]
    assert killed or "torch.OutOfMemoryError: CUDA out of memory" in completed.stderr
    assert completed.stdout == ""
    with open(tmp_path / "run" / "report.json") as report:
        (process,) = json.load(report)["processes"]
    # A SIGKILL the program could not record: gpuleak run wrote it.
    assert process["ended"]["how"] == ("signal" if killed else "exit")
    if killed:
        assert process["ended"]["signal"] == 9 and process["ended"]["sender"]["written_by"] == "launcher"
    (failure,) = [failure for failure in process["failures"] if failure["out_of_memory"]]
    record = process["retainers"][failure["retainers"]]
    assert record["moment"] == "out_of_memory" and record["label"] == "out of memory on device 0"
    assert record["t_s"] >= failure["t_s"] and record["problem"] is None and not record["stopped"]
    assert record["saved_tensors_read"] is True
    outputs = record["holders"][0]
    assert outputs["root"].startswith("`outputs`, a list with ") and outputs["root"].endswith(" items in __main__")
    # Each batch's input, hidden activations and output: nearly the whole device.
    assert outputs["bytes"] >= 200 * MiB, record
    assert "autograd graph" in outputs["through"]
    assert any("`.detach()`" in advice for advice in outputs["advice"])
    assert all(site["where"].startswith(OUT_OF_MEMORY) for site in outputs["sites"][:2]), outputs["sites"]
    with open(tmp_path / "run" / "report.txt") as report:
        text = report.read()
    failures = text[text.index("Failed allocations:"):]
    assert "what held it, as gpuleak.why() found it before the error reached the program" in failures
    assert ": held by " + outputs["root"] in " ".join(failures.split())
    diagnosis = " ".join(text.split("\n\n", 2)[1].split())
    assert "of it held by " + outputs["root"] + "." in diagnosis, diagnosis


def test_saved_tensors_behind_the_programs_hooks_are_not_read_at_an_out_of_memory_error(tmp_path, adapter_cache):  # noqa: F811
    completed = run_script(
        tmp_path, OUT_OF_MEMORY, adapter_cache, traced=True, capacity=256 * MiB, arguments=["--hooks"]
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    # Reading them would have run the program's unpack hook: checkpointing recomputes, offloading copies.
    assert completed.stdout == "unpacked 0 saved tensors\n"
    with open(tmp_path / "run" / "report.json") as report:
        (process,) = json.load(report)["processes"]
    # The record at the error, and the one at exit, which does not read them either.
    record, at_exit = process["retainers"]
    assert record["moment"] == "out_of_memory" and record["saved_tensors_read"] is False
    assert at_exit["moment"] == "exit" and at_exit["saved_tensors_read"] is False
    # The outputs themselves are still found, and said to be held by the list.
    assert record["holders"][0]["root"].startswith("`outputs`, a list with ")
    with open(tmp_path / "run" / "report.txt") as report:
        text = " ".join(report.read().split())
    assert "the tensors autograd saved were not looked into: the program set saved-tensor hooks" in text


def test_out_of_memory_errors_left_out_by_gpuleak_why_record_nothing(tmp_path, adapter_cache):  # noqa: F811
    completed = run_script(
        tmp_path, OUT_OF_MEMORY, adapter_cache, traced=True, capacity=256 * MiB, settings={"GPULEAK_WHY": "none"}
    )
    assert completed.returncode == 1, completed.stderr[-4000:]
    with open(tmp_path / "run" / "report.json") as report:
        (process,) = json.load(report)["processes"]
    assert process["failures"] and process["retainers"] == []
    assert all(failure["retainers"] is None for failure in process["failures"])


def test_the_report_says_what_cublas_keeps(answers):
    # Both of cuBLAS's workspaces (the main thread's and autograd's) are live at the end: the main thread's
    # site, headed by the program's line that made the first matrix product, says what PyTorch keeps it
    # for under it; autograd's, which has no line of the program's, is headed by it.
    kept_for = "cuBLAS's workspace, which PyTorch keeps for the rest of the process"
    blocks = []
    for line in answers["report.txt"].splitlines():
        if line.startswith("  #"):
            blocks.append([line])
        elif blocks and line.startswith("      "):
            blocks[-1].append(line)
    workspaces = [block for block in blocks if any(kept_for in line for line in block)]
    assert len(workspaces) == 2, answers["report.txt"]
    assert sorted(block[0].endswith(" " + kept_for) for block in workspaces) == [False, True], workspaces
    assert any("        (%s)" % kept_for in block for block in workspaces), workspaces
