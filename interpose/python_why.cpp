#include "python_why.h"

#include <atomic>
#include <cstdlib>
#include <dlfcn.h>

#include "python_frames.h"
#include "python_runtime.h"

namespace gpuleak {

namespace {

struct PyObject;

// The few functions of CPython's C API the call takes, looked up in the process (never linked).
struct PythonCalls {
    int (*gil_ensure)();
    void (*gil_release)(int);
    void (*error_fetch)(PyObject**, PyObject**, PyObject**);
    void (*error_restore)(PyObject*, PyObject*, PyObject*);
    void (*error_clear)();
    PyObject* (*dict_new)();
    int (*dict_set_item)(PyObject*, const char*, PyObject*);
    void (*dict_clear)(PyObject*);
    PyObject* (*builtins)();
    PyObject* (*run_string)(const char*, int, PyObject*, PyObject*, void*);
    PyObject* (*decode_file_name)(const char*);
    PyObject* (*from_long)(long);
    void (*decref)(PyObject*);
};

constexpr int kFileInput = 257; // Py_file_input

template <class Function> bool look_up(Function& function, const char* name) {
    function = reinterpret_cast<Function>(dlsym(RTLD_DEFAULT, name));
    return function != nullptr;
}

bool look_up_all(PythonCalls& calls) {
    return look_up(calls.gil_ensure, "PyGILState_Ensure") &&
           look_up(calls.gil_release, "PyGILState_Release") && look_up(calls.error_fetch, "PyErr_Fetch") &&
           look_up(calls.error_restore, "PyErr_Restore") && look_up(calls.error_clear, "PyErr_Clear") &&
           look_up(calls.dict_new, "PyDict_New") && look_up(calls.dict_set_item, "PyDict_SetItemString") &&
           look_up(calls.dict_clear, "PyDict_Clear") && look_up(calls.builtins, "PyEval_GetBuiltins") &&
           look_up(calls.run_string, "PyRun_StringFlags") &&
           look_up(calls.decode_file_name, "PyUnicode_DecodeFSDefault") &&
           look_up(calls.from_long, "PyLong_FromLong") && look_up(calls.decref, "Py_DecRef");
}

// Runs in a namespace of its own, so that nothing it binds lands in the program's modules; `package`,
// `device` and `tell` (say what went wrong on stderr) are set there. The package is
// imported as the program would import it; where it is not installed, from the directory `gpuleak run`
// named, under its own name, so that a later `import gpuleak` of the program finds the same module.
constexpr const char* kBootstrap = R"(
def _gpuleak_at_out_of_memory(package, device):
    import sys
    if "gpuleak" not in sys.modules:
        try:
            import gpuleak
        except ImportError:
            if not package:
                if tell:
                    sys.stderr.write(
                        "gpuleak: the program cannot import the gpuleak Python package and GPULEAK_PYTHON_PACKAGE "
                        "names none: what held the memory at out-of-memory errors is not recorded\n"
                    )
                return
            import importlib.util
            import os

            location = os.path.join(package, "gpuleak")
            spec = importlib.util.spec_from_file_location(
                "gpuleak", os.path.join(location, "__init__.py"), submodule_search_locations=[location]
            )
            module = importlib.util.module_from_spec(spec)
            sys.modules["gpuleak"] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules["gpuleak"]
                raise
    from gpuleak import _why

    _why.at_out_of_memory(device)


try:
    _gpuleak_at_out_of_memory(package, device)
except KeyboardInterrupt:
    # Ctrl-C while it searched: the program gets it, as soon as this returns.
    import _thread

    _thread.interrupt_main()
except Exception as error:
    import sys

    if tell:
        sys.stderr.write(
            "gpuleak: what held the memory at an out-of-memory error was not found: %s: %s\n"
            % (type(error).__name__, error)
        )
)";

// False, with no exception left set, when `value` could not be made or set.
bool set_item(const PythonCalls& calls, PyObject* namespace_, const char* name, PyObject* value) {
    if (value == nullptr) {
        calls.error_clear();
        return false;
    }
    const bool set = calls.dict_set_item(namespace_, name, value) == 0;
    calls.decref(value);
    if (!set)
        calls.error_clear();
    return set;
}

} // namespace

void why_at_out_of_memory(int device) {
    // Never during finalization: PyGILState_Ensure would end the calling thread there. Only in a thread
    // that has run Python (the program's threads, PyTorch's autograd threads): a thread of C++ code alone
    // may be one that a thread holding the GIL waits for, and would wait for the GIL in turn.
    const PythonRuntime* python = python_runtime(true);
    if (python == nullptr || !python_initialized() || python_finalizing() ||
        python->this_thread_state() == nullptr)
        return;
    static PythonCalls calls{};
    static const bool found = look_up_all(calls);
    if (!found)
        return;
    const int gil = calls.gil_ensure();
    PyObject* pending[3] = {nullptr, nullptr, nullptr};
    calls.error_fetch(&pending[0], &pending[1], &pending[2]);
    if (PyObject* namespace_ = calls.dict_new()) {
        PyObject* builtins = calls.builtins();
        const char* package = std::getenv("GPULEAK_PYTHON_PACKAGE");
        // What went wrong is said once: a program that catches its out-of-memory errors may meet many.
        static std::atomic<bool> first{true};
        const bool ready =
            builtins != nullptr && calls.dict_set_item(namespace_, "__builtins__", builtins) == 0 &&
            set_item(calls, namespace_, "package",
                     calls.decode_file_name(package != nullptr ? package : "")) &&
            set_item(calls, namespace_, "device", calls.from_long(device)) &&
            set_item(calls, namespace_, "tell", calls.from_long(first.exchange(false) ? 1 : 0));
        if (ready) {
            if (PyObject* result = calls.run_string(kBootstrap, kFileInput, namespace_, namespace_, nullptr))
                calls.decref(result);
        }
        calls.error_clear();
        // The function the code defined and the namespace refer to each other: broken here, not left to
        // the cyclic collector.
        calls.dict_clear(namespace_);
        calls.decref(namespace_);
    }
    calls.error_clear();
    calls.error_restore(pending[0], pending[1], pending[2]);
    calls.gil_release(gil);
}

} // namespace gpuleak
