"""Real TensorFlow (the pinned CUDA 12 build that scripts/setup-tensorflow.sh installs) on the simulated CUDA
device: it must see the simulated GPU and train Keras models there, refuse what needs cuDNN saying why,
and gpuleak run must explain each of TensorFlow's allocators and the search that runs out of memory
because it keeps every trial's model. Each program runs in a fresh interpreter of that environment.

Environment: GPULEAK_TEST_SIMDEVICE_DIR (the simulated device's libraries and its python/; required),
GPULEAK_TEST_LAUNCHER (the gpuleak program), GPULEAK_TENSORFLOW_DIR (the environment; default: what
scripts/setup-tensorflow.sh made). Missing ones skip every test, saying which.
"""

import json
import os
import sys

import pytest
from torch_environment import run_json_program, run_under_gpuleak, simulated_device_environment, tensorflow_python

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "analyzer", "render", "json"))
from report_schema import assert_valid_report  # noqa: E402

MiB = 1 << 20
# Under 2 GiB TensorFlow leaves 225 MiB of a device to the system and takes the rest as its pool.
CAPACITY = 768 * MiB
HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")
SIMDEVICE_DIR = os.environ.get("GPULEAK_TEST_SIMDEVICE_DIR", "")
LAUNCHER = os.environ.get("GPULEAK_TEST_LAUNCHER", "")
# The gpuleak package, as if the user had installed it.
PACKAGE = os.path.normpath(os.path.join(HERE, "..", "..", "python"))
TENSORFLOW_PYTHON = tensorflow_python()

pytestmark = [
    pytest.mark.skipif(
        not os.path.exists(os.path.join(SIMDEVICE_DIR, "libcublas.so.12")),
        reason="GPULEAK_TEST_SIMDEVICE_DIR does not hold the simulated libcublas.so.12",
    ),
    pytest.mark.skipif(
        TENSORFLOW_PYTHON is None,
        reason="no TensorFlow environment: run scripts/setup-tensorflow.sh (or set GPULEAK_TENSORFLOW_DIR)",
    ),
    pytest.mark.skipif(not os.path.exists(LAUNCHER), reason="GPULEAK_TEST_LAUNCHER does not name gpuleak"),
]


def environment(**settings):
    """The variables of a TensorFlow program on the simulated device, with TensorFlow's own `settings`.
    No CUDA toolkit: the simulated device stands in for every library TensorFlow's CUDA 12 build loads."""
    variables = {name: value for name, value in os.environ.items() if not name.startswith(("XLA_", "TF_"))}
    variables.update(simulated_device_environment(SIMDEVICE_DIR, SIMDEVICE_DIR, CAPACITY))
    variables["PYTHONPATH"] = os.pathsep.join([variables["PYTHONPATH"], PACKAGE])
    variables["TF_CPP_MIN_LOG_LEVEL"] = "2"
    variables.update(settings)
    return variables


def run_program(program):
    """Runs the Python `program`, which prints one JSON line last; returns it and the program's stderr."""
    return run_json_program(TENSORFLOW_PYTHON, program, environment())


def run_traced(directory, name, status=0, **settings):
    """Runs programs/`name` as a user would under gpuleak run; returns its processes' reports, the text
    report and the program's output."""
    processes, text, completed = run_under_gpuleak(
        LAUNCHER, TENSORFLOW_PYTHON, os.path.join(PROGRAMS, name), directory, environment(**settings), status
    )
    assert_valid_report(directory / "report.json")
    # The diagnosis's paragraph on one line.
    return processes, " ".join(text.split()), completed.stdout


def program_lines(site, program):
    """The lines of `program` (a file of programs/) in `site`'s stack, innermost first."""
    script = os.path.join(PROGRAMS, program)
    return [frame["line"] for frame in site["frames"] if frame.get("python") and frame["file"] == script]


def line_of(program, text):
    with open(os.path.join(PROGRAMS, program)) as source:
        return next(number for number, line in enumerate(source, 1) if text in line)


def test_tensorflow_sees_the_simulated_gpu_and_trains_keras_models_but_convolutions_need_cudnn():
    measured, stderr = run_program(
        """
        import json
        import keras
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        details = tf.config.experimental.get_device_details(gpus[0])
        tokens = tf.random.uniform((128, 16), maxval=1000, dtype=tf.int32)
        inputs = keras.Input((16,), dtype="int32")
        hidden = keras.layers.Embedding(1000, 32)(inputs)
        hidden = keras.layers.MultiHeadAttention(num_heads=2, key_dim=16)(hidden, hidden)
        hidden = keras.layers.LayerNormalization()(hidden)
        hidden = keras.layers.GlobalAveragePooling1D()(hidden)
        hidden = keras.layers.BatchNormalization()(hidden)
        hidden = keras.layers.Dropout(0.1)(hidden)
        model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
        model.compile(optimizer="adam", loss="mse")
        history = model.fit(tokens, tf.zeros((128, 1)), epochs=2, batch_size=32, verbose=0)
        model.evaluate(tokens, tf.zeros((128, 1)), verbose=0)
        predicted = model.predict(tokens[:4], verbose=0)

        images = keras.Input((16, 16, 3))
        features = keras.layers.Flatten()(keras.layers.Conv2D(8, 3)(images))
        convolutional = keras.Model(images, keras.layers.Dense(1)(features))
        convolutional.compile(optimizer="adam", loss="mse", jit_compile=False)
        try:
            convolutional.fit(tf.zeros((32, 16, 16, 3)), tf.zeros((32, 1)), verbose=0)
            refused = ""
        except Exception as error:
            refused = str(error)
        with tf.device("/GPU:0"):
            placed = tf.matmul(tf.ones((4, 4)), tf.ones((4, 4))).device
        print(json.dumps({"gpus": len(gpus), "name": details["device_name"],
                          "capability": details["compute_capability"], "epochs": len(history.history["loss"]),
                          "predicted": list(predicted.shape), "refused": refused, "placed": placed}))
        """
    )
    assert measured["gpus"] == 1
    assert measured["name"] == "gpuleak simulated device (no GPU)"
    assert measured["capability"] == [9, 0]
    assert measured["placed"].endswith("GPU:0")
    assert measured["epochs"] == 2
    assert measured["predicted"] == [4, 1]
    # A convolution needs cuDNN, which cannot run here: the error says so, and so does the line on stderr.
    assert "cuDNN cannot run on the gpuleak simulated CUDA device" in measured["refused"]
    assert "gpuleak-sim: cuDNN cannot run on the simulated CUDA device" in stderr


def test_a_search_keeping_every_model_is_a_leak_at_its_lines_with_cuda_malloc_async(tmp_path):
    (process,), text, output = run_traced(
        tmp_path, "search_keeps_models.py", status=1, TF_GPU_ALLOCATOR="cuda_malloc_async"
    )
    diagnosis = process["diagnosis"]
    assert diagnosis["kind"] == "leak"
    assert diagnosis["framework_allocator"] == {"framework": "tensorflow", "mode": "per_tensor", "xla": True}
    assert diagnosis["framework_pool"] is None
    # Each tensor at the program's own lines: the weights where the model is built, what the compiled
    # training step wrote (on TensorFlow's threads) at the line that waited for it.
    program = "search_keeps_models.py"
    fit, built = line_of(program, "model.fit("), line_of(program, "model = keras.Sequential(")
    top = process["growth"][0]
    assert program_lines(top, program)[:1] in ([fit], [built])
    assert {tuple(program_lines(site, program)[:1]) for site in process["growth"]} >= {(fit,), (built,)}
    # It ran out in a later trial, with what the earlier ones kept: TensorFlow's error, and the cure.
    assert "trial 2" in output
    assert process["error"]["type"].endswith("ResourceExhaustedError")
    assert any(failure["out_of_memory"] for failure in process["failures"])
    assert "at the sites that kept growing, by the program's earlier work" in text
    assert "TF_GPU_ALLOCATOR=cuda_malloc_async): the figures count its tensors" in text
    assert "run each trial in a process of its own (gpuleak.isolated" in text
    # What holds it, found through TensorFlow's DLPack export: the models of the search's frame, which the
    # traceback of the error keeps.
    (answer,) = process["retainers"]
    held = answer["holders"][0]
    assert held["kind"] == "traceback" and held["bytes"] >= top["bytes"]
    # Through the list that keeps the earlier trials' models, which hold more than the failing trial's.
    assert "f_locals['results'][" in held["path"] and held["path"].endswith("._value"), held["path"]
    # Each trial is a phase of its own.
    labels = [marker["label"] for marker in process["markers"]]
    assert labels[:2] == ["trial 0", "end of trial 0"]


def test_with_memory_growth_the_pool_grows_through_the_search_until_it_runs_out(tmp_path):
    (process,), text, _ = run_traced(tmp_path, "search_keeps_models.py", status=1, TF_FORCE_GPU_ALLOW_GROWTH="true")
    diagnosis = process["diagnosis"]
    assert diagnosis["kind"] == "pool_exhausted"
    assert diagnosis["framework_allocator"]["mode"] == "growing_pool"
    pool = diagnosis["framework_pool"]
    assert pool["framework"] == "tensorflow"
    assert pool["regions"] > 1
    assert pool["grew_through_work"]
    assert "The program ran out of device memory inside TensorFlow's pool" in text
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in text
    assert "this one grew through the program's work, as a leak does" in text
    assert "run with TF_GPU_ALLOCATOR=cuda_malloc_async" in text
    assert "run each trial in a process of its own" in text


def test_by_default_tensorflow_takes_most_of_the_device_at_once_as_its_pool(tmp_path):
    (process,), text, _ = run_traced(tmp_path, "search_keeps_models.py", status=1)
    diagnosis = process["diagnosis"]
    assert diagnosis["kind"] == "pool_exhausted"
    assert diagnosis["framework_allocator"]["mode"] == "pool"
    pool = diagnosis["framework_pool"]
    assert pool["regions"] == 1
    # All the device but the 225 MiB TensorFlow leaves to the system, less what the context took.
    assert pool["bytes"] >= CAPACITY // 2
    assert not pool["grew_through_work"]
    assert "its default allocator, which takes most of the device at its first use" in text
    assert "A pool is not a leak." in text
    assert "run with TF_GPU_ALLOCATOR=cuda_malloc_async" in text


def test_the_same_search_with_each_trial_isolated_runs_to_the_end_holding_nothing_across_trials(tmp_path):
    listed, _, completed = run_under_gpuleak(
        LAUNCHER, TENSORFLOW_PYTHON, os.path.join(PROGRAMS, "search_isolated.py"), tmp_path,
        environment(TF_GPU_ALLOCATOR="cuda_malloc_async"),
    )
    trials = [json.loads(line) for line in completed.stdout.splitlines()]
    assert [trial["width"] for trial in trials] == list(range(2048, 5120, 512))
    for trial in trials:
        assert os.path.dirname(trial["trace"]) == str(tmp_path)
        # Nothing grows in a trial's process either: what TensorFlow sets up at its first step is set-up.
        assert trial["diagnosis"]["kind"] == "stable", trial["diagnosis"]["text"]
    assert_valid_report(tmp_path / "report.json")
    processes = {process["pid"]: process for process in listed}
    children = {trial["pid"] for trial in trials}
    assert children <= set(processes)
    for pid in children:
        assert processes[pid]["diagnosis"]["kind"] == "stable", processes[pid]["diagnosis"]["text"]
    (search,) = [
        process for pid, process in processes.items() if pid not in children and process["role"]["kind"] == "program"
    ]
    # The search never initialised the device; nothing grew across its trials.
    assert search["summary"]["peak_reserved_bytes"] == 0
    assert search["diagnosis"]["kind"] != "leak"


def test_a_loop_keeping_its_batches_is_a_pool_by_default_and_a_leak_at_its_line_with_cuda_malloc_async(tmp_path):
    # What scripts/gpu-validate.sh asks of a real GPU, asked of the simulated one.
    program = "train_keeps_batches.py"
    (pooled,), _, _ = run_traced(tmp_path / "pool", program)
    assert pooled["diagnosis"]["kind"] == "stable"
    assert pooled["diagnosis"]["framework_pool"]["framework"] == "tensorflow"
    (per_tensor,), _, _ = run_traced(tmp_path / "async", program, TF_GPU_ALLOCATOR="cuda_malloc_async")
    assert per_tensor["diagnosis"]["kind"] == "leak"
    assert program_lines(per_tensor["growth"][0], program)[:1] == [line_of(program, "x = tf.fill(")]
