"""Run by gdb's own Python (gdb -batch -x) for `gpuleak attach`, in a process gdb attached to and stopped:
nothing of this file runs in the program, only the calls it makes there.

`gpuleak` (a dict set with -ex before this file runs) says what to do: "action" is "attach" or "detach";
"library" is libgpuleak.so's path; "output" and "log" are gpuleak_attach's arguments; "oldest" and
"newest" the CPython 3 minor versions gpuleak reads. Lines "gpuleak-attach: KEY VALUE" on stdout say what
happened, for gpuleak attach (launcher/attach_command.cpp) to read.
"""

import gdb

RTLD_NOW = 0x2
RTLD_NOLOAD = 0x4
RTLD_GLOBAL = 0x100
# Functions every thread of a running program calls again and again, stopped at their entry: there the
# thread holds no lock of the C library's own (malloc's arenas), so loading a library from it cannot
# wait on itself (memray attach does the same).
SAFE_ENTRIES = ("malloc", "calloc", "realloc", "free")
# A stop on one of gpuleak's own threads is passed over: it may hold a lock that gpuleak_detach takes.
MOST_STOPS = 100


def say(key, value=""):
    print("gpuleak-attach: %s %s" % (key, value), flush=True)


def quoted(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def python_version():
    """'3.12.1', or None where the process has no CPython."""
    try:
        return gdb.parse_and_eval("(char*)Py_GetVersion()").string().split()[0]
    except gdb.error:
        return None


def stop_at_a_safe_entry():
    """False where the process ended instead."""
    for name in SAFE_ENTRIES:
        gdb.execute("break " + name, to_string=True)
    try:
        for _ in range(MOST_STOPS):
            gdb.execute("continue", to_string=True)
            thread = gdb.selected_thread()
            if thread is None:
                return False
            if not (thread.name or "").startswith("gpuleak"):
                return True
        return False
    finally:
        if gdb.selected_thread() is not None:
            gdb.execute("delete", to_string=True)


def main(request):
    gdb.execute("set pagination off", to_string=True)
    gdb.execute("set confirm off", to_string=True)
    version = python_version()
    if version is None:
        say("not-python")
        return
    say("python", version)
    parts = version.split(".")
    if request["action"] == "attach" and not (
        parts[0] == "3" and parts[1].isdigit() and request["oldest"] <= int(parts[1]) <= request["newest"]
    ):
        return
    if not stop_at_a_safe_entry():
        say("ended")
        return
    flags = RTLD_NOW | (RTLD_GLOBAL if request["action"] == "attach" else RTLD_NOLOAD)
    # Global: the PyTorch adapter, which libgpuleak loads, finds its C API there.
    handle = int(gdb.parse_and_eval("(void*)dlopen(%s, %d)" % (quoted(request["library"]), flags)))
    if handle == 0:
        error = gdb.parse_and_eval("(char*)dlerror()")
        say("no-library", error.string() if int(error) != 0 else "")
        return
    function = int(gdb.parse_and_eval('(void*)dlsym(%d, "gpuleak_%s")' % (handle, request["action"])))
    if function == 0:
        say("no-library", "%s has no gpuleak_%s" % (request["library"], request["action"]))
        return
    if request["action"] == "attach":
        call = "((int(*)(const char*, const char*))%d)(%s, %s)" % (
            function,
            quoted(request["output"]),
            quoted(request["log"]),
        )
    else:
        call = "((int(*)(void))%d)()" % function
    say("result", int(gdb.parse_and_eval(call)))


try:
    main(gpuleak)  # noqa: F821 - set by gpuleak attach before this file runs
except gdb.error as error:
    say("gdb-error", str(error).replace("\n", " "))
finally:
    if gdb.selected_inferior().pid != 0:
        gdb.execute("detach", to_string=True)
