#include "python/python_why.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <unistd.h>

#include "python/python_frames.h"
#include "python/python_runtime.h"

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
    PyObject* (*function_new)(void*, PyObject*, PyObject*); // PyCFunction_NewEx, of a PyMethodDef
    const char* (*as_utf8)(PyObject*);
    PyObject* none;
    void (*incref)(PyObject*);
    void (*decref)(PyObject*);
};

// CPython's PyMethodDef, whose layout is the stable ABI's; METH_NOARGS.
struct MethodDefinition {
    const char* name;
    PyObject* (*function)(PyObject*, PyObject*);
    int flags;
    const char* doc;
};
constexpr int kNoArguments = 0x0004;
constexpr int kOneArgument = 0x0008; // METH_O

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
           look_up(calls.from_long, "PyLong_FromLong") && look_up(calls.function_new, "PyCFunction_NewEx") &&
           look_up(calls.as_utf8, "PyUnicode_AsUTF8") && look_up(calls.none, "_Py_NoneStruct") &&
           look_up(calls.incref, "Py_IncRef") && look_up(calls.decref, "Py_DecRef");
}

// Runs in a namespace of its own, so that nothing it binds lands in the program's modules; `package`,
// `moment` ("out_of_memory", "exit", "ended" to record the exception the program's code ended with,
// "cell_error" to record the one a notebook's cell ended with, or "register_exit" to register
// `search_at_exit` with atexit), `device`, `cell` (the cell's name, or ""), `tell` (say what went wrong
// on stderr), `search_at_exit` and `record_error` (which records its document: format::EventType::
// ProgramError's) are set there. The program's exception is the one the interpreter printed as the
// program ended (sys.last_exc, before 3.12 sys.last_value), whose traceback starts at the main module's
// code; not one a test runner or the code module caught and left there, nor an IPython kernel's, which
// sets them at each cell's error and does not end: a cell's is the one IPython showed last. The package is
// imported as the program would import it; where it is not installed, from the directory `gpuleak run`
// named, under its own name, so that a later `import gpuleak` of the program finds the same module. For
// the search at exit, only then: a program that never ends normally never imports it.
constexpr const char* kBootstrap = R"(
def _gpuleak_why(moment):
    import sys
    if "gpuleak" not in sys.modules:
        try:
            import gpuleak
        except ImportError:
            if not package:
                # At exit, the program that was run without the package goes unrecorded, quietly.
                if tell and moment != "exit":
                    sys.stderr.write(
                        "gpuleak: the program cannot import the gpuleak Python package and GPULEAK_PYTHON_PACKAGE "
                        "names none: what held the memory at out-of-memory errors and at exit is not recorded\n"
                    )
                return None
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

    return _why


def _gpuleak_at(moment, *arguments):
    try:
        why = _gpuleak_why(moment)
        if why is not None:
            getattr(why, "at_" + moment)(*arguments)
    except KeyboardInterrupt:
        # Ctrl-C while it searched: the program gets it, as soon as this returns; at exit, it is exiting.
        if moment != "exit":
            import _thread

            _thread.interrupt_main()
    except Exception as error:
        import sys

        if tell:
            sys.stderr.write(
                "gpuleak: what held the memory %s was not found: %s: %s\n"
                % ("at the program's exit" if moment == "exit" else "at an out-of-memory error",
                   type(error).__name__, error)
            )


def _gpuleak_document(error, cell):
    import json

    def text(value):
        return value.encode("utf-8", "replace").decode("utf-8")

    kind = type(error)
    name = kind.__qualname__
    if kind.__module__ not in ("builtins", "__main__"):
        name = "%s.%s" % (kind.__module__, name)
    try:
        message = str(error)
    except Exception:
        message = ""
    frames = []
    traceback = error.__traceback__
    while traceback is not None:
        code = traceback.tb_frame.f_code
        function = getattr(code, "co_qualname", code.co_name)
        frames.append([text(code.co_filename)[-1024:], traceback.tb_lineno or 0, text(function)[-256:]])
        traceback = traceback.tb_next
    frames, message = frames[-64:], text(message[:4000])
    document = {"type": text(name)[:256], "message": message, "frames": frames}
    if cell:
        document["cell"] = text(cell)
    # Within what the recorder copies (64 KiB): the outermost frames go first, then the message's end.
    while True:
        document["frames"], document["message"] = frames, message
        encoded = json.dumps(document, ensure_ascii=False)
        if len(encoded.encode("utf-8")) <= 60000 or not (frames or message):
            return encoded
        if len(frames) > 1:
            frames = frames[1:]
        else:
            message = message[: len(message) // 2]


def _gpuleak_last_shown():
    import sys
    error = getattr(sys, "last_exc", None)
    return getattr(sys, "last_value", None) if error is None else error


def _gpuleak_ended():
    import sys
    error = _gpuleak_last_shown()
    ipython = sys.modules.get("IPython")
    if error is None or (ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None):
        return
    # What reached the top: its traceback starts at the main module's code (or runpy's, for -m). pytest
    # and the code module set the same variables for exceptions they caught, whose tracebacks start
    # where they caught them.
    traceback = error.__traceback__
    if traceback is None:
        return
    top = traceback.tb_frame
    if not (
        (top.f_code.co_name == "<module>" and top.f_globals.get("__name__") == "__main__")
        or top.f_code.co_filename.endswith("runpy.py")
    ):
        return
    record_error(_gpuleak_document(error, None))


if moment == "ended":
    try:
        _gpuleak_ended()
    except Exception:
        pass
elif moment == "cell_error":
    try:
        error = _gpuleak_last_shown()
        if error is not None:
            record_error(_gpuleak_document(error, cell))
    except Exception:
        pass
elif moment == "register_exit":
    import atexit

    atexit.register(search_at_exit)
elif moment == "exit":
    _gpuleak_at(moment)
else:
    _gpuleak_at(moment, device)
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

PyObject* search_at_exit(PyObject* /*self*/, PyObject* /*unused*/);
PyObject* record_error(PyObject* /*self*/, PyObject* document);
PyObject* record_cell_error(PyObject* /*self*/, PyObject* document);

// What went wrong is said once, whichever moment met it first: a program that catches its out-of-memory
// errors may meet many.
std::atomic<bool> g_tell{true};

// The search at exit was asked for, by which process (a forked child inherits its parent's registration,
// and searches nothing: it ends with its own trace, if any, and none of the parent's work), and what to
// call as it starts.
std::atomic<bool> g_exit_search_asked{false};
std::atomic<pid_t> g_exit_search_pid{0};
std::atomic<void (*)()> g_program_ended{nullptr};
std::atomic<void (*)(const char*)> g_program_error{nullptr};
std::atomic<bool> g_search_at_exit{false};
// What records a cell's exception (why_cell_error's `record`).
std::atomic<void (*)(const char*)> g_cell_error{nullptr};

// Runs the bootstrap for `moment` under the GIL, which the caller holds; `cell` names the cell whose
// exception "cell_error" records.
void run_bootstrap(const PythonCalls& calls, const char* moment, int device, const char* cell = "") {
    static MethodDefinition at_exit{"gpuleak_search_at_exit", search_at_exit, kNoArguments, nullptr};
    static MethodDefinition error{"gpuleak_record_error", record_error, kOneArgument, nullptr};
    static MethodDefinition cell_error{"gpuleak_record_cell_error", record_cell_error, kOneArgument, nullptr};
    const bool of_cell = std::strcmp(moment, "cell_error") == 0;
    // Registering, or recording the program's exception, says nothing: the searches keep their one say.
    const bool tell = std::strcmp(moment, "register_exit") != 0 && std::strcmp(moment, "ended") != 0 &&
                      !of_cell && g_tell.exchange(false);
    PyObject* pending[3] = {nullptr, nullptr, nullptr};
    calls.error_fetch(&pending[0], &pending[1], &pending[2]);
    if (PyObject* namespace_ = calls.dict_new()) {
        PyObject* builtins = calls.builtins();
        const char* package = std::getenv("GPULEAK_PYTHON_PACKAGE");
        const bool ready =
            builtins != nullptr && calls.dict_set_item(namespace_, "__builtins__", builtins) == 0 &&
            set_item(calls, namespace_, "package",
                     calls.decode_file_name(package != nullptr ? package : "")) &&
            set_item(calls, namespace_, "moment", calls.decode_file_name(moment)) &&
            set_item(calls, namespace_, "device", calls.from_long(device)) &&
            set_item(calls, namespace_, "cell", calls.decode_file_name(cell)) &&
            set_item(calls, namespace_, "tell", calls.from_long(tell ? 1 : 0)) &&
            set_item(calls, namespace_, "search_at_exit", calls.function_new(&at_exit, nullptr, nullptr)) &&
            set_item(calls, namespace_, "record_error",
                     calls.function_new(of_cell ? &cell_error : &error, nullptr, nullptr));
        if (ready) {
            if (PyObject* result = calls.run_string(kBootstrap, kFileInput, namespace_, namespace_, nullptr))
                calls.decref(result);
        }
        calls.error_clear();
        // The functions the code defined and the namespace refer to each other: broken here, not left to
        // the cyclic collector.
        calls.dict_clear(namespace_);
        calls.decref(namespace_);
    }
    calls.error_clear();
    calls.error_restore(pending[0], pending[1], pending[2]);
}

const PythonCalls* python_calls() {
    static PythonCalls calls{};
    static const bool found = look_up_all(calls);
    return found ? &calls : nullptr;
}

// Called by atexit, under the GIL, before the interpreter finalizes.
PyObject* search_at_exit(PyObject* /*self*/, PyObject* /*unused*/) {
    const PythonCalls* calls = python_calls();
    if (getpid() == g_exit_search_pid.load(std::memory_order_relaxed)) {
        run_bootstrap(*calls, "ended", 0);
        if (void (*program_ended)() = g_program_ended.load(std::memory_order_relaxed))
            program_ended();
        if (g_search_at_exit.load(std::memory_order_relaxed))
            run_bootstrap(*calls, "exit", 0);
    }
    calls->incref(calls->none);
    return calls->none;
}

// The document as UTF-8, to `record`.
PyObject* pass_document(PyObject* document, void (*record)(const char*)) {
    const PythonCalls* calls = python_calls();
    if (const char* text = calls->as_utf8(document); text == nullptr)
        calls->error_clear();
    else if (record != nullptr)
        record(text);
    calls->incref(calls->none);
    return calls->none;
}

// The bootstrap's record_error, for the program's exception.
PyObject* record_error(PyObject* /*self*/, PyObject* document) {
    return pass_document(document, g_program_error.load(std::memory_order_relaxed));
}

// The bootstrap's record_error, for a cell's.
PyObject* record_cell_error(PyObject* /*self*/, PyObject* document) {
    return pass_document(document, g_cell_error.load(std::memory_order_relaxed));
}

// Py_AddPendingCall's function: the interpreter's main thread runs it, holding the GIL, between two
// bytecodes.
int register_search_at_exit(void* /*unused*/) {
    if (const PythonCalls* calls = python_calls(); calls != nullptr && !python_finalizing())
        run_bootstrap(*calls, "register_exit", 0);
    return 0;
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
    const PythonCalls* calls = python_calls();
    if (calls == nullptr)
        return;
    const int gil = calls->gil_ensure();
    run_bootstrap(*calls, "out_of_memory", device);
    calls->gil_release(gil);
}

void why_cell_error(const char* cell, void (*record)(const char* document)) {
    constexpr size_t kMaxCellBytes = 1023;
    const PythonRuntime* python = python_runtime(true);
    if (python == nullptr || !python_initialized() || python_finalizing())
        return;
    const PythonCalls* calls = python_calls();
    if (calls == nullptr)
        return;
    char name[kMaxCellBytes + 1];
    const size_t bytes = strnlen(cell, kMaxCellBytes);
    std::memcpy(name, cell, bytes);
    name[bytes] = '\0';
    g_cell_error.store(record, std::memory_order_relaxed);
    // The extension calls it holding the GIL; a C caller that does not gets it taken.
    const int gil = calls->gil_ensure();
    run_bootstrap(*calls, "cell_error", 0, name);
    calls->gil_release(gil);
}

void why_at_exit_once_holding(void (*program_ended)(), void (*program_error)(const char*), bool search) {
    if (g_exit_search_asked.load(std::memory_order_relaxed))
        return;
    const PythonRuntime* python = python_runtime(true);
    if (python == nullptr || !python_initialized() || python_finalizing())
        return;
    using AddPendingCall = int (*)(int (*)(void*), void*);
    static const auto add_pending_call =
        reinterpret_cast<AddPendingCall>(dlsym(RTLD_DEFAULT, "Py_AddPendingCall"));
    if (add_pending_call == nullptr || g_exit_search_asked.exchange(true))
        return;
    g_program_ended.store(program_ended, std::memory_order_relaxed);
    g_program_error.store(program_error, std::memory_order_relaxed);
    g_search_at_exit.store(search, std::memory_order_relaxed);
    g_exit_search_pid.store(getpid(), std::memory_order_relaxed);
    // Its queue is full: a later allocation asks again.
    if (add_pending_call(register_search_at_exit, nullptr) != 0)
        g_exit_search_asked.store(false);
}

} // namespace gpuleak
