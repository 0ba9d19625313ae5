"""The workload corpus (tests/workloads/: training scripts as users write them) under `gpuleak run`: each
must run as it runs alone, printing the same, and the report's peak and final allocated and reserved
bytes must be the counters PyTorch printed as the script's last line.

Environment: that of test_torch_adapter.py, plus GPULEAK_TEST_LAUNCHER (the gpuleak program). On the
real device (GPULEAK_TEST_REAL_DEVICE=1) the workload that needs a small device to run out of memory
is skipped.
"""

import difflib
import functools
import json
import os
import re
import subprocess
import sys

import pytest
from test_torch_adapter import (
    CUDA_LIB_DIR,
    HERE,
    MiB,
    PACKAGE,
    REAL_DEVICE,
    SIMDEVICE_DIR,
    SIMULATED_ONLY,
    TORCH_PYTHON,
    adapter_cache,
)
from test_torch_adapter import pytestmark as adapter_marks
from torch_environment import simulated_device_environment

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "analyzer", "render", "json"))
try:
    from report_schema import assert_valid_report
except ModuleNotFoundError as missing:
    # scripts/gpu-validate.sh runs these scenarios without pytest (scenario_runner.py) on a GPU machine where
    # nothing can be installed beside PyTorch: there the reports go unvalidated. Under pytest, the gate's
    # set-up has installed jsonschema, and its absence fails.
    if missing.name != "jsonschema" or not getattr(pytest, "stand_in", False):
        raise
    assert_valid_report = None

LAUNCHER = os.environ.get("GPULEAK_TEST_LAUNCHER", "")
WORKLOADS = os.path.normpath(os.path.join(HERE, "..", "workloads"))

pytestmark = adapter_marks + [
    pytest.mark.skipif(not os.path.exists(LAUNCHER), reason="GPULEAK_TEST_LAUNCHER does not name gpuleak"),
]

# What each workload runs on. The hyperparameter searches get a device that the leaking one fills in
# a later trial; the rest a device as large as PyTorch's tests use.
DEFAULT_CAPACITY = 4 << 30
CAPACITY = {"hyperparameter_search.py": 512 * MiB, "leak_hyperparameter_search.py": 512 * MiB}
RUNS_OUT_OF_MEMORY = {"leak_hyperparameter_search.py"}
# Each leak and the correct workload it is one line away from (tests/workloads/README.md).
CORRECT_OF = {
    "leak_losses_append.py": "mlp_adam.py",
    "leak_total_loss.py": "gradient_accumulation.py",
    "leak_outputs_kept.py": "cnn.py",
    "leak_evaluation_without_no_grad.py": "evaluation_no_grad.py",
    "leak_cache_dict.py": "transformer_block.py",
    "leak_hyperparameter_search.py": "hyperparameter_search.py",
    "leak_pinned_batches.py": "pinned_loader.py",
    "leak_gpt2_outputs_kept.py": "gpt2_finetune.py",
    "leak_lightning_step_losses.py": "lightning_classifier.py",
}
# The verdict each workload must get, and for a leak the text of the line of the script that the top
# growing site names (the innermost frame of the script's own): where the tensor that is kept is made.
VERDICTS = {
    "mlp_adam.py": ("stable", None),
    "cnn.py": ("stable", None),
    "transformer_block.py": ("cache_growth", None),  # five sequence lengths: blocks of five sizes
    "mixed_precision.py": ("stable", None),
    "gradient_accumulation.py": ("stable", None),
    "evaluation_no_grad.py": ("stable", None),
    "matmul_empty_cache.py": ("stable", None),
    "hyperparameter_search.py": ("stable", None),
    "pinned_loader.py": ("stable", None),
    "inference.py": ("stable", None),
    "gpt2_finetune.py": ("stable", None),
    "gpt2_inference.py": ("stable", None),
    "lightning_classifier.py": ("stable", None),
    "leak_losses_append.py": ("leak", "loss = loss_fn(model(x), y)"),
    "leak_outputs_kept.py": ("leak", "features = self.features(x)"),
    "leak_cache_dict.py": (
        "leak",
        'return torch.triu(torch.full((length, length), float("-inf"), device=device), diagonal=1)',
    ),
    "leak_hyperparameter_search.py": ("leak", ").to(device)"),
    # Not growth: what the record at exit found. The validation outputs keep the activations of every
    # batch of the last pass, for a backward() that never ran.
    "leak_evaluation_without_no_grad.py": ("leak", "outputs.append(model(x.to(device)))"),
    # `running_loss += loss` keeps autograd nodes whose buffers backward() freed, so the device holds what
    # gradient_accumulation.py holds (PyTorch's counters are the same): its graph joins every step's.
    "leak_total_loss.py": ("leak", "running_loss += loss"),
    # PyTorch's pin-memory thread pins every batch: its stack has none of the script's lines, and the line
    # that started it, where the script receives the batches, names what it made.
    "leak_pinned_batches.py": ("leak", "for step, (inputs, targets) in enumerate(loader):"),
    # transformers' own lines make the logits and the attention cache; the script's line is the model's call.
    "leak_gpt2_outputs_kept.py": ("leak", "outputs = model(input_ids=input_ids, labels=input_ids)"),
    # Lightning calls the module's training_step: its line is the script's, in a class the script wrote.
    "leak_lightning_step_losses.py": ("leak", "loss = F.cross_entropy(self.net(x), y)"),
}
# Who holds a leak's top site at the program's exit, as the report names it, and the advice that comes
# first: it follows what the chain went through.
HOLDERS = {
    # Each step's loss after its backward(): the graph is kept, the activations were freed.
    "leak_losses_append.py": (
        "`losses`, a list with 96 items in __main__",
        "each tensor kept with its autograd graph keeps that step's graph, which `backward()` already ran through",
    ),
    "leak_cache_dict.py": ("`masks`, a dict with 40 items in __main__", "a dict that keeps a value for each new key"),
    # Feature maps, not losses: `.item()` is no cure.
    "leak_outputs_kept.py": (
        "`feature_maps`, a list with 48 items in __main__",
        "each tensor kept with its autograd graph stays on the device with that step's graph: keep `.detach().cpu()`",
    ),
    "leak_gpt2_outputs_kept.py": (
        "`history`, a list with 40 items in __main__",
        "each step's CausalLMOutputWithCrossAttentions is kept whole: its `logits`",
    ),
    # The module the Trainer keeps, not the Trainer: the attribute the script wrote.
    "leak_lightning_step_losses.py": (
        "`Classifier.step_losses`, a list with 96 items, reached from `trainer`, a Trainer in __main__",
        "`Classifier.step_losses` lives as long as its object",
    ),
}
# What every script imports to print PyTorch's counters last; not a workload itself.
COUNTERS_MODULE = "memory_counters.py"
ALL = sorted(name for name in os.listdir(WORKLOADS) if name.endswith(".py") and name != COUNTERS_MODULE)
# What the workloads of code someone else wrote import besides PyTorch. scripts/setup-torch.sh installs
# them; a GPU machine's own PyTorch environment may lack them, and there such a workload is skipped.
THIRD_PARTY = {
    "gpt2_finetune.py": "transformers",
    "gpt2_inference.py": "transformers",
    "leak_gpt2_outputs_kept.py": "transformers",
    "lightning_classifier.py": "lightning",
    "leak_lightning_step_losses.py": "lightning",
}
COUNTERS = re.compile(r"(memory_allocated|memory_reserved|max_memory_allocated|max_memory_reserved)=(\d+)")
EXPECTED_COUNTERS = {"memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"}


def script_command(directory, script, adapter_cache, traced, capacity=DEFAULT_CAPACITY, launch=(), arguments=(),
                   settings=None):
    """The command and environment that run `script` as a user would, alone or under `gpuleak run -o
    directory/run`; `launch`: what comes between the interpreter and the script (`-m torch.distributed.run
    ...`); `arguments`: the script's; `settings`: more environment variables."""
    environment = dict(os.environ, **(settings or {}))
    environment.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    environment["PYTHONWARNINGS"] = "ignore"
    if not REAL_DEVICE:
        environment.update(simulated_device_environment(SIMDEVICE_DIR, CUDA_LIB_DIR, capacity))
    # As if the user had installed the package.
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE, environment.get("PYTHONPATH")]))
    command = [TORCH_PYTHON, *launch, script, *arguments]
    if traced:
        environment["GPULEAK_TORCH_ADAPTER_DIR"] = adapter_cache
        command = [LAUNCHER, "run", "--quiet", "-o", str(directory / "run"), "--", *command]
    return command, environment


def run_script(directory, script, adapter_cache, traced, capacity=DEFAULT_CAPACITY, launch=(), arguments=(),
               settings=None, cwd=None):
    """Runs `script_command`'s command to its end; `cwd`: the directory it runs in (else this one)."""
    command, environment = script_command(directory, script, adapter_cache, traced, capacity, launch, arguments,
                                          settings)
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300, cwd=cwd)


@functools.lru_cache(maxsize=None)
def installed_packages():
    probe = subprocess.run(
        [TORCH_PYTHON, "-c", "import importlib.util as u, sys; print(*[n for n in sys.argv[1:] if u.find_spec(n)])"]
        + sorted(set(THIRD_PARTY.values())),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return set(probe.stdout.split())


def skip_without_its_packages(name):
    """On a real device, skips the workload `name` where its packages are not installed. The simulated
    device's environment is scripts/setup-torch.sh's: a missing package there is a failure."""
    package = THIRD_PARTY.get(name)
    if REAL_DEVICE and package and package not in installed_packages():
        pytest.skip(f"{package} is not installed in {TORCH_PYTHON}'s environment")


def run_workload(directory, name, adapter_cache, traced):
    # From the corpus's folder, as its author runs a script: the report names its lines relative to it.
    return run_script(
        directory,
        os.path.join(WORKLOADS, name),
        adapter_cache,
        traced,
        CAPACITY.get(name, DEFAULT_CAPACITY),
        cwd=WORKLOADS,
    )


def check_workload(directory, name, adapter_cache):
    skip_without_its_packages(name)
    plain = run_workload(directory, name, adapter_cache, traced=False)
    assert plain.returncode == 0, plain.stderr[-4000:]
    traced = run_workload(directory, name, adapter_cache, traced=True)
    assert traced.returncode == 0, traced.stderr[-4000:]
    assert traced.stdout == plain.stdout

    counters = dict(COUNTERS.findall(traced.stdout.strip().splitlines()[-1]))
    assert counters.keys() == EXPECTED_COUNTERS, f"{name} must print PyTorch's counters as its last line"
    if assert_valid_report is not None:
        assert_valid_report(directory / "run" / "report.json")
    process = main_process(directory)
    ended = process["ended"]
    assert (ended["how"], ended["code"], ended["signal"], ended["sender"]) == ("exit", 0, None, None), ended
    assert ended["text"].startswith("exited with status 0 after ") and process["error"] is None
    summary = process["summary"]
    assert summary["allocator_reports_blocks"] is True
    (device,) = summary["devices"]
    assert device["peak_allocated_bytes"] == int(counters["max_memory_allocated"])
    assert device["final_allocated_bytes"] == int(counters["memory_allocated"])
    assert device["peak_reserved_bytes"] == int(counters["max_memory_reserved"])
    assert device["final_reserved_bytes"] == int(counters["memory_reserved"])
    # The device's own timeline keeps its peaks and ends where PyTorch's counters end.
    timeline = device["timeline"]
    assert max(point["reserved_bytes"] for point in timeline) == int(counters["max_memory_reserved"])
    assert max(point["allocated_bytes"] for point in timeline) == int(counters["max_memory_allocated"])
    assert timeline[-1]["reserved_bytes"] == int(counters["memory_reserved"])
    assert timeline[-1]["allocated_bytes"] == int(counters["memory_allocated"])
    assert device["driver_used"], "the driver was asked after the first allocation"
    if not REAL_DEVICE:
        # The simulated driver counts the process's device memory and nothing else.
        assert all(point["bytes"] <= device["peak_reserved_bytes"] for point in device["driver_used"])
    return traced


def main_process(directory):
    """The script's own process, beside its DataLoader's workers."""
    with open(directory / "run" / "report.json") as report:
        (process,) = [p for p in json.load(report)["processes"] if p["role"]["kind"] == "program"]
    return process


def check_verdict(directory, name):
    process = main_process(directory)
    kind, line = VERDICTS[name]
    assert process["diagnosis"]["kind"] == kind, process["diagnosis"]["text"]
    if kind != "leak":
        assert process["growth"] == process["spent_graphs"] == process["kept_for_backward"] == []
        return
    script = os.path.join(WORKLOADS, name)
    # The report lists a leak's sites under its cause's name: "growth", "spent_graphs", "kept_for_backward".
    top = process[process["diagnosis"]["leak_cause"]][0]
    # A site made on a library's thread has the script's line in the stack that started the thread.
    frames = top["frames"] + (top["thread_started_at"] or [])
    own = next(frame for frame in frames if frame.get("python") and frame["file"] == script)
    assert lines_of(name)[own["line"] - 1].strip() == line
    assert top["kind"] in ("block", "pinned_host"), "the tensors are the leak, not the segments made for them"
    with open(directory / "run" / "report.txt") as text:
        report = text.read()
    section = report[report.index("process %d (" % process["pid"]) :]
    diagnosis = " ".join(section[section.index("Diagnosis:") :].split("\n\n", 1)[0].split())
    # Relative to the folder it was run from, as the user typed it.
    assert "%s:%d in" % (name, own["line"]) in diagnosis, "the diagnosis names the script's line"
    if process["diagnosis"]["leak_cause"] == "growth":
        assert "#1 %s:%d" % (name, own["line"]) in section, "the site's header is the script's line"
    if name in HOLDERS:
        root, advice = HOLDERS[name]
        (exit_record,) = [record for record in process["retainers"] if record["moment"] == "exit"]
        held = next(holder for holder in exit_record["holders"] if holder["sites"][0]["where"] == top["where"])
        assert held["root"] == root and held["advice"][0].startswith(advice), held
        assert "held by %s" % root in diagnosis


def first_screen(report):
    """The text report's lines down to the end of its third site (or of its sites, where it has fewer):
    the process table, the header, the diagnosis and the top three sites."""
    lines = report.splitlines()
    end, sites, in_site = 0, 0, False
    for number, line in enumerate(lines, 1):
        if re.match(r"  #\d+ ", line):
            sites += 1
            if sites > 3:
                break
            in_site, end = True, number
        elif in_site and line.startswith("      "):
            end = number
        else:
            in_site = False
            if line.startswith(("Reserved by", "Failed allocations", "Recorded:", "Host memory over time")):
                break
    return lines[:end]


def too_wide(lines):
    """The lines over 100 columns, but for one that holds a single word that no break could shorten (a
    trace's path after its label)."""
    return [line for line in lines if len(line) > 100 and len(line.split()) > 2]


def check_first_screen(directory, name, stderr):
    with open(directory / "run" / "report.txt") as text:
        screen = first_screen(text.read())
    assert len(screen) <= 40 and not too_wide(screen), "%s: %d lines:\n%s" % (name, len(screen), "\n".join(screen))
    summary = [line for line in stderr.splitlines() if line.startswith(("gpuleak: ", "         "))]
    assert summary and not too_wide(summary), "\n".join(summary)




@pytest.mark.parametrize("workload", [name for name in ALL if name not in RUNS_OUT_OF_MEMORY])
def test_workload_runs_as_alone_and_is_counted_exactly(tmp_path, adapter_cache, workload):
    traced = check_workload(tmp_path, workload, adapter_cache)
    # The device is large enough for it: a search that caught an out-of-memory error would still end well.
    assert "out of memory" not in traced.stdout
    check_verdict(tmp_path, workload)
    check_first_screen(tmp_path, workload, traced.stderr)


def test_every_workload_has_a_verdict():
    assert sorted(VERDICTS) == ALL


def lines_of(name):
    with open(os.path.join(WORKLOADS, name)) as script:
        return script.read().splitlines()


def test_each_leak_is_one_line_away_from_a_correct_workload():
    assert sorted(CORRECT_OF) == [name for name in ALL if name.startswith("leak_")]
    for leak, correct in CORRECT_OF.items():
        changed = [
            line
            for line in difflib.unified_diff(lines_of(correct), lines_of(leak), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
        removed = [line for line in changed if line.startswith("-")]
        added = [line for line in changed if line.startswith("+")]
        assert len(removed) <= 1 and len(added) <= 1 and changed, f"{leak} against {correct}: {changed}"


@SIMULATED_ONLY
@pytest.mark.parametrize("workload", sorted(RUNS_OUT_OF_MEMORY))
def test_workload_that_runs_out_of_memory_is_counted_exactly(tmp_path, adapter_cache, workload):
    traced = check_workload(tmp_path, workload, adapter_cache)
    assert "CUDA out of memory" in traced.stdout
    process = main_process(tmp_path)
    assert process["failures"], "the out-of-memory error is in the report"
    check_verdict(tmp_path, workload)
    check_first_screen(tmp_path, workload, traced.stderr)
    # What the earlier trials still held when it failed: their models, made at the script's line.
    held = process["failures"][0]["top_sites_then"][0]
    own = next(frame for frame in held["frames"] if frame.get("python") and frame["file"].endswith(workload))
    assert lines_of(workload)[own["line"] - 1].strip() == VERDICTS[workload][1]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
