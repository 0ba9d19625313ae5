// gpuleak among other libraries: its exported dlsym must leave every other dlsym user as it was (a
// second preloaded interposer, RTLD_DEFAULT from a library loaded RTLD_LOCAL, missing symbols, NVIDIA's
// cuDNN and cuBLAS), and a program on NVIDIA's own runtime must see the same codes under gpuleak.
// The tests of NVIDIA's libraries are skipped (with a warning) where the CUDA toolkit is not installed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "gpuleak/cuda_entry_points.h"
#include "logged_calls.h"

using gpuleak::analyzer::Event;
using gpuleak::analyzer::TraceReader;
using gpuleak::format::EventType;

namespace {

const std::string kCudaLibraries = GPULEAK_CUDA_LIBRARY_DIR;

LoggedRun run_dlsym_behaviour(const TempDir& directory, const RunOptions& options) {
    return run_logged(directory, program_path("dlsym_behaviour"), {program_path("libscope_probe.so")},
                      options);
}

RunOptions preloading(const std::vector<std::string>& libraries) {
    std::string list;
    for (const std::string& library : libraries)
        list += (list.empty() ? "" : ":") + library;
    return without_gpuleak(with_environment({"LD_PRELOAD=" + list}));
}

const LoggedCall& call_named(const std::vector<LoggedCall>& calls, const std::string& name,
                             const std::string& lookup) {
    const auto found = std::find_if(calls.begin(), calls.end(), [&](const LoggedCall& call) {
        return call.name == name && call.has("lookup") && call.text("lookup") == lookup;
    });
    if (found == calls.end())
        FAIL("no call " << name << " lookup=" << lookup << " in the log");
    return *found;
}

// dlsym_behaviour with gpuleak and without it, for the checks that compare the two.
struct WithAndWithout {
    TempDir traced_directory;
    TempDir plain_directory;
    LoggedRun traced = run_dlsym_behaviour(traced_directory, RunOptions());
    LoggedRun plain = run_dlsym_behaviour(plain_directory, without_gpuleak());
};

void check_interposer_beside_gpuleak(const std::vector<std::string>& preload_order) {
    const std::string interposer = program_path("libnext_interposer.so");
    TempDir plain_directory;
    const LoggedRun plain = run_dlsym_behaviour(plain_directory, preloading({interposer}));
    TempDir traced_directory;
    const LoggedRun traced = run_dlsym_behaviour(traced_directory, preloading(preload_order));
    INFO("stderr: " << traced.run.err);
    REQUIRE(plain.run.exited_with(0));
    REQUIRE(traced.run.exited_with(0));
    CHECK(plain.run.out == "[next_interposer] dlsym_behaviour: hello\n");
    CHECK(traced.run.out == plain.run.out);
    CHECK(comparable(traced.calls) == comparable(plain.calls));
    // gpuleak was loaded and recording all along.
    CHECK(only_trace(traced.run).header().simulated_device());
}

} // namespace

TEST_CASE("an interposer preloaded after gpuleak forwards with RTLD_NEXT as without gpuleak") {
    // RTLD_NEXT taken relative to gpuleak instead of the interposer would find the interposer itself.
    check_interposer_beside_gpuleak({library_path(), program_path("libnext_interposer.so")});
}

TEST_CASE("an interposer preloaded before gpuleak forwards with RTLD_NEXT as without gpuleak") {
    check_interposer_beside_gpuleak({program_path("libnext_interposer.so"), library_path()});
}

TEST_CASE("RTLD_DEFAULT from a library loaded RTLD_LOCAL searches as without gpuleak") {
    const WithAndWithout runs;
    REQUIRE(runs.traced.run.exited_with(0));
    REQUIRE(runs.plain.run.exited_with(0));
    for (const LoggedRun* run : {&runs.traced, &runs.plain}) {
        // The library's own scope holds its symbol; the program's global scope does not.
        const LoggedCall& from_library = call_named(run->calls, "scope_probe_read", "scope_probe_marker");
        CHECK(from_library.number("found") == 1);
        CHECK(from_library.number("value") == 42);
        CHECK(call_named(run->calls, "dlsym", "program_default_scope_probe_marker").number("found") == 0);
    }
    CHECK(comparable(runs.traced.calls) == comparable(runs.plain.calls));
}

TEST_CASE("dlsym of a missing symbol returns NULL and leaves the dlerror message it leaves without gpuleak") {
    const WithAndWithout runs;
    REQUIRE(runs.traced.run.exited_with(0));
    REQUIRE(runs.plain.run.exited_with(0));
    for (const char* lookup : {"runtime_missing", "default_missing", "next_missing"}) {
        INFO(lookup);
        const LoggedCall& traced = call_named(runs.traced.calls, "dlsym", lookup);
        CHECK(traced.number("found") == 0);
        CHECK(traced.text("error").find("gpuleak_test_no_such_symbol") != std::string::npos);
        CHECK(traced.text("error") == call_named(runs.plain.calls, "dlsym", lookup).text("error"));
    }
    const LoggedCall& found = call_named(runs.traced.calls, "dlsym", "runtime_cudaMalloc");
    CHECK(found.number("found") == 1);
    CHECK(found.text("error") == "none");
    CHECK(comparable(runs.traced.calls) == comparable(runs.plain.calls));
}

TEST_CASE("cuDNN and cuBLAS load and answer under gpuleak as without it") {
    const std::string cudnn = kCudaLibraries + "/libcudnn.so.9";
    const std::string cublas = kCudaLibraries + "/libcublas.so.13";
    if (!std::filesystem::exists(cudnn)) {
        WARN("skipped: no " << cudnn);
        return;
    }
    std::vector<std::string> arguments{cudnn};
    if (std::filesystem::exists(cublas))
        arguments.push_back(cublas);
    // The simulated driver is found first, so cuDNN's own dlopen and dlsym of libcuda.so.1 meet gpuleak's
    // hooks too. A hang is killed, and fails the test, long before ctest's timeout.
    RunOptions options =
        with_environment({"LD_LIBRARY_PATH=" + simdevice_directory() + ":" + kCudaLibraries});
    options.kill_after = std::chrono::seconds(30);
    TempDir traced_directory;
    const LoggedRun traced =
        run_logged(traced_directory, program_path("cuda_library_probe"), arguments, options);
    TempDir plain_directory;
    const LoggedRun plain =
        run_logged(plain_directory, program_path("cuda_library_probe"), arguments, without_gpuleak(options));
    INFO("stderr: " << traced.run.err);
    REQUIRE(traced.run.exited_with(0));
    REQUIRE(plain.run.exited_with(0));
    const auto version = std::find_if(traced.calls.begin(), traced.calls.end(),
                                      [](const LoggedCall& call) { return call.name == "cudnnGetVersion"; });
    REQUIRE(version != traced.calls.end());
    CHECK(version->number("found") == 1);
    CHECK(version->number("version") >= 90000);
    if (arguments.size() > 2) {
        const auto cublas_version =
            std::find_if(traced.calls.begin(), traced.calls.end(),
                         [](const LoggedCall& call) { return call.name == "cublasGetVersion_v2"; });
        REQUIRE(cublas_version != traced.calls.end());
        CHECK(cublas_version->rc() == 0);
        CHECK(cublas_version->number("version") > 0);
    }
    CHECK(comparable(traced.calls) == comparable(plain.calls));
}

TEST_CASE("a program on NVIDIA's runtime gets the same codes with gpuleak which records them") {
#ifndef GPULEAK_HAVE_REAL_CUDART_PROBE
    WARN("skipped: the CUDA toolkit's libcudart.so.13 was not found when the tests were configured");
#else
    // Without the simulated device on the library path the program's RUNPATH finds NVIDIA's runtime,
    // and that runtime finds whatever driver the machine has (on a machine without a GPU, none).
    RunOptions options;
    options.unset = {"LD_LIBRARY_PATH"};
    TempDir traced_directory;
    const LoggedRun traced = run_logged(traced_directory, program_path("real_cudart_probe"), {}, options);
    TempDir plain_directory;
    const LoggedRun plain =
        run_logged(plain_directory, program_path("real_cudart_probe"), {}, without_gpuleak(options));
    INFO("stderr: " << traced.run.err);
    REQUIRE(traced.run.exited_with(0));
    REQUIRE(plain.run.exited_with(0));
    REQUIRE(!traced.calls.empty());
    CHECK(comparable(traced.calls) == comparable(plain.calls));
    const LoggedCall& allocation = traced.calls.front();
    const int rc = allocation.rc();
    INFO("cudaMalloc returned " << rc);
    CHECK(allocation.text("out") == (rc == 0 ? "changed" : "unchanged"));

    const TraceReader trace = only_trace(traced.run);
    CHECK(!trace.header().simulated_device());
    const auto recorded =
        std::find_if(trace.events().events.begin(), trace.events().events.end(), [](const Event& event) {
            return event.type == EventType::Alloc || event.type == EventType::AllocFailed;
        });
    REQUIRE(recorded != trace.events().events.end());
    CHECK(recorded->api == static_cast<uint8_t>(gpuleak::EntryPoint::cudaMalloc));
    if (rc == 0) {
        CHECK(recorded->type == EventType::Alloc);
    } else {
        CHECK(recorded->type == EventType::AllocFailed);
        CHECK(recorded->result == rc);
        CHECK(recorded->size == allocation.number("requested"));
        CHECK(recorded->stack_id != 0);
        CHECK(trace.notable_events().events.size() == 1);
    }
#endif
}
