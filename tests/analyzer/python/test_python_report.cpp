// The report of a Python program, from hand-built traces: Python frames resolved to file, qualified name
// and line, placed among the native frames, the default and --native views of a stack, leak origins
// grouped by Python stack, and how the text and JSON reports name them.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <map>
#include <string>

#include "common/printable.h"
#include "in_memory_report.h"
#include "model/process_model.h"
#include "model/site_keys.h"
#include "python/python_stacks.h"
#include "read/trace_reader.h"
#include "render/diagnosis_text.h"
#include "render/render_json.h"
#include "render/render_text.h"
#include "render/wrapped_text.h"
#include "report/python_interleave.h"
#include "report/report.h"
#include "report/stack_view.h"
#include "report/symbolized_stacks.h"
#include "trace_builder.h"

using namespace gpuleak::analyzer;
using gpuleak::test::report_of;
using gpuleak::test::TraceBuilder;
using gpuleak::test::TraceLayout;
namespace format = gpuleak::format;

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kSecond = 1'000'000'000;
constexpr uint64_t kStart = 1000;
constexpr uint32_t kBeforeFirst = format::kPythonOffsetBeforeFirstInstruction;

// 3.10's format, first line 80: [0, 6) line 81, [6, 10) no line, [10, 18) line 82.
const std::vector<uint8_t> kLineTable = {6, 1, 0, 2, 4, 0x80, 8, 0xff};

TraceReader parse(const TraceBuilder& builder) {
    return TraceReader::parse(builder.bytes(), "trace.bin");
}

format::LiveSlot live(uint64_t address, uint64_t size, uint32_t stack_id, uint64_t seconds) {
    format::LiveSlot slot{};
    slot.state = format::kSlotLive;
    slot.address = address;
    slot.size = size;
    slot.kind = static_cast<uint8_t>(format::MemoryKind::Device);
    slot.stack_id = stack_id;
    slot.time_ns = kStart + seconds * kSecond;
    return slot;
}

format::EventRecord allocation_event(const format::LiveSlot& slot) {
    format::EventRecord event{};
    event.type = static_cast<uint16_t>(format::EventType::Alloc);
    event.kind = slot.kind;
    event.address = slot.address;
    event.size = slot.size;
    event.stack_id = slot.stack_id;
    event.thread_id = slot.thread_id;
    event.time_ns = slot.time_ns;
    return event;
}

// A step's scratch memory, made and freed at once by `stack_id`: between two survivors of a site, made at
// another call of a function their stacks pass through, it makes them two repetitions of the program's
// work (a step of a loop), where a growing site is made.
void add_scratch(TraceBuilder& builder, uint32_t stack_id, uint64_t nanoseconds, uint32_t thread_id = 0) {
    format::EventRecord scratch{};
    scratch.type = static_cast<uint16_t>(format::EventType::Alloc);
    scratch.kind = static_cast<uint8_t>(format::MemoryKind::Device);
    scratch.address = 0xf00000 + builder.header().ring_head;
    scratch.size = kMiB;
    scratch.stack_id = stack_id;
    scratch.thread_id = thread_id;
    scratch.time_ns = kStart + nanoseconds;
    builder.append_event(scratch);
    scratch.type = static_cast<uint16_t>(format::EventType::Free);
    builder.append_event(scratch);
}

ReportFrame native(const std::string& function, const std::string& module, uint32_t line = 10) {
    return {function, function + ".c", line, module, 0x100, false, false, {}, {}};
}

ReportFrame python(const std::string& qualname, const std::string& file, uint32_t line) {
    return {qualname, file, line, {}, 0, false, true, {}, {}};
}

std::vector<std::string> functions(const std::vector<ReportFrame>& frames) {
    std::vector<std::string> names;
    for (const ReportFrame& frame : frames)
        names.push_back((frame.python ? "py:" : "") + frame.function);
    return names;
}

// What a view shows, one string a line: the function of a frame, or "... N" for frames left out.
std::vector<std::string> shown(const std::vector<ReportFrame>& frames, size_t depth,
                               bool all_native = false) {
    ReportOptions options;
    options.stack_depth = depth;
    options.native = all_native;
    std::vector<std::string> lines;
    for (const StackLine& line : stack_lines(frames, options)) {
        switch (line.kind) {
        case StackLine::Kind::Frame:
            lines.push_back((line.frame->python ? "py:" : "") + line.frame->function);
            break;
        case StackLine::Kind::NativeLeftOut:
            lines.push_back(fmt::format("... {} native", line.count));
            break;
        case StackLine::Kind::MoreLeftOut:
            lines.push_back(fmt::format("... {} more", line.count));
            break;
        case StackLine::Kind::MorePythonLeftOut:
            lines.push_back(fmt::format("... {} more Python", line.count));
            break;
        }
    }
    return lines;
}

const std::string kPython = "/usr/bin/python3.12";
const std::string kTorch = "/site-packages/torch/lib/libtorch_cuda.so";

// A PyTorch-like stack, innermost first: an operator allocates, called from Trainer.step through the
// binding; step was called by a hook that a C++ extension ran, called from main.
std::vector<ReportFrame> torch_stack() {
    return {
        native("c10::cuda::allocate", kTorch),
        native("at::empty", kTorch),
        native("pybind11::dispatch", "/site-packages/torch/lib/libtorch_python.so"),
        native("_PyObject_MakeTpCall", kPython),
        native("_PyEval_EvalFrameDefault", kPython),
        python("Trainer.step", "/srv/train.py", 81),
        native("_PyEval_Vector", kPython),
        native("_PyEval_EvalFrameDefault", kPython),
        python("hook", "/srv/hooks.py", 5),
        native("PyObject_Call", kPython),
        native("torch::autograd::call_hook", kTorch),
        native("_PyObject_MakeTpCall", kPython),
        native("_PyEval_EvalFrameDefault", kPython),
        python("main", "/srv/train.py", 102),
        native("Py_RunMain", kPython),
        native("__libc_start_main", "/lib/libc.so.6"),
    };
}

// Stacks given as they are, for the renderers.
class FixedStacks : public StackFrames {
  public:
    explicit FixedStacks(std::map<uint32_t, std::vector<ReportFrame>> stacks) : stacks_(std::move(stacks)) {}
    const std::vector<ReportFrame>& frames(uint32_t stack_id) override { return stacks_[stack_id]; }

  private:
    std::map<uint32_t, std::vector<ReportFrame>> stacks_;
};

// Code objects: Trainer.step and main in train.py, and another main in other.py.
void add_code(TraceBuilder& builder) {
    builder.header().python_version = format::python_version(3, 10);
    builder.add_code(1, "/srv/train.py", "Trainer.step", 80, kLineTable);
    builder.add_code(2, "/srv/train.py", "main", 100, kLineTable);
    builder.add_code(3, "/srv/other.py", "main", 10, kLineTable);
}

// Live at the end: a Python line reached through two native paths (stacks 1 and 2), the same line from
// another caller (3), another line of the same function (4), native stacks (5, 6) and Python stacks
// whose code objects were not recorded (7, 8). A failure at 9.5 s sees all of it live.
TraceBuilder grouping_trace() {
    TraceLayout layout;
    layout.ring_capacity = 16;
    TraceBuilder builder(layout);
    builder.header().start_monotonic_ns = kStart;
    add_code(builder);
    builder.add_stack(1, {0x1, 0x2}, {{1, 0}, {2, 12}});
    builder.add_stack(2, {0x3}, {{1, 4}, {2, 14}});
    builder.add_stack(3, {0x1, 0x2}, {{1, 0}, {3, 12}});
    builder.add_stack(4, {0x1}, {{1, 12}, {2, 12}});
    builder.add_stack(5, {0x9});
    builder.add_stack(6, {0x9});
    builder.add_stack(7, {0x1}, {{0, 0}});
    builder.add_stack(8, {0x1}, {{0, 0}});
    builder.add_stack(9, {0x1}, {{1, 8}, {2, 12}}); // a step's scratch, at another line of Trainer.step
    std::vector<format::LiveSlot> slots = {
        live(0x1000, 1 * kMiB, 1, 1),  live(0x4000, 512 << 10, 3, 2), live(0x5000, 256 << 10, 4, 2),
        live(0x6000, 128 << 10, 5, 2), live(0x7000, 128 << 10, 6, 2), live(0x8000, 64 << 10, 7, 2),
        live(0x9000, 64 << 10, 8, 2),  live(0x2000, 1 * kMiB, 1, 5),  live(0x3000, 3 * kMiB, 2, 9),
    };
    // Made in the order of their times, with a step's scratch after the first site's first and second
    // survivors: those three span 12 of the 14 events.
    for (size_t i = 0; i < slots.size(); ++i) {
        slots[i].sequence = builder.header().ring_head;
        builder.set_live(i, slots[i]);
        builder.append_event(allocation_event(slots[i]));
        if (i == 0 || i == 7)
            add_scratch(builder, 9, slots[i].time_ns - kStart);
    }
    format::EventRecord failure{};
    failure.type = static_cast<uint16_t>(format::EventType::AllocFailed);
    failure.kind = static_cast<uint8_t>(format::MemoryKind::Device);
    failure.address = UINT64_MAX;
    failure.size = 8ULL << 30;
    failure.result = 2;
    failure.stack_id = 1;
    failure.time_ns = kStart + 9 * kSecond + kSecond / 2;
    builder.append_event(failure);
    builder.add_notable(failure);
    builder.header().accounting.live_bytes[0][1] = 5 * kMiB + (1152 << 10);
    builder.end_exited(0, kStart + 10 * kSecond);
    return builder;
}

} // namespace

TEST_CASE("Python frames resolve to file, qualified name and the line of their instruction") {
    TraceBuilder builder;
    add_code(builder);
    builder.add_code(4, "/srv/cut.py", "cut", 7, {6, 1}, static_cast<uint32_t>(format::CodeFlag::Truncated));
    builder.add_stack(1, {0x1}, {{1, 4}, {1, 8}, {1, 12}, {2, kBeforeFirst}, {4, 2}, {4, 40}});
    builder.add_stack(2, {0x1}, {{0, 4}, {99, 4}});
    builder.add_stack(3, {0x1});
    const TraceReader trace = parse(builder);
    const PythonStacks stacks(trace);

    const auto& frames = stacks.of(1);
    REQUIRE(frames.size() == 6);
    CHECK(stacks.function(frames[0].function).file == "/srv/train.py");
    CHECK(stacks.function(frames[0].function).qualname == "Trainer.step");
    CHECK(frames[0].line == 81);
    CHECK(frames[1].line == 0); // a range CPython gives no line
    CHECK(frames[2].line == 82);
    CHECK(frames[2].function == frames[0].function);
    CHECK(stacks.function(frames[3].function).qualname == "main");
    CHECK(frames[3].line == 100); // before the first instruction: the first line
    CHECK(frames[4].line == 8);
    CHECK(frames[5].line == 0); // past what the truncated table holds
    CHECK(stacks.function(frames[5].function).file == "/srv/cut.py");

    // Code id 0 (did not fit) and an id the trace lacks: unknown frames, not an error.
    REQUIRE(stacks.of(2).size() == 2);
    CHECK_FALSE(PythonStacks::known(stacks.of(2)[0]));
    CHECK_FALSE(PythonStacks::known(stacks.of(2)[1]));
    CHECK(stacks.function(stacks.of(2)[0].function).file.empty());
    CHECK(stacks.of(3).empty());
    CHECK(stacks.of(42).empty());
}

TEST_CASE("without the Python version no Python line is known") {
    TraceBuilder builder;
    add_code(builder);
    builder.header().python_version = 0;
    builder.add_stack(1, {}, {{1, 4}, {1, kBeforeFirst}});
    const TraceReader trace = parse(builder);
    const PythonStacks stacks(trace);
    CHECK(stacks.of(1)[0].line == 0);
    CHECK(stacks.of(1)[1].line == 0);
    CHECK(stacks.function(stacks.of(1)[0].function).qualname == "Trainer.step");
}

TEST_CASE("symbolized stacks carry their Python frames, unknown ones included") {
    TraceBuilder builder;
    add_code(builder);
    builder.add_stack(1, {0x401000, 0x402000}, {{1, 4}, {0, 0}, {2, 14}});
    const TraceReader trace = parse(builder);
    SymbolizedStacks stacks(trace, std::make_shared<ModuleRegistry>());
    const std::vector<ReportFrame>& frames = stacks.frames(1);
    REQUIRE(frames.size() == 5);
    // Without a module map the native frames name no evaluation loop: the Python frames follow them all.
    CHECK_FALSE(frames[0].python);
    CHECK(frames[0].module_offset == 0x401000);
    CHECK_FALSE(frames[1].python);
    CHECK(frames[2].python);
    CHECK(frames[2].function == "Trainer.step");
    CHECK(frames[2].file == "/srv/train.py");
    CHECK(frames[2].line == 81);
    CHECK(frames[2].module.empty());
    CHECK(frames[3].python);
    CHECK(frames[3].function.empty());
    CHECK(frames[3].file.empty());
    CHECK(frames[3].line == 0);
    CHECK(frames[4].function == "main");
    CHECK(frames[4].line == 102);
    CHECK(python_frame_name(frames[2]) == "/srv/train.py:81 in Trainer.step");
    CHECK(python_frame_name(frames[3]) == "a Python frame whose code object was not recorded");
    CHECK(stacks.describe(1) == "/srv/train.py:81 in Trainer.step");
}

TEST_CASE("a Python frame without a line is named by file and function") {
    CHECK(python_frame_name(python("Model.forward", "/srv/model.py", 0)) == "/srv/model.py in Model.forward");
    CHECK(python_frame_name(python("<module>", "/srv/模型.py", 3)) == "/srv/模型.py:3 in <module>");
}

TEST_CASE("Python frames go after the evaluation loops that ran them") {
    const auto loop = [](int n) { return native("_PyEval_EvalFrameDefault", kPython, n); };
    const std::vector<ReportFrame> inner = {python("leak", "a.py", 1), python("f", "a.py", 2),
                                            python("<module>", "a.py", 3)};
    SECTION("one loop per frame (3.10): one to one") {
        const std::vector<ReportFrame> frames = interleave_python_frames(
            {native("ffi_call", "libffi"), loop(1), native("_PyEval_Vector", kPython), loop(2),
             native("_PyEval_Vector", kPython), loop(3), native("main", kPython)},
            inner, {true, true, true});
        CHECK(functions(frames) ==
              std::vector<std::string>{"ffi_call", "_PyEval_EvalFrameDefault", "py:leak", "_PyEval_Vector",
                                       "_PyEval_EvalFrameDefault", "py:f", "_PyEval_Vector",
                                       "_PyEval_EvalFrameDefault", "py:<module>", "main"});
    }
    SECTION("one loop for all (3.11+): every frame after it") {
        const std::vector<ReportFrame> frames = interleave_python_frames(
            {native("ffi_call", "libffi"), loop(1), native("main", kPython)}, inner, {false, false, true});
        CHECK(functions(frames) == std::vector<std::string>{"ffi_call", "_PyEval_EvalFrameDefault", "py:leak",
                                                            "py:f", "py:<module>", "main"});
    }
    // 3.11+: a key function that sorted() called back runs in a loop of its own, with what it calls.
    const std::vector<ReportFrame> callback = {python("leak", "a.py", 1), python("helper", "a.py", 2),
                                               python("key", "a.py", 3), python("caller", "a.py", 4),
                                               python("<module>", "a.py", 5)};
    const std::vector<bool> callback_entries = {false, false, true, false, true};
    const std::vector<ReportFrame> sorted_native = {native("ffi_call", "libffi"),
                                                    loop(1),
                                                    native("_PyObject_VectorcallTstate", kPython),
                                                    native("list_sort_impl", kPython),
                                                    native("builtin_sorted", kPython),
                                                    loop(2),
                                                    native("PyEval_EvalCode", kPython),
                                                    native("main", kPython)};
    SECTION("runs of frames, each ending at a loop entry, one run a loop (3.11+)") {
        CHECK(functions(interleave_python_frames(sorted_native, callback, callback_entries)) ==
              std::vector<std::string>{"ffi_call", "_PyEval_EvalFrameDefault", "py:leak", "py:helper",
                                       "py:key", "_PyObject_VectorcallTstate", "list_sort_impl",
                                       "builtin_sorted", "_PyEval_EvalFrameDefault", "py:caller",
                                       "py:<module>", "PyEval_EvalCode", "main"});
    }
    SECTION("more runs than loops, the native stack cut before the outer loops: the rest after it all") {
        const std::vector<ReportFrame> cut(sorted_native.begin(), sorted_native.begin() + 4);
        CHECK(functions(interleave_python_frames(cut, callback, callback_entries)) ==
              std::vector<std::string>{"ffi_call", "_PyEval_EvalFrameDefault", "py:leak", "py:helper",
                                       "py:key", "_PyObject_VectorcallTstate", "list_sort_impl", "py:caller",
                                       "py:<module>"});
    }
    SECTION("fewer runs than loops, the Python frames cut: the outer loops run none") {
        const std::vector<ReportFrame> cut(callback.begin(), callback.begin() + 2);
        CHECK(functions(interleave_python_frames(sorted_native, cut, {false, false})) ==
              std::vector<std::string>{"ffi_call", "_PyEval_EvalFrameDefault", "py:leak", "py:helper",
                                       "_PyObject_VectorcallTstate", "list_sort_impl", "builtin_sorted",
                                       "_PyEval_EvalFrameDefault", "PyEval_EvalCode", "main"});
    }
    SECTION("more loops than frames: the outer loops run none") {
        const std::vector<ReportFrame> frames = interleave_python_frames({loop(1), loop(2), loop(3), loop(4)},
                                                                         {python("leak", "a.py", 1)}, {true});
        CHECK(functions(frames) ==
              std::vector<std::string>{"_PyEval_EvalFrameDefault", "py:leak", "_PyEval_EvalFrameDefault",
                                       "_PyEval_EvalFrameDefault", "_PyEval_EvalFrameDefault"});
    }
    SECTION("no loop among the native frames: the Python frames follow them all") {
        const std::vector<ReportFrame> frames =
            interleave_python_frames({native("", "python"), native("", "python")}, inner, {true, true, true});
        CHECK(functions(frames) == std::vector<std::string>{"", "", "py:leak", "py:f", "py:<module>"});
    }
    SECTION("the loop's cold part counts, a function that only starts with its name does not") {
        const std::vector<ReportFrame> frames = interleave_python_frames(
            {native("_PyEval_EvalFrameDefaultHelper", kPython),
             native("_PyEval_EvalFrameDefault.cold", kPython), native("main", kPython)},
            {python("leak", "a.py", 1)}, {true});
        CHECK(functions(frames) == std::vector<std::string>{"_PyEval_EvalFrameDefaultHelper",
                                                            "_PyEval_EvalFrameDefault.cold", "py:leak",
                                                            "main"});
    }
    SECTION("no Python frames: the native stack as it is") {
        CHECK(functions(interleave_python_frames({loop(1), native("main", kPython)}, {}, {})) ==
              std::vector<std::string>{"_PyEval_EvalFrameDefault", "main"});
    }
}

TEST_CASE("the loop entries come from the trace and tell no two sites apart") {
    TraceBuilder builder;
    add_code(builder);
    constexpr uint32_t kLoopEntry = format::kPythonFrameLoopEntry;
    builder.add_stack(1, {0x1}, {{1, 4}, {2, 12 | kLoopEntry}});
    builder.add_stack(2, {0x1}, {{1, 4 | kLoopEntry}, {2, 12 | kLoopEntry}});
    builder.add_stack(3, {0x1});
    const TraceReader trace = parse(builder);
    const PythonStacks stacks(trace);
    CHECK(stacks.loop_entries(1) == std::vector<bool>{false, true});
    CHECK(stacks.loop_entries(2) == std::vector<bool>{true, true});
    CHECK(stacks.loop_entries(3).empty());
    CHECK(stacks.of(1) == stacks.of(2));
    const SiteKeys sites(trace);
    CHECK(sites.of(1) == sites.of(2));
}

TEST_CASE("the default view: the native frames that made the call, then the Python frames") {
    const std::vector<ReportFrame> frames = torch_stack();
    SECTION("the interpreter's frames are left out silently, other native frames as one line a run") {
        CHECK(shown(frames, 8) == std::vector<std::string>{"c10::cuda::allocate", "at::empty",
                                                           "pybind11::dispatch", "py:Trainer.step", "py:hook",
                                                           "... 4 native", "py:main"});
    }
    SECTION("the native frames above are limited to the depth, and so are the Python frames, each") {
        CHECK(shown(frames, 1) == std::vector<std::string>{"c10::cuda::allocate", "... 4 native",
                                                           "py:Trainer.step", "... 2 more Python"});
        CHECK(shown(frames, 2) == std::vector<std::string>{"c10::cuda::allocate", "at::empty", "... 3 native",
                                                           "py:Trainer.step", "py:hook",
                                                           "... 1 more Python"});
    }
    SECTION("--native: every frame in order, up to the depth") {
        std::vector<std::string> all = functions(frames);
        CHECK(shown(frames, 100, true) == all);
        all.resize(5);
        all.push_back("... 11 more");
        CHECK(shown(frames, 5, true) == all);
    }
    SECTION("a native stack is shown as before") {
        const std::vector<ReportFrame> native_only = {native("a", "x"), native("b", "x"), native("c", "x")};
        CHECK(shown(native_only, 2) == std::vector<std::string>{"a", "b", "... 1 more"});
        CHECK(shown(native_only, 3) == std::vector<std::string>{"a", "b", "c"});
    }
    SECTION("without a loop to tell the interpreter by, every native frame left out is counted") {
        const std::vector<ReportFrame> unsymbolized = {native("", "python"), python("leak", "a.py", 1),
                                                       native("", "python"), python("f", "a.py", 2)};
        CHECK(shown(unsymbolized, 8) == std::vector<std::string>{"", "py:leak", "... 1 native", "py:f"});
    }
}

TEST_CASE("leak origins group by Python stack, native stacks by stack") {
    const TraceReader trace = parse(grouping_trace());
    const ProcessModel model = build_model("trace.bin", trace);
    struct Site {
        uint32_t stack_id;
        uint64_t bytes;
        uint64_t count;
        bool operator==(const Site&) const = default;
    };
    std::vector<Site> sites;
    for (const LeakSite& site : model.leak_sites)
        sites.push_back({site.stack_id, site.bytes, site.count});
    // Stacks 1 and 2 are one site, shown with stack 2, which holds more of its bytes; the same line
    // from another caller (3) and another line (4) are sites of their own.
    CHECK(sites == std::vector<Site>{{2, 5 * kMiB, 3},
                                     {3, 512 << 10, 1},
                                     {4, 256 << 10, 1},
                                     {5, 128 << 10, 1},
                                     {6, 128 << 10, 1},
                                     {7, 64 << 10, 1},
                                     {8, 64 << 10, 1}});
    const LeakSite& top = model.leak_sites.front();
    CHECK(top.growing);
    CHECK(top.first_ns == 1 * kSecond);
    CHECK(top.last_ns == 9 * kSecond);
    REQUIRE(model.growth_sites == std::vector<size_t>{0});

    // What was held at the failure groups the same way.
    REQUIRE(model.failures.size() == 1);
    std::vector<Site> held;
    for (const LiveSiteAt& site : model.failures[0].top_sites_then)
        held.push_back({site.stack_id, site.bytes, site.count});
    CHECK(held ==
          std::vector<Site>{
              {2, 5 * kMiB, 3}, {3, 512 << 10, 1}, {4, 256 << 10, 1}, {5, 128 << 10, 1}, {6, 128 << 10, 1}});
}

TEST_CASE("the text report names the Python line of a leak, in the diagnosis and the stacks") {
    const TraceReader trace = parse(grouping_trace());
    gpuleak::analyzer::ReportSet set;
    std::vector<ProcessReport>& reports = set.all();
    reports.push_back(report_of(trace));
    CHECK(reports[0].diagnosis.kind == DiagnosisKind::Leak);
    CHECK_THAT(diagnosis_text(reports[0].model, reports[0].diagnosis, *reports[0].stacks),
               Catch::StartsWith("Memory kept growing at /srv/train.py:81 in Trainer.step: 3 allocations of "
                                 "1.7 MiB (5.0 MiB), made through 86% of the program's work (1.00 s to 9.00 "
                                 "s), were still alive."));
    ReportOptions options;
    const std::string text = render_text(set, options);
    // Each site leads with the program's line; the program's frames that called it follow.
    CHECK_THAT(text, Catch::Contains("  #1 /srv/train.py:81 in Trainer.step\n"
                                     "        5.0 MiB in 3 device allocations, made 1.00–9.00 s, through "
                                     "86% of the work: growing\n"
                                     "        from /srv/train.py:102 in main\n"));
    CHECK_THAT(text, Catch::Contains("  #1 /srv/train.py:81 in Trainer.step\n"
                                     "        512.0 KiB in 1 device allocation, made at 2.00 s\n"
                                     "        from /srv/other.py:12 in main\n"));
    CHECK_THAT(text, Catch::Contains("a Python frame whose code object was not recorded\n"));
    CHECK_THAT(text, Catch::Contains("allocations from /srv/train.py:81 in Trainer.step\n")); // held then
}

TEST_CASE("the text report collapses native frames by default and shows them all with --native") {
    const TraceReader trace = parse(grouping_trace());
    gpuleak::analyzer::ReportSet set;
    std::vector<ProcessReport>& reports = set.all();
    reports.push_back(report_of(trace));
    reports[0].stacks =
        std::make_unique<FixedStacks>(std::map<uint32_t, std::vector<ReportFrame>>{{2, torch_stack()}});
    ReportOptions options;
    options.top = 1;
    std::string text = render_text(set, options);
    CHECK_THAT(text, Catch::Contains("  #1 /srv/train.py:81 in Trainer.step\n"
                                     "        5.0 MiB in 3 device allocations, made 1.00–9.00 s, through "
                                     "86% of the work: growing\n"
                                     "        from /srv/hooks.py:5 in hook ← /srv/train.py:102 in main\n\n"));
    options.native = true;
    options.stack_depth = 6;
    text = render_text(set, options);
    CHECK_THAT(text, Catch::Contains("        _PyEval_EvalFrameDefault  _PyEval_EvalFrameDefault.c:10\n"
                                     "        /srv/train.py:81 in Trainer.step\n"
                                     "        ... 10 more frames\n"));
}

TEST_CASE("a site's header is the program's line with its text, cut to fit the line") {
    const TraceReader trace = parse(grouping_trace());
    gpuleak::analyzer::ReportSet set;
    std::vector<ProcessReport>& reports = set.all();
    reports.push_back(report_of(trace));
    std::vector<ReportFrame> frames = torch_stack();
    frames[5].source_line =
        "return torch.triu(torch.full((length, length), float(\"-inf\"), device=device), " +
        std::string(60, 'x');
    frames[13].source_line = "main()";
    reports[0].stacks =
        std::make_unique<FixedStacks>(std::map<uint32_t, std::vector<ReportFrame>>{{2, frames}});
    ReportOptions options;
    options.top = 1;
    const std::string text = render_text(set, options);
    const size_t start = text.find("  #1 /srv/train.py:81 in Trainer.step  return torch.triu(torch.full(");
    REQUIRE(start != std::string::npos);
    const std::string header = text.substr(start, text.find('\n', start) - start);
    CHECK(gpuleak::analyzer::columns(header) == kWrapColumn);
    CHECK_THAT(header, Catch::EndsWith("…"));
    CHECK_THAT(text, Catch::Contains("        from /srv/hooks.py:5 in hook ← /srv/train.py:102 in main\n"));
}

TEST_CASE("JSON frames say which are Python frames and follow the same view") {
    const TraceReader trace = parse(grouping_trace());
    gpuleak::analyzer::ReportSet set;
    std::vector<ProcessReport>& reports = set.all();
    reports.push_back(report_of(trace));
    reports[0].stacks =
        std::make_unique<FixedStacks>(std::map<uint32_t, std::vector<ReportFrame>>{{2, torch_stack()}});
    ReportOptions options;
    options.top = 1;
    nlohmann::json frames = render_json(set, options)["processes"][0]["leaks"][0]["frames"];
    REQUIRE(frames.size() == 6);
    CHECK(frames[0] == nlohmann::json{{"function", "c10::cuda::allocate"},
                                      {"file", "c10::cuda::allocate.c"},
                                      {"line", 10},
                                      {"module", kTorch},
                                      {"module_offset", 0x100},
                                      {"inlined", false},
                                      {"python", false}});
    CHECK(frames[4] == nlohmann::json{{"function", "hook"},
                                      {"file", "/srv/hooks.py"},
                                      {"line", 5},
                                      {"module", ""},
                                      {"module_offset", 0},
                                      {"inlined", false},
                                      {"python", true},
                                      {"program", true},
                                      {"source_line", ""}});
    std::vector<bool> python_flags;
    for (const auto& frame : frames)
        python_flags.push_back(frame["python"]);
    CHECK(python_flags == std::vector<bool>{false, false, false, true, true, true});
    options.native = true;
    options.stack_depth = 100;
    frames = render_json(set, options)["processes"][0]["leaks"][0]["frames"];
    CHECK(frames.size() == torch_stack().size());
}

TEST_CASE("a native function reads without its parameter list, return type and clone suffix") {
    CHECK(
        short_function_name("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed "
                            "char, unsigned long, CUstream_st*)") ==
        "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc");
    CHECK(short_function_name("bool at::cuda::blas::gemm_and_bias<float, float>(bool, bool, long)") ==
          "at::cuda::blas::gemm_and_bias<float, float>");
    CHECK(short_function_name(
              "at::native::(anonymous namespace)::addmm_out_cuda_impl(at::Tensor&, at::Tensor "
              "const&) [clone .isra.0]") == "at::native::(anonymous namespace)::addmm_out_cuda_impl");
    CHECK(short_function_name("run()::{lambda(int)#1}::operator()(int) const") ==
          "run()::{lambda(int)#1}::operator()");
    CHECK(short_function_name("std::vector<int, std::allocator<int> >::push_back(int const&)") ==
          "std::vector<int, std::allocator<int> >::push_back");
    CHECK(short_function_name(
              "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<"
              "c10::CompileTimeFunctionPointer<at::Tensor (at::Tensor const&), &at::wrapper_CUDA_mm>, "
              "at::Tensor> >::call(c10::OperatorKernel*, at::Tensor const&)") ==
          "c10::impl::wrap_kernel_functor_unboxed_<...>::call");
    CHECK(short_function_name("std::ostream& operator<<(std::ostream&, at::Tensor const&)") == "operator<<");
    CHECK(short_function_name("foo(int) [clone .constprop.0] [clone .cold]") == "foo");
    CHECK(short_function_name("foo(int)::{default arg#1}::{lambda()#1}::operator()() const") ==
          "foo(int)::{default arg#1}::{lambda()#1}::operator()");
    CHECK(short_function_name("Foo::operator()") == "Foo::operator()");
    CHECK(innermost_scopes("a::B<int>::operator->", 2) == "B<int>::operator->");
    CHECK(innermost_scopes("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", 2) ==
          "DeviceCachingAllocator::malloc");
    CHECK(short_function_name("main") == "main");
    CHECK(short_function_name("keep_history") == "keep_history");
}

TEST_CASE("the program's own Python frames are told from libraries', the standard library's and gpuleak's") {
    const auto python = [](const std::string& file) {
        ReportFrame frame;
        frame.python = true;
        frame.file = file;
        frame.function = "f";
        return frame;
    };
    CHECK(is_program_frame(python("/home/me/train.py")));
    CHECK(is_program_frame(python("train.py")));
    CHECK_FALSE(is_program_frame(python("/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py")));
    CHECK_FALSE(is_program_frame(python("/usr/lib/python3/dist-packages/numpy/core/numeric.py")));
    CHECK_FALSE(is_program_frame(python("/usr/lib/python3.12/threading.py")));
    CHECK_FALSE(is_program_frame(python("/root/.pyenv/versions/3.12.1/lib/python3.12/json/decoder.py")));
    CHECK_FALSE(is_program_frame(python("<frozen importlib._bootstrap>")));
    CHECK_FALSE(is_program_frame(python("/opt/gpuleak/share/gpuleak/python/gpuleak/_isolated.py")));
    CHECK_FALSE(is_program_frame(python("/opt/gpuleak/share/gpuleak/python/gpuleak/_why/_search.py")));
    ReportFrame cell = python("/tmp/ipykernel_1/123.py");
    cell.source_name = "cell [3]";
    CHECK(is_program_frame(cell));
    CHECK(library_of(python("/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py")) == "torch");
    CHECK(short_path("/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py") ==
          "torch/nn/modules/linear.py");
    CHECK(short_path("/home/me/train.py") == "/home/me/train.py");
}

TEST_CASE("strings from a trace are shown escaped: no control, no separator, no reordering, no stray byte") {
    using gpuleak::printable;
    // Terminal escapes, a forged line, a tab, DEL.
    CHECK(printable("a\x1b]0;t\x07\nFAKE\tx\x7f") == "a\\x1b]0;t\\x07\\nFAKE\\tx\\x7f");
    // C1 controls written as UTF-8 (CSI), the line separator, a right-to-left override.
    CHECK(printable("\xc2\x9b"
                    "2J \xe2\x80\xa8 \xe2\x80\xae") == "\\u009b2J \\u2028 \\u202e");
    // Bytes that are not UTF-8: a stray one, a cut sequence, an overlong slash, an encoded surrogate.
    CHECK(printable("\xff.py") == "\\xff.py");
    CHECK(printable("\xe5\x87") == "\\xe5\\x87");
    CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");
    CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");
    // Everything else is as it was, whatever its script; a backslash too, and the result is stable.
    const std::string plain = "函数 in modèle.py:12 \xf0\x9f\x94\xa5 C:\\path";
    CHECK(printable(plain) == plain);
    CHECK(printable(printable("\x1b\n\xff")) == printable("\x1b\n\xff"));
    // Into a buffer that is too small: it ends before the escape or the character that did not fit.
    char out[6];
    CHECK(std::string(out, gpuleak::printable_into("abc\x1b", out)) == "abc");
    CHECK(std::string(out, gpuleak::printable_into("abcd\xc3\xa9", out)) == "abcd\xc3\xa9");
    CHECK(std::string(out, gpuleak::printable_into("abcde\xc3\xa9", out)) == "abcde");
}

namespace {

// Stacks of one fixed stack, whatever the id.
class FixedStack : public StackFrames {
  public:
    explicit FixedStack(std::vector<ReportFrame> frames) : frames_(std::move(frames)) {}
    const std::vector<ReportFrame>& frames(uint32_t /*stack_id*/) override { return frames_; }

  private:
    std::vector<ReportFrame> frames_;
};

// A native frame as a release build of a library has it: a function, no source line.
ReportFrame without_source(const std::string& function, const std::string& module) {
    return {function, {}, 0, module, 0x100, false, false, {}, {}};
}

const std::string kC10 = "/site-packages/torch/lib/libc10_cuda.so";

} // namespace

TEST_CASE("cuBLAS's workspace and what PyTorch's autograd thread made are named as such") {
    // The program's first matmul makes the workspace that PyTorch keeps.
    FixedStack workspace(
        {without_source("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, "
                        "signed char, unsigned long, CUstream_st*)",
                        kC10),
         without_source("at::cuda::getCUDABlasLtWorkspace()", kTorch),
         without_source("at::native::addmm_out_cuda_impl", kTorch),
         native("_PyEval_EvalFrameDefault", kPython), python("<module>", "/srv/train.py", 9)});
    CHECK(
        workspace.describe(1) ==
        "/srv/train.py:9 in <module> (cuBLAS's workspace, which PyTorch keeps for the rest of the process)");
    // A gradient that backward() made: native frames only, the allocator's own passed over.
    FixedStack gradient(
        {without_source("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::record_trace(int)",
                        kC10),
         without_source("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**)",
                        kC10),
         without_source("at::detail::empty_generic(c10::ArrayRef<long>)", kTorch),
         without_source(
             "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
             kTorch)});
    CHECK(gradient.describe(1) == "at::detail::empty_generic (in backward(), on PyTorch's autograd thread)");
    // A C++ program's own function, as before.
    FixedStack program({native("keep_history", "/srv/scenario"), native("main", "/srv/scenario")});
    CHECK(program.describe(1) == "keep_history (keep_history.c:10)");
}

namespace {

// PyTorch's pin-memory thread, all library frames (stack 1), started by the DataLoader's iterator at the
// program's `for` line (stack 2).
TraceBuilder pin_thread_trace() {
    TraceLayout layout;
    layout.ring_capacity = 16;
    TraceBuilder builder(layout);
    builder.header().start_monotonic_ns = kStart;
    builder.header().python_version = format::python_version(3, 10);
    builder.add_code(1, "/site-packages/torch/utils/data/_utils/pin_memory.py", "pin_memory", 80, kLineTable);
    builder.add_code(2, "/usr/lib/python3.10/threading.py", "Thread.run", 80, kLineTable);
    builder.add_code(3, "/usr/lib/python3.10/threading.py", "Thread.start", 80, kLineTable);
    builder.add_code(4, "/site-packages/torch/utils/data/dataloader.py", "__init__", 80, kLineTable);
    builder.add_code(5, "/srv/train.py", "main", 100, kLineTable);
    builder.add_stack(1, {}, {{1, 0}, {2, 12}});
    builder.add_stack(2, {}, {{3, 0}, {4, 12}, {5, 12}});
    builder.add_stack(9, {},
                      {{5, 24}}); // the program's step, on its main thread: a batch moved to the device
    format::EventRecord started{};
    started.type = static_cast<uint16_t>(format::EventType::ThreadStart);
    started.thread_id = 7;
    started.stack_id = 2;
    started.time_ns = kStart + kSecond;
    builder.add_notable(started);
    for (uint64_t i = 0; i < 4; ++i) {
        format::LiveSlot slot = live(0x1000 + i * 0x1000, kMiB, 1, 1 + i);
        slot.kind = static_cast<uint8_t>(format::MemoryKind::PinnedHost);
        slot.thread_id = 7;
        slot.sequence = builder.header().ring_head;
        builder.set_live(i, slot);
        builder.append_event(allocation_event(slot));
        add_scratch(builder, 9, (1 + i) * kSecond, 1);
    }
    builder.header().accounting.live_bytes[format::kHostSlot][3] = 4 * kMiB;
    builder.end_exited(0, kStart + 5 * kSecond);
    return builder;
}

} // namespace

TEST_CASE("what a library's thread made is named by the program's line that started the thread") {
    const TraceReader trace = parse(pin_thread_trace());
    gpuleak::analyzer::ReportSet set;
    std::vector<ProcessReport>& reports = set.all();
    reports.push_back(report_of(trace));
    CHECK(reports[0].model.thread_start_stacks == std::map<uint32_t, uint32_t>{{1, 2}});
    const std::string named =
        "/srv/train.py:102 in main (made there on a library's thread, in torch pin_memory)";
    CHECK(reports[0].stacks->describe(1) == named);
    CHECK_THAT(diagnosis_text(reports[0].model, reports[0].diagnosis, *reports[0].stacks),
               Catch::Contains(named));
    ReportOptions options;
    // Led by the program's line that started the thread, what the thread went through, then what that
    // line called.
    CHECK_THAT(
        render_text(set, options),
        Catch::Contains("  #1 /srv/train.py:102 in main\n"
                        "        4.0 MiB in 4 pinned host allocations, made 1.00–4.00 s, through 75% of the "
                        "work: growing\n"
                        "        → torch pin_memory, on a thread started there (→ torch __init__)\n"));
    options.native = true;
    CHECK_THAT(render_text(set, options),
               Catch::Contains("        /usr/lib/python3.10/threading.py:82 in Thread.run\n"
                               "        on a thread started at\n"
                               "        /usr/lib/python3.10/threading.py:81 in Thread.start\n"));
    const nlohmann::json json = render_json(set, options);
    const nlohmann::json& leak = json["processes"][0]["leaks"][0];
    CHECK(leak["where"] == named);
    REQUIRE(leak["thread_started_at"].is_array());
    CHECK(leak["thread_started_at"].back()["file"] == "/srv/train.py");
    CHECK(leak["thread_started_at"].back()["program"] == true);

    // Without the record of its start, the thread's own frames say what they can.
    reports[0].stacks->thread_start_stacks.clear();
    CHECK(reports[0].stacks->describe(1) ==
          "torch/utils/data/_utils/pin_memory.py:81 in "
          "pin_memory (on a library's thread: no frame of the program's own)");
}

TEST_CASE("a thread's start covers what its id made from then to the thread's end") {
    TraceBuilder builder = pin_thread_trace();
    // Thread 7 ended and its id came back for a thread started at stack 3, which ended at 4.5 s, after
    // which the id made stack 6 again; stack 4 was made by thread 7 before either start; thread 8's start
    // was not recorded.
    builder.add_stack(3, {0x30});
    builder.add_stack(4, {0x40});
    builder.add_stack(5, {0x50});
    builder.add_stack(6, {0x60});
    format::EventRecord again{};
    again.type = static_cast<uint16_t>(format::EventType::ThreadStart);
    again.thread_id = 7;
    again.stack_id = 3;
    again.time_ns = kStart + 3 * kSecond;
    builder.add_notable(again);
    format::EventRecord ended = again;
    ended.stack_id = 0;
    ended.time_ns = kStart + 4 * kSecond + kSecond / 2;
    builder.add_notable(ended);
    const auto add = [&](uint64_t index, uint32_t stack, uint32_t thread, uint64_t nanoseconds) {
        format::LiveSlot slot = live(0x100000 + index * 0x1000, kMiB, stack, 0);
        slot.time_ns = kStart + nanoseconds;
        slot.thread_id = thread;
        builder.set_live(index, slot);
    };
    add(4, 4, 7, kSecond / 2);
    add(5, 5, 7, 4 * kSecond);
    add(6, 6, 7, 5 * kSecond);
    add(7, 6, 8, 4 * kSecond);
    const TraceReader trace = parse(builder);
    const ProcessModel model = build_model("trace.bin", trace);
    CHECK(model.thread_start_stacks == std::map<uint32_t, uint32_t>{{1, 2}, {5, 3}});
}

namespace {

constexpr uint64_t kMillisecond = 1'000'000;
const std::string kXlaPlugin = "/venv/lib/python3.12/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so";

// What XLA's BFC allocator calls to grow its pool (on a thread of XLA's own: no Python frame), or, with
// `allocator` another of XLA's allocators, what makes one array.
std::vector<ReportFrame> xla_allocation(const std::string& allocator,
                                        const std::string& module = kXlaPlugin) {
    return {without_source("stream_executor::gpu::CreateVmmPhysicalAllocation", module),
            without_source("stream_executor::gpu::CudaExecutor::Allocate", module),
            without_source(allocator, module), without_source("start_thread", "/lib/libc.so.6")};
}

// Ten regions, each made between two of the program's other allocations and kept: growth, by the
// events, were they the program's.
TraceBuilder regions_trace() {
    TraceBuilder builder(TraceLayout{.ring_capacity = 64});
    builder.header().start_monotonic_ns = kStart;
    builder.header().device_memory[0].total_bytes = 4ULL << 30;
    builder.header().device_memory[0].lowest_free_bytes = (4ULL << 30) - 321 * kMiB;
    // Both called from the same loop of one function (0x400100).
    builder.add_stack(1, {0x401000, 0x400100});
    builder.add_stack(2, {0x402000, 0x400100});
    for (uint32_t i = 0; i < 10; ++i) {
        format::EventRecord other{};
        other.type = static_cast<uint16_t>(format::EventType::Alloc);
        other.kind = static_cast<uint8_t>(format::MemoryKind::VmmPhysical);
        other.address = 0x1000 + i;
        other.size = kMiB;
        other.stack_id = 2;
        other.time_ns = kStart + (2 * i + 1) * kMillisecond;
        builder.append_event(other);
        other.type = static_cast<uint16_t>(format::EventType::Free);
        builder.append_event(other);
        format::LiveSlot region{};
        region.state = format::kSlotLive;
        region.address = 0x100000 + i;
        region.size = 32 * kMiB;
        region.kind = static_cast<uint8_t>(format::MemoryKind::VmmPhysical);
        region.stack_id = 1;
        region.time_ns = kStart + (2 * i + 2) * kMillisecond;
        region.sequence = builder.header().ring_head;
        format::EventRecord made = other;
        made.type = static_cast<uint16_t>(format::EventType::Alloc);
        made.address = region.address;
        made.size = region.size;
        made.stack_id = 1;
        made.time_ns = region.time_ns;
        builder.append_event(made);
        builder.set_live(i, region);
    }
    builder.header().accounting.live_bytes[0][static_cast<int>(format::MemoryKind::VmmPhysical)] = 320 * kMiB;
    builder.header().accounting.peak_bytes[0][static_cast<int>(format::MemoryKind::VmmPhysical)] = 321 * kMiB;
    builder.end_exited(0, kStart + 30 * kMillisecond);
    return builder;
}

ProcessReport report_with_stacks(const TraceBuilder& builder,
                                 std::map<uint32_t, std::vector<ReportFrame>> stacks) {
    ProcessReport report;
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    report.model = build_model("trace.bin", trace);
    report.stacks = std::make_unique<FixedStacks>(std::move(stacks));
    diagnose_report(report);
    return report;
}

} // namespace

TEST_CASE("a framework's pool is told by the frames that grow it, and whose it is by the frameworks' own") {
    CHECK(allocator_frames(xla_allocation("tsl::BFCAllocator::Extend")).pool == PoolOwner::Jax);
    CHECK(
        allocator_frames(xla_allocation("tsl::BFCAllocator::Extend", "/usr/lib/libtensorflow_framework.so.2"))
            .pool == PoolOwner::TensorFlow);
    CHECK(allocator_frames(xla_allocation("tensorflow::BFCAllocator::Extend", "/opt/lib/libsomething.so"))
              .pool == PoolOwner::Unknown);
    // The platform allocator makes each array by itself: no pool.
    CHECK(allocator_frames(xla_allocation("xla::PjRtStreamExecutorClient::AllocateRawBuffer")).pool ==
          PoolOwner::None);
}

TEST_CASE("TensorFlow's cuda_malloc_async allocator and XLA's steps are told by their frames") {
    const std::string tensorflow = "/usr/lib/libtensorflow_framework.so.2";
    std::vector<ReportFrame> step =
        xla_allocation("stream_executor::GpuCudaMallocAsyncAllocator::AllocateRaw", tensorflow);
    const AllocatorFrames per_tensor = allocator_frames(step);
    CHECK(per_tensor.tensorflow_per_tensor);
    CHECK(per_tensor.pool == PoolOwner::None);
    CHECK_FALSE(per_tensor.xla);
    step.insert(step.end() - 1, without_source("xla::Executable::ExecuteAsyncOnStreamWrapper", tensorflow));
    CHECK(allocator_frames(step).xla);
    // The same allocator's name outside TensorFlow's libraries is not TensorFlow's.
    CHECK_FALSE(allocator_frames(xla_allocation("stream_executor::GpuCudaMallocAsyncAllocator::AllocateRaw",
                                                "/opt/lib/libsomething.so"))
                    .tensorflow_per_tensor);
}

TEST_CASE(
    "regions of a framework's pool are never a leak, however they grew, and the diagnosis explains them") {
    const TraceBuilder builder = regions_trace();
    const ProcessReport plain =
        report_with_stacks(builder, {{1, xla_allocation("xla::SomeAllocator::Allocate")}, {2, {}}});
    CHECK(plain.diagnosis.kind == DiagnosisKind::Leak);
    CHECK_FALSE(plain.diagnosis.pool);

    const ProcessReport pooled =
        report_with_stacks(builder, {{1, xla_allocation("tsl::BFCAllocator::Extend")}, {2, {}}});
    CHECK(pooled.diagnosis.kind == DiagnosisKind::Stable);
    CHECK(pooled.model.growth_sites.empty());
    REQUIRE(pooled.diagnosis.pool);
    const PoolFacts& pool = *pooled.diagnosis.pool;
    CHECK(pool.owner == PoolOwner::Jax);
    CHECK(pool.regions == 10);
    CHECK(pool.bytes == 320 * kMiB);
    CHECK(pool.capacity == 4ULL << 30);
    gpuleak::analyzer::ReportSet set;
    std::vector<ProcessReport>& reports = set.all();
    reports.push_back(
        report_with_stacks(builder, {{1, xla_allocation("tsl::BFCAllocator::Extend")}, {2, {}}}));
    const std::string text = diagnosis_text(reports[0].model, reports[0].diagnosis, *reports[0].stacks);
    CHECK_THAT(text, Catch::StartsWith("No sign of a leak outside the framework's pool"));
    CHECK_THAT(text,
               Catch::Contains("XLA (JAX) grew its own pool to 320.0 MiB, 8% of device 0's 4.0 GiB, in 10 "
                               "regions, from 0.0 s to 0.0 s"));
    CHECK_THAT(text,
               Catch::Contains("XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=platform"));
    // Its site is named as the pool it is, in the text and the JSON.
    CHECK_THAT(render_text(set, ReportOptions{}),
               Catch::Contains("        (XLA's pool for JAX's arrays, which XLA hands out inside it, out of "
                               "gpuleak's sight)\n"));
    const nlohmann::json json = render_json(set, ReportOptions{});
    CHECK(json["processes"][0]["leaks"][0]["purpose"] ==
          "XLA's pool for JAX's arrays, which XLA hands out inside it, out of gpuleak's sight");
    const nlohmann::json& facts = json["processes"][0]["diagnosis"]["framework_pool"];
    CHECK(facts["framework"] == "jax");
    CHECK(facts["regions"] == 10);
    CHECK(facts["bytes"] == 320 * kMiB);
}
