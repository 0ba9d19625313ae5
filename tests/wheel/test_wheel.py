"""The wheel (pyproject.toml, scripts/build-wheel.sh) as a user gets it: installed with pip into a fresh
virtual environment of each CPython under pyenv, offline, with no build tree on any path (the simulated
device aside, which is the test's, not gpuleak's). There: the programs on the environment's PATH, the
package importable and `python -m gpuleak`, `gpuleak run` of a scenario with the environment's library,
a kernel installed with --sys-prefix that Jupyter starts, the PyTorch adapter built at first use from the
installed source, and `pip uninstall` leaving the environment as it was.

Environment (scripts/test.sh sets it): GPULEAK_TEST_WHEEL, GPULEAK_TEST_PYTHONS (the interpreters,
separated by ':'), GPULEAK_TEST_SIMDEVICE_DIR, GPULEAK_TEST_PROGRAMS, GPULEAK_TEST_DUMP, and for the kernel and PyTorch
tests GPULEAK_TEST_KERNEL_PYTHON (a CPython with ipykernel and jupyter_client) and GPULEAK_CUDA_LIB_DIR.
"""

import json
import os
import subprocess
import sys
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
from torch_environment import simulated_device_environment, torch_python  # noqa: E402

WORKLOADS = os.path.join(HERE, "..", "workloads")
RUN_CELLS = os.path.join(HERE, "..", "jupyter", "run_cells.py")


def setting(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip("%s is not set (scripts/test.sh sets it)" % name)
    return value


def pythons():
    return [python for python in os.environ.get("GPULEAK_TEST_PYTHONS", "").split(":") if python]


def version_of(wheel):
    return os.path.basename(wheel).split("-")[1]


def clean_environment(venv, **more):
    """The environment a user's shell has once the venv is active: its bin/ first on PATH, none of
    gpuleak's variables, none of the build tree's paths."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("GPULEAK_") and name not in ("LD_PRELOAD", "PYTHONPATH", "LD_LIBRARY_PATH")
    }
    environment["PATH"] = "%s:/usr/local/bin:/usr/bin:/bin" % (venv / "bin")
    environment["VIRTUAL_ENV"] = str(venv)
    environment["PIP_NO_INDEX"] = "1"
    environment["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    environment.update(more)
    return environment


def files_of(venv):
    return sorted(str(path.relative_to(venv)) for path in venv.rglob("*") if not path.is_dir())


def make_venv(python, venv, *options):
    subprocess.run([python, "-m", "venv", *options, str(venv)], check=True, timeout=300)
    before = files_of(venv)
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", setting("GPULEAK_TEST_WHEEL")],
        env=clean_environment(venv),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    return before


def uninstall(venv, before):
    removed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-y", "gpuleak"],
        env=clean_environment(venv),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert removed.returncode == 0, removed.stderr
    # Every file, the interpreters' compiled ones too. pip leaves the directories that held no file of
    # their own (share/gpuleak, its python/ and include/), empty, as it does for every wheel's data.
    assert files_of(venv) == before


def simulated(venv, **more):
    return clean_environment(
        venv, LD_LIBRARY_PATH=setting("GPULEAK_TEST_SIMDEVICE_DIR"), GPULEAK_SIM_QUIET="1", **more
    )


def test_the_wheel_is_one_for_every_cpython_with_an_honest_platform_tag():
    wheel = setting("GPULEAK_TEST_WHEEL")
    name = os.path.basename(wheel)
    assert "-py3-none-manylinux_" in name and name.endswith("_x86_64.whl"), name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    data = "gpuleak-%s.data/data/" % version_of(wheel)
    for path in ("bin/gpuleak", "bin/gpuleak-report", "lib/libgpuleak.so", "lib/libunwind.so.8",
                 "share/gpuleak/python/gpuleak/__init__.py", "share/gpuleak/python/gpuleak/_why/__init__.py",
                 "share/gpuleak/torch_adapter/build-adapter.sh",
                 "share/gpuleak/include/gpuleak/gpuleak.h"):
        assert data + path in names, path
    assert "gpuleak.pth" in names
    assert not [path for path in names if "libcuda" in path or "libcudart" in path]


@pytest.mark.parametrize("python", pythons())
def test_installed_into_a_fresh_environment_it_runs_from_there_and_uninstalls_cleanly(python, tmp_path):
    venv = tmp_path / "venv"
    before = make_venv(python, venv)
    environment = simulated(venv)
    bin_directory = venv / "bin"

    # The programs are on the environment's PATH; the package is importable, and python -m gpuleak
    # is the program.
    for program in ("gpuleak", "gpuleak-report"):
        assert os.access(bin_directory / program, os.X_OK), program
    imported = subprocess.run(
        [str(bin_directory / "python"), "-c", "import gpuleak; print(gpuleak.__version__); print(gpuleak.__file__)"],
        env=environment, capture_output=True, text=True, check=True, timeout=60,
    )
    version, package = imported.stdout.split()
    assert version == version_of(setting("GPULEAK_TEST_WHEEL"))
    assert package == str(venv / "share" / "gpuleak" / "python" / "gpuleak" / "__init__.py")
    helped = subprocess.run(
        [str(bin_directory / "python"), "-m", "gpuleak", "--help"], env=environment, capture_output=True, text=True,
        timeout=60,
    )
    assert helped.returncode == 0 and "torch-adapter" in helped.stdout, helped.stderr

    # gpuleak run of a leaking program, with the environment's library; its report says leak.
    program = os.path.join(setting("GPULEAK_TEST_PROGRAMS"), "scenario_leak")
    run = subprocess.run(
        ["gpuleak", "run", "--quiet", "-o", str(tmp_path / "run"), "--", program, "20"],
        env=environment, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    with open(tmp_path / "run" / "report.json") as report:
        (process,) = json.load(report)["processes"]
    assert process["diagnosis"]["kind"] == "leak"
    (trace,) = (tmp_path / "run").glob("gpuleak.*")
    dumped = subprocess.run(
        [setting("GPULEAK_TEST_DUMP"), "--json", str(trace)], capture_output=True, text=True, check=True, timeout=60
    )
    assert str(venv / "lib" / "libgpuleak.so") in [module["path"] for module in json.loads(dumped.stdout)["modules"]]
    again = subprocess.run(
        ["gpuleak-report", "--format", "json", str(tmp_path / "run")], env=environment, capture_output=True,
        text=True, timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["processes"][0]["diagnosis"]["kind"] == "leak"

    uninstall(venv, before)


def test_a_kernel_installed_with_sys_prefix_starts_under_gpuleak(tmp_path):
    venv = tmp_path / "venv"
    # The system's site-packages: the pinned ipykernel and jupyter_client of scripts/setup.sh.
    before = make_venv(setting("GPULEAK_TEST_KERNEL_PYTHON"), venv, "--system-site-packages")
    environment = simulated(
        venv, JUPYTER_DATA_DIR=str(tmp_path / "data"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"), XDG_STATE_HOME=str(tmp_path / "state"),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    installed = subprocess.run(
        ["gpuleak", "kernel", "install", "--sys-prefix", "--name", "gpuleak-wheel", "--python",
         str(venv / "bin" / "python")],
        env=environment, capture_output=True, text=True, timeout=120,
    )
    assert installed.returncode == 0, installed.stderr
    assert str(venv / "share" / "jupyter" / "kernels" / "gpuleak-wheel") in installed.stdout
    cells = ["import gpuleak; print(gpuleak.active(), gpuleak.__file__)"]
    ran = subprocess.run(
        [str(venv / "bin" / "python"), RUN_CELLS, "gpuleak-wheel"], input=json.dumps(cells), env=environment,
        capture_output=True, text=True, timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    (cell,) = [json.loads(line) for line in ran.stdout.splitlines()]
    assert cell["status"] == "ok"
    assert cell["text"].split() == ["True", str(venv / "share" / "gpuleak" / "python" / "gpuleak" / "__init__.py")]

    removed = subprocess.run(
        ["gpuleak", "kernel", "uninstall", "gpuleak-wheel", "--python", str(venv / "bin" / "python")],
        env=environment, capture_output=True, text=True, timeout=120,
    )
    assert removed.returncode == 0, removed.stderr
    uninstall(venv, before)


def test_pytorch_gets_an_adapter_built_from_the_installed_source(tmp_path):
    torch = torch_python()
    cuda_lib_dir = os.environ.get("GPULEAK_CUDA_LIB_DIR", "/usr/local/cuda/lib64")
    if torch is None:
        pytest.skip("no PyTorch environment: run scripts/setup-torch.sh")
    if not os.path.exists(os.path.join(cuda_lib_dir, "libcublas.so.13")):
        pytest.skip("no CUDA 13 toolkit libraries in %s (set GPULEAK_CUDA_LIB_DIR)" % cuda_lib_dir)
    # A fresh environment of the PyTorch environment's CPython that sees its packages: torch among them.
    paths = subprocess.run(
        [torch, "-c", "import sys, sysconfig; print(sys._base_executable); print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()
    venv = tmp_path / "venv"
    before = make_venv(paths[0], venv)
    site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()
    borrowed = os.path.join(site, "torch-environment.pth")
    with open(borrowed, "w") as pth:
        pth.write(paths[1] + "\n")

    cache = tmp_path / "adapter-cache"
    environment = clean_environment(
        venv, GPULEAK_TORCH_ADAPTER_DIR=str(cache), CXXFLAGS="-Werror", PYTHONWARNINGS="ignore",
        **simulated_device_environment(setting("GPULEAK_TEST_SIMDEVICE_DIR"), cuda_lib_dir, 4 << 30),
    )
    script = os.path.join(WORKLOADS, "leak_losses_append.py")
    run = subprocess.run(
        ["gpuleak", "run", "-o", str(tmp_path / "run"), "--", "python", script],
        env=environment, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "building gpuleak's PyTorch adapter" in run.stderr
    with open(tmp_path / "run" / "report.json") as report:
        (process,) = json.load(report)["processes"]
    assert process["summary"]["allocator_reports_blocks"] is True
    assert process["diagnosis"]["kind"] == "leak"
    (adapter,) = cache.glob("*/libgpuleak_torch-*.so")
    # Its debug information names the source it was compiled from: the environment's copy.
    source = str(venv / "share" / "gpuleak" / "torch_adapter" / "gpuleak_torch_adapter.cpp")
    assert source.encode() in adapter.read_bytes()

    os.remove(borrowed)
    uninstall(venv, before)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
