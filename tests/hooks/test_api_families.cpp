// Every allocation family of cuda_entry_points.def, reached by symbol and through every function-pointer
// path, on the simulated device: the trace must hold exactly what the programs say they did, and the
// programs must see exactly what they see without gpuleak. The expectations come from the table itself,
// so a row added to it that no program exercises fails here. A program linked against CUDA 12's runtime
// is recorded the same way.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <iterator>
#include <sstream>
#include <string_view>

#include "gpuleak/cuda_entry_points.h"
#include "logged_calls.h"

using gpuleak::Action;
using gpuleak::EntryPoint;
using gpuleak::Library;
using gpuleak::analyzer::Event;
using gpuleak::analyzer::TraceReader;
using gpuleak::format::EventType;
using gpuleak::format::KeySpace;
using gpuleak::format::MemoryKind;

namespace {

// The table's device column, as far as a test can predict it: the host, no device, or the device the
// program selected (the current device, a VMM property's location, a mapped handle's device).
enum class DeviceRule { Selected, Host, Unknown };

constexpr DeviceRule device_rule(std::string_view expression) {
    return expression == "kHostDevice"      ? DeviceRule::Host
           : expression == "kUnknownDevice" ? DeviceRule::Unknown
                                            : DeviceRule::Selected;
}

struct TableRow {
    std::string_view symbol;
    Library library;
    Action action;
    MemoryKind kind = MemoryKind::None;      // Alloc rows
    DeviceRule device = DeviceRule::Unknown; // Alloc rows
    KeySpace space = KeySpace::Pointer;      // Free and FreeRange rows
};

constexpr TableRow kTable[] = {
#define GPULEAK_ALLOC(lib, sym, base, since, streams, kind_, params, args, ptr, size, requested, device_,    \
                      stream)                                                                                \
    {#sym, Library::lib, Action::Alloc, MemoryKind::kind_, device_rule(#device_)},
#define GPULEAK_FREE(lib, sym, base, since, streams, space_, ...)                                            \
    {#sym, Library::lib, Action::Free, MemoryKind::None, DeviceRule::Unknown, KeySpace::space_},
#define GPULEAK_FREE_RANGE(lib, sym, base, since, streams, space_, ...)                                      \
    {#sym, Library::lib, Action::FreeRange, MemoryKind::None, DeviceRule::Unknown, KeySpace::space_},
#define GPULEAK_TRIM(lib, sym, ...) {#sym, Library::lib, Action::Trim},
#define GPULEAK_LOOKUP(lib, sym, ...) {#sym, Library::lib, Action::Lookup},
#define GPULEAK_CONTEXT(lib, sym, ...) {#sym, Library::lib, Action::Context},
#include "gpuleak/cuda_entry_points.def"
};
static_assert(std::size(kTable) == gpuleak::kEntryPointCount);

// The api byte of the row named `symbol`.
uint8_t api_of(std::string_view symbol) {
    const auto found = std::find_if(std::begin(kTable), std::end(kTable),
                                    [&](const TableRow& row) { return row.symbol == symbol; });
    if (found == std::end(kTable))
        FAIL("the log names " << symbol << ", which is no row of cuda_entry_points.def");
    return static_cast<uint8_t>(found - std::begin(kTable));
}

int16_t device_of(DeviceRule rule, int selected_device) {
    switch (rule) {
    case DeviceRule::Host:
        return -1;
    case DeviceRule::Unknown:
        return -2;
    case DeviceRule::Selected:
        break;
    }
    return static_cast<int16_t>(selected_device);
}

// An allocation-related event, in one form for what the log predicts and what the trace holds, so that
// a mismatch prints both sequences side by side.
std::string describe(EventType type, uint8_t api, uint64_t address, uint64_t size, MemoryKind kind,
                     int16_t device, uint64_t stream, int32_t result) {
    std::ostringstream out;
    const char* name = gpuleak::entry_point_name(api);
    out << gpuleak::format::event_type_name(type) << " " << (name == nullptr ? "?" : name) << " address=0x"
        << std::hex << address << std::dec << " size=" << size << " kind=" << gpuleak::format::kind_name(kind)
        << " device=" << device << " stream=0x" << std::hex << stream << std::dec << " result=" << result;
    return out.str();
}

// A failure's address field holds the device's free memory per the driver then, which the program's log
// cannot predict: it is compared as 0 here and checked on its own (check_failure_free_memory).
std::string describe(const Event& event) {
    const uint64_t address = event.type == EventType::AllocFailed ? 0 : event.address;
    return describe(event.type, event.api, address, event.size, event.kind, event.device, event.stream,
                    event.result);
}

bool is_allocation_event(const Event& event) {
    return event.type == EventType::Alloc || event.type == EventType::Free ||
           event.type == EventType::FreeUnknown || event.type == EventType::AllocFailed ||
           event.type == EventType::PoolTrim;
}

struct LiveObject {
    uint64_t address;
    uint64_t size;
    MemoryKind kind;
    int16_t device;
    uint8_t api;
};

// What the trace must hold for the calls the program logged, by the table's rules: a successful
// allocation is an object (none at NULL), a failed one an AllocFailed of the requested size; a
// successful free ends the object it names in its key space (a range free every object inside the
// range), a failed one changes nothing.
struct Prediction {
    std::vector<std::string> events;
    std::vector<LiveObject> live;
};

Prediction predict(const std::vector<LoggedCall>& calls, int selected_device) {
    Prediction prediction;
    auto& live = prediction.live;
    auto end_object = [&](const LiveObject& object, uint8_t api, uint64_t stream) {
        prediction.events.push_back(describe(EventType::Free, api, object.address, object.size, object.kind,
                                             object.device, stream, 0));
    };
    for (const LoggedCall& call : calls) {
        if (call.op == "call" || call.op == "context" || (call.op != "alloc" && call.rc() != 0))
            continue;
        const uint8_t api = api_of(call.name);
        const TableRow& row = kTable[api];
        const uint64_t stream = call.has("stream") ? call.number("stream") : 0;
        if (call.op == "trim") {
            prediction.events.push_back(describe(EventType::PoolTrim, api, call.number("address"),
                                                 call.number("size"), MemoryKind::None, -2, 0, 0));
            continue;
        }
        const uint64_t address = call.number("address");
        if (call.op == "alloc") {
            REQUIRE(row.action == Action::Alloc);
            const int16_t device = device_of(row.device, selected_device);
            if (call.rc() != 0) {
                prediction.events.push_back(describe(EventType::AllocFailed, api, 0, call.number("requested"),
                                                     row.kind, device, stream, call.rc()));
            } else if (address != 0) {
                live.push_back({address, call.number("size"), row.kind, device, api});
                prediction.events.push_back(describe(EventType::Alloc, api, address, call.number("size"),
                                                     row.kind, device, stream, 0));
            }
            continue;
        }
        REQUIRE(call.op == "free");
        REQUIRE((row.action == Action::Free || row.action == Action::FreeRange));
        if (address == 0)
            continue;
        const uint64_t end = row.action == Action::FreeRange ? address + call.number("size") : address + 1;
        std::vector<LiveObject> ended;
        std::erase_if(live, [&](const LiveObject& object) {
            const bool inside =
                gpuleak::format::key_space_of(object.kind) == row.space &&
                (row.action == Action::Free ? object.address == address
                                            : object.address >= address && object.address < end);
            if (inside)
                ended.push_back(object);
            return inside;
        });
        std::sort(ended.begin(), ended.end(),
                  [](const auto& a, const auto& b) { return a.address < b.address; });
        for (const LiveObject& object : ended)
            end_object(object, api, row.action == Action::FreeRange ? 0 : stream);
        if (ended.empty())
            prediction.events.push_back(describe(EventType::FreeUnknown, api, address, 0, MemoryKind::None,
                                                 -2, stream, static_cast<int32_t>(row.space)));
    }
    return prediction;
}

// The innermost frame of the stack lies in the program itself: gpuleak's own frames are left out.
void check_stack_from(const TraceReader& trace, uint32_t stack_id, const std::string& program) {
    REQUIRE(stack_id != 0);
    const auto stack = trace.stacks().find(stack_id);
    REQUIRE(stack != trace.stacks().end());
    REQUIRE(!stack->second.empty());
    const uint64_t innermost = stack->second.front();
    const auto module = std::find_if(trace.modules().begin(), trace.modules().end(), [&](const auto& module) {
        return innermost >= module.low && innermost < module.high;
    });
    REQUIRE(module != trace.modules().end());
    CHECK(std::filesystem::path(module->path).filename() == program);
}

// The trace's allocation events, failures (also among the notable events) and live set are exactly
// what the program's log predicts; every allocation and failure carries the program's stack.
void check_trace_matches_log(const TraceReader& trace, const std::vector<LoggedCall>& calls,
                             int selected_device, const std::string& program) {
    const Prediction prediction = predict(calls, selected_device);
    std::vector<std::string> recorded;
    for (const Event& event : trace.events().events) {
        if (!is_allocation_event(event))
            continue;
        recorded.push_back(describe(event));
        if (event.type == EventType::Alloc || event.type == EventType::AllocFailed) {
            INFO(describe(event));
            check_stack_from(trace, event.stack_id, program);
        }
        if (event.type == EventType::AllocFailed) {
            // Device memory that did not fit comes with the driver's free memory then; host memory not.
            INFO(describe(event));
            const bool device_memory =
                gpuleak::format::occupies_device_memory(event.kind) && event.device >= 0;
            CHECK((event.address != UINT64_MAX) == device_memory);
        }
    }
    CHECK(trace.events().dropped == 0);
    CHECK(recorded == prediction.events);

    std::vector<std::string> failures;
    for (const std::string& event : prediction.events)
        if (event.starts_with("alloc_failed"))
            failures.push_back(event);
    std::vector<std::string> notable_failures;
    for (const Event& event : trace.notable_events().events) {
        if (event.type == EventType::AllocFailed)
            notable_failures.push_back(describe(event));
        // A program without Python has no interpreter to finalize.
        CHECK(event.type != EventType::PythonFinalizing);
    }
    CHECK(notable_failures == failures);

    std::vector<std::string> live;
    for (const auto& object : trace.live_allocations().allocations)
        live.push_back(describe(EventType::Alloc, object.api, object.address, object.size, object.kind,
                                object.device, 0, 0));
    std::vector<std::string> predicted_live;
    for (const LiveObject& object : prediction.live)
        predicted_live.push_back(describe(EventType::Alloc, object.api, object.address, object.size,
                                          object.kind, object.device, 0, 0));
    std::sort(live.begin(), live.end());
    std::sort(predicted_live.begin(), predicted_live.end());
    CHECK(live == predicted_live);
}

void check_exited(const TraceReader& trace, int code) {
    CHECK(trace.header().end.state == gpuleak::format::EndState::Exited);
    CHECK(trace.header().end.exit_code == code);
}

// Runtime rows are reached by symbol and by dlsym only: the lookups hand out driver functions alone.
bool reachable(const TableRow& row, std::string_view path) {
    return row.action != Action::Lookup &&
           (row.library == Library::DRIVER || path == "symbol" || path == "dlsym_handle");
}

// The device api_families makes a context on through the context row, and on nothing else.
constexpr int16_t kContextDevice = 2;

// Every row of the table that `path` reaches left its events: one allocation, one trim, at least one
// free, the context it made on the device it used for nothing else (with the program's stack); rows it
// cannot reach left none. Each device has one context record at most.
void check_every_row_seen(const TraceReader& trace, std::string_view path, const std::string& program) {
    std::vector<int16_t> context_devices;
    for (const Event& event : trace.notable_events().events)
        if (event.type == EventType::Context)
            context_devices.push_back(event.device);
    std::sort(context_devices.begin(), context_devices.end());
    CHECK(std::adjacent_find(context_devices.begin(), context_devices.end()) == context_devices.end());
    for (size_t api = 0; api < std::size(kTable); ++api) {
        const TableRow& row = kTable[api];
        auto count = [&](EventType type) {
            return std::count_if(trace.events().events.begin(), trace.events().events.end(),
                                 [&](const Event& event) { return event.api == api && event.type == type; });
        };
        INFO(row.symbol << " through " << path << " (is it exercised by tests/programs/api_families.cpp?)");
        if (!reachable(row, path)) {
            CHECK(std::none_of(trace.events().events.begin(), trace.events().events.end(),
                               [&](const Event& event) { return event.api == api; }));
            continue;
        }
        switch (row.action) {
        case Action::Alloc:
            CHECK(count(EventType::Alloc) == 1);
            break;
        case Action::Free:
        case Action::FreeRange:
            CHECK(count(EventType::Free) >= 1);
            break;
        case Action::Trim:
            CHECK(count(EventType::PoolTrim) == 1);
            break;
        case Action::Lookup:
            break;
        case Action::Context: {
            const auto made =
                std::find_if(trace.notable_events().events.begin(), trace.notable_events().events.end(),
                             [&](const Event& event) {
                                 return event.type == EventType::Context && event.device == kContextDevice;
                             });
            REQUIRE(made != trace.notable_events().events.end());
            CHECK(made->api == api);
            check_stack_from(trace, made->stack_id, program);
            // The simulated driver's UUID of the device: "gpuleak-sim", then the ordinal last.
            const std::array<uint8_t, 16> uuid = made->device_uuid();
            CHECK(std::string(uuid.begin(), uuid.begin() + 11) == "gpuleak-sim");
            CHECK(uuid.back() == kContextDevice);
            break;
        }
        }
    }
}

std::vector<std::string> failed_calls(const std::vector<LoggedCall>& calls) {
    std::vector<std::string> failed;
    for (const LoggedCall& call : calls)
        if (call.rc() != 0)
            failed.push_back(call.line);
    return failed;
}

// api_families through `path` on the second of three devices (and a context on the third): recorded
// exactly, and the program's codes, out-parameters and stdout are those of the same run without gpuleak.
void check_families(const std::string& path) {
    const RunOptions three_devices = with_environment({"GPULEAK_SIM_DEVICES=3"});
    TempDir traced_directory;
    const LoggedRun traced =
        run_logged(traced_directory, program_path("api_families"), {path}, three_devices);
    INFO("stderr: " << traced.run.err);
    REQUIRE(traced.run.exited_with(0));
    REQUIRE(!traced.calls.empty());
    CHECK(failed_calls(traced.calls).empty());
    const TraceReader trace = only_trace(traced.run);
    CHECK(trace.header().simulated_device());
    check_exited(trace, 0);
    check_trace_matches_log(trace, traced.calls, 1, "api_families");
    check_every_row_seen(trace, path, "api_families");
    CHECK(trace.live_allocations().allocations.empty());

    TempDir plain_directory;
    const LoggedRun plain =
        run_logged(plain_directory, program_path("api_families"), {path}, without_gpuleak(three_devices));
    CHECK(plain.run.exited_with(0));
    CHECK(plain.run.traces().empty());
    CHECK(comparable(traced.calls) == comparable(plain.calls));
    CHECK(traced.run.out == plain.run.out);
}

} // namespace

TEST_CASE("every allocation family is recorded when called by symbol") {
    check_families("symbol");
}

TEST_CASE("every driver allocation family is recorded through cuGetProcAddress") {
    check_families("cuGetProcAddress");
}

TEST_CASE("every driver allocation family is recorded through cuGetProcAddress_v2") {
    check_families("cuGetProcAddress_v2");
}

TEST_CASE("every driver allocation family is recorded through cudaGetDriverEntryPoint") {
    check_families("cudaGetDriverEntryPoint");
}

TEST_CASE("every driver allocation family is recorded through cudaGetDriverEntryPoint_ptsz") {
    check_families("cudaGetDriverEntryPoint_ptsz");
}

TEST_CASE("every driver allocation family is recorded through cudaGetDriverEntryPointByVersion") {
    check_families("cudaGetDriverEntryPointByVersion");
}

TEST_CASE("every driver allocation family is recorded through cudaGetDriverEntryPointByVersion_ptsz") {
    check_families("cudaGetDriverEntryPointByVersion_ptsz");
}

TEST_CASE("every allocation family is recorded through dlsym on a library handle") {
    check_families("dlsym_handle");
}

TEST_CASE("a runtime allocation that reaches the driver inside is recorded once") {
    TempDir directory;
    const LoggedRun run = run_logged(directory, program_path("process_end"), {"return0"});
    INFO("stderr: " << run.run.err);
    REQUIRE(run.run.exited_with(0));
    const TraceReader trace = only_trace(run.run);
    // The simulated runtime allocates with cuMemAlloc_v2, found through cuGetProcAddress_v2: the
    // pointer gpuleak handed it is a hook, which must not record a second object.
    check_trace_matches_log(trace, run.calls, 0, "process_end");
    CHECK(std::none_of(trace.events().events.begin(), trace.events().events.end(), [](const Event& event) {
        return event.api == static_cast<uint8_t>(EntryPoint::cuMemAlloc_v2) ||
               event.api == static_cast<uint8_t>(EntryPoint::cuMemFree_v2);
    }));
}

namespace {

const RunOptions kSmallDevice = with_environment({"GPULEAK_SIM_CAPACITY=64MiB"});
constexpr uint64_t kTooBig = uint64_t{1} << 30;

} // namespace

TEST_CASE("an allocation that does not fit is recorded with the requested size and the error code") {
    TempDir directory;
    const LoggedRun run = run_logged(directory, program_path("return_codes"), {}, kSmallDevice);
    INFO("stderr: " << run.run.err);
    REQUIRE(run.run.exited_with(0));
    for (const char* symbol : {"cudaMalloc", "cuMemAlloc_v2", "cuMemCreate"}) {
        INFO(symbol);
        const auto call = std::find_if(run.calls.begin(), run.calls.end(), [&](const LoggedCall& call) {
            return call.name == symbol && call.has("requested") && call.number("requested") == kTooBig;
        });
        REQUIRE(call != run.calls.end());
        CHECK(call->rc() == 2);
        CHECK(call->text("out") == "unchanged");
    }
    const TraceReader trace = only_trace(run.run);
    CHECK(trace.header().simulated_device());
    check_exited(trace, 0);
    // AllocFailed events of the requested size and code 2, with stacks, also among the notable events;
    // failed frees record nothing and leave their object live; one allocation is left live.
    check_trace_matches_log(trace, run.calls, 0, "return_codes");
    CHECK(trace.live_allocations().allocations.size() == 1);
    CHECK(std::count_if(trace.notable_events().events.begin(), trace.notable_events().events.end(),
                        [](const Event& event) {
                            return event.type == EventType::AllocFailed && event.size == kTooBig &&
                                   event.result == 2;
                        }) >= 3);
}

TEST_CASE("return codes out-parameters errno and stdout are the same with and without gpuleak") {
    TempDir traced_directory;
    const LoggedRun traced = run_logged(traced_directory, program_path("return_codes"), {}, kSmallDevice);
    TempDir plain_directory;
    const LoggedRun plain =
        run_logged(plain_directory, program_path("return_codes"), {}, without_gpuleak(kSmallDevice));
    INFO("stderr with gpuleak: " << traced.run.err);
    CHECK(traced.run.exited_with(0));
    CHECK(plain.run.exited_with(0));
    CHECK(traced.run.traces().size() == 1);
    REQUIRE(!plain.calls.empty());
    CHECK(comparable(traced.calls) == comparable(plain.calls));
    CHECK(traced.run.out == plain.run.out);
    CHECK(!traced.run.out.empty());
}

namespace {

// A program linked against CUDA 12's runtime (cuda12_program) through `path`: each allocation and free
// recorded with its size, row and kind as `expected` lists them ("<event> <row> <kind>", in order), on
// the device it selected; its codes and stdout those of the same run without gpuleak.
void check_cuda12_program(const std::string& path, const std::vector<std::string>& expected) {
    const RunOptions two_devices = with_environment({"GPULEAK_SIM_DEVICES=2"});
    TempDir traced_directory;
    const LoggedRun traced =
        run_logged(traced_directory, program_path("cuda12_program"), {path}, two_devices);
    INFO("stderr: " << traced.run.err);
    REQUIRE(traced.run.exited_with(0));
    REQUIRE(!traced.calls.empty());
    CHECK(failed_calls(traced.calls).empty());
    CHECK(traced.run.out.find("runtime 12080") != std::string::npos);
    const TraceReader trace = only_trace(traced.run);
    CHECK(trace.header().simulated_device());
    check_exited(trace, 0);
    // CUDA 12's runtime is the one the process used, and CUDA 13's was never loaded.
    auto loaded = [&](std::string_view file) {
        return std::any_of(trace.modules().begin(), trace.modules().end(), [&](const auto& module) {
            return std::filesystem::path(module.path).filename() == file;
        });
    };
    CHECK(loaded("libcudart.so.12"));
    CHECK(!loaded("libcudart.so.13"));
    check_trace_matches_log(trace, traced.calls, 1, "cuda12_program");
    std::vector<std::string> recorded;
    for (const Event& event : trace.events().events) {
        if (!is_allocation_event(event))
            continue;
        const char* row = gpuleak::entry_point_name(event.api);
        recorded.push_back(std::string(gpuleak::format::event_type_name(event.type)) + " " +
                           (row == nullptr ? "?" : row) + " " + gpuleak::format::kind_name(event.kind));
    }
    CHECK(recorded == expected);
    CHECK(trace.live_allocations().allocations.empty());

    TempDir plain_directory;
    const LoggedRun plain =
        run_logged(plain_directory, program_path("cuda12_program"), {path}, without_gpuleak(two_devices));
    CHECK(plain.run.exited_with(0));
    CHECK(plain.run.traces().empty());
    CHECK(comparable(traced.calls) == comparable(plain.calls));
    CHECK(traced.run.out == plain.run.out);
}

const std::vector<std::string> kCuda12RuntimeEvents = {
    "alloc cudaMalloc device",          "free cudaFree device",
    "alloc cudaMallocAsync async_pool", "free cudaFreeAsync async_pool",
    "alloc cudaMallocHost pinned_host", "free cudaFreeHost pinned_host",
};
const std::vector<std::string> kCuda12DriverEvents = {"alloc cuMemAlloc_v2 device",
                                                      "free cuMemFree_v2 device"};

} // namespace

TEST_CASE("a program linked against CUDA 12's runtime is recorded when it calls it by symbol") {
    check_cuda12_program("symbol", kCuda12RuntimeEvents);
}

TEST_CASE("a program linked against CUDA 12's runtime is recorded through dlsym on its handle") {
    check_cuda12_program("dlsym_handle", kCuda12RuntimeEvents);
}

TEST_CASE("a program linked against CUDA 12's runtime is recorded through cudaGetDriverEntryPoint") {
    check_cuda12_program("cudaGetDriverEntryPoint", kCuda12DriverEvents);
}

TEST_CASE("a program linked against CUDA 12's runtime is recorded through cudaGetDriverEntryPointByVersion") {
    check_cuda12_program("cudaGetDriverEntryPointByVersion", kCuda12DriverEvents);
}
