// The exception a Python program's code ended with (format::EventType::ProgramError): read into the model
// with the program's own frame it came from and the out-of-memory failure it reports, and said by the text
// and JSON reports before the diagnosis.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "in_memory_report.h"
#include "model/process_model.h"
#include "read/trace_reader.h"
#include "render/diagnosis_text.h"
#include "render/render_json.h"
#include "render/render_text.h"
#include "trace_builder.h"

using namespace gpuleak::analyzer;
using gpuleak::test::TraceBuilder;
using gpuleak::test::TraceLayout;
namespace format = gpuleak::format;

namespace {

constexpr uint64_t kSecond = 1'000'000'000;

// A shape error raised inside torch, called from the script's line 9 in <module>.
const std::string kShapeError =
    R"json({"type":"RuntimeError","message":"mat1 and mat2 shapes cannot be multiplied (32x1000 and 1024x1024)",)json"
    R"json("frames":[["/home/me/crash.py",9,"<module>"],)json"
    R"json(["/venv/lib/python3.12/site-packages/torch/nn/modules/module.py",1779,"Module._wrapped_call_impl"],)json"
    R"json(["/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py",134,"Linear.forward"]]})json";

// A trace whose program ended with `document`, recorded at 3 s by thread 1; an allocation PyTorch's
// allocator refused at 2 s and one the driver refused at 2.5 s, on `failures_thread`, where `failures`.
TraceBuilder ended_with(const std::string& document, bool failures = false, uint32_t failures_thread = 1) {
    TraceBuilder builder(TraceLayout{.strings_bytes = 16384, .notable_capacity = 8});
    builder.header().start_monotonic_ns = kSecond;
    if (failures) {
        format::EventRecord refused{};
        refused.type = static_cast<uint16_t>(format::EventType::AllocFailed);
        refused.kind = static_cast<uint8_t>(format::MemoryKind::Block);
        refused.size = 512 << 20;
        refused.result = format::kAllocatorRefused;
        refused.time_ns = 3 * kSecond;
        refused.thread_id = failures_thread;
        builder.add_notable(refused);
        refused.kind = static_cast<uint8_t>(format::MemoryKind::Device);
        refused.result = 1; // invalid value: not memory running out
        refused.time_ns = 3 * kSecond + kSecond / 2;
        builder.add_notable(refused);
    }
    builder.add_string(1, document);
    format::EventRecord error{};
    error.type = static_cast<uint16_t>(format::EventType::ProgramError);
    error.address = 1;
    error.time_ns = 4 * kSecond;
    error.thread_id = 1;
    error.device = -2;
    builder.add_notable(error);
    builder.end_exited(1, 4 * kSecond);
    return builder;
}

std::vector<ProcessReport> reports_of(const TraceReader& trace) {
    std::vector<ProcessReport> reports;
    reports.push_back(gpuleak::test::report_of(trace));
    return reports;
}

} // namespace

TEST_CASE("the exception a program ended with is read with the program's own line it came from") {
    const TraceReader trace = TraceReader::parse(ended_with(kShapeError).bytes(), "trace.bin");
    gpuleak::analyzer::ReportSet set(reports_of(trace));
    std::vector<ProcessReport>& reports = set.all();
    const ProcessModel& model = reports[0].model;
    REQUIRE(model.error);
    CHECK(model.error->type == "RuntimeError");
    CHECK(model.error->frames.size() == 3);
    CHECK(model.error->program_frame == 0); // the script's, not torch's where it was raised
    CHECK(model.error->time_ns == 3 * kSecond);
    CHECK_FALSE(model.error->failure);
    const std::string said =
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x1000 and 1024x1024), at "
        "/home/me/crash.py:9 in <module>";
    CHECK(program_error_text(model, *model.error) == said);

    ReportOptions options;
    const std::string text = render_text(set, options);
    CHECK_THAT(text, Catch::Contains("  ended      exited with status 1 after 3.0 s\n"
                                     "  error      RuntimeError: mat1 and mat2 shapes cannot be multiplied "
                                     "(32x1000 and 1024x1024), at\n"
                                     "             /home/me/crash.py:9 in <module>\n"));
    CHECK(text.find("  error ") < text.find("Diagnosis:"));
    const nlohmann::json error = render_json(set, options)["processes"][0]["error"];
    CHECK(error["type"] == "RuntimeError");
    CHECK(error["program_frame"] == 0);
    CHECK(error["failure"].is_null());
    CHECK(error["frames"][2]["function"] == "Linear.forward");
    CHECK(error["frames"][2]["program"] == false);
    CHECK(error["frames"][0]["program"] == true);
    CHECK(error["text"] == said);
}

TEST_CASE("an out-of-memory exception points to the failed allocation it reports") {
    const std::string document =
        R"json({"type":"torch.OutOfMemoryError","message":"CUDA out of memory. Tried to allocate 512.00 MiB.\n)json"
        R"json(Of the allocated memory 3.1 GiB is allocated by PyTorch","frames":[["/home/me/train.py",40,"<module>"],)json"
        R"json(["/home/me/train.py",22,"train"]]})json";
    const TraceReader trace = TraceReader::parse(ended_with(document, true).bytes(), "trace.bin");
    gpuleak::analyzer::ReportSet set(reports_of(trace));
    std::vector<ProcessReport>& reports = set.all();
    const ProcessModel& model = reports[0].model;
    REQUIRE(model.error);
    REQUIRE(model.failures.size() == 2);
    CHECK(model.error->failure == 0); // the allocator's refusal, not the driver's invalid value after it
    CHECK(model.error->program_frame == 1);
    // On one line, whatever lines the message had.
    CHECK(program_error_text(model, *model.error) == "torch.OutOfMemoryError: CUDA out of memory. Tried to "
                                                     "allocate 512.00 MiB. Of the allocated memory 3.1 "
                                                     "GiB is allocated by PyTorch, at /home/me/train.py:22 "
                                                     "in train (memory ran out: the allocation of 512.0 "
                                                     "MiB at 2.00 s failed)");
}

TEST_CASE("an out-of-memory error another thread met, and caught, is not the exception's") {
    const std::string document =
        R"json({"type":"torch.OutOfMemoryError","message":"CUDA out of memory.","frames":[["/home/me/train.py",40,"<module>"]]})json";
    const TraceReader trace = TraceReader::parse(ended_with(document, true, 7).bytes(), "trace.bin");
    const ProcessModel model = build_model("trace.bin", trace);
    REQUIRE(model.error);
    REQUIRE(model.failures.size() == 2);
    CHECK_FALSE(model.error->failure);
}

TEST_CASE("a long message is cut, and none of the program's frames names no line") {
    const std::string document = R"json({"type":"ValueError","message":")json" + std::string(1000, 'x') +
                                 R"json(","frames":[["<frozen runpy>",88,"_run_code"]]})json";
    const TraceReader trace = TraceReader::parse(ended_with(document).bytes(), "trace.bin");
    const ProcessModel model = build_model("trace.bin", trace);
    REQUIRE(model.error);
    CHECK_FALSE(model.error->program_frame);
    CHECK(program_error_text(model, *model.error) == "ValueError: " + std::string(300, 'x') + "...");
}

TEST_CASE("a record of an exception that is not gpuleak's is left out with a warning") {
    const TraceReader trace =
        TraceReader::parse(ended_with(R"json({"type":"ValueError"})json").bytes(), "trace.bin");
    const ProcessModel model = build_model("trace.bin", trace);
    CHECK_FALSE(model.error);
    REQUIRE(model.warnings.size() == 1);
    CHECK(model.warnings[0] == "the record of an exception the program raised, at 3.00 s, cannot be read");
}

TEST_CASE("a trace of format 15, before records of exceptions, is read as it was") {
    TraceBuilder builder;
    builder.header().format_version = 15;
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    CHECK(trace.header().format_version == 15);
    CHECK_FALSE(build_model("trace.bin", trace).error);
}

TEST_CASE("each notebook cell that raised is kept with its cell, and tied to a failure of its own only") {
    const std::string out_of_memory =
        R"json({"type":"torch.OutOfMemoryError","message":"CUDA out of memory.","cell":"%s",)json"
        R"json("frames":[["/tmp/ipykernel_7/%s.py",2,"<module>"]]})json";
    const auto of_cell = [&](const std::string& cell, const std::string& file) {
        std::string document = out_of_memory;
        document.replace(document.find("%s"), 2, cell);
        document.replace(document.find("%s"), 2, file);
        return document;
    };
    TraceBuilder builder(TraceLayout{.strings_bytes = 16384, .notable_capacity = 8});
    builder.header().start_monotonic_ns = kSecond;
    builder.add_string(1, "cell [1]");
    builder.add_string(2, "cell [2]");
    builder.add_string(3, of_cell("cell [1]", "11"));
    builder.add_string(4, of_cell("cell [2]", "22"));
    builder.add_string(5, "/tmp/ipykernel_7/22.py");
    builder.add_string(6, "x = torch.empty(1 << 40, device=\"cuda\")");
    const auto note = [&](format::EventType type, uint64_t address, uint64_t at_ns) {
        format::EventRecord event{};
        event.type = static_cast<uint16_t>(type);
        event.address = address;
        event.time_ns = at_ns;
        event.thread_id = 1;
        event.device = -2;
        return event;
    };
    builder.add_notable(note(format::EventType::Marker, 1, 2 * kSecond));
    format::EventRecord refused = note(format::EventType::AllocFailed, UINT64_MAX, 3 * kSecond);
    refused.kind = static_cast<uint8_t>(format::MemoryKind::Block);
    refused.size = 512 << 20;
    refused.result = format::kAllocatorRefused;
    refused.device = 0;
    builder.add_notable(refused);
    builder.add_notable(note(format::EventType::ProgramError, 3, 3 * kSecond + kSecond / 4));
    // Cell [2] is named (gpuleak_name_source) and runs out of memory without a failure of its own: the
    // sub-allocator's refusal of cell [1] is not its.
    format::EventRecord named = note(format::EventType::SourceName, 5, 3 * kSecond + kSecond / 2);
    named.size = 2;
    named.stream = 6;
    builder.add_notable(named);
    builder.add_notable(note(format::EventType::Marker, 2, 3 * kSecond + kSecond / 2));
    builder.add_notable(note(format::EventType::ProgramError, 4, 4 * kSecond));
    builder.end_exited(0, 5 * kSecond);
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    gpuleak::analyzer::ReportSet set(reports_of(trace));
    std::vector<ProcessReport>& reports = set.all();
    const ProcessModel& model = reports[0].model;
    CHECK_FALSE(model.error); // the kernel did not end with either
    REQUIRE(model.cell_errors.size() == 2);
    CHECK(model.cell_errors[0].cell == "cell [1]");
    CHECK(model.cell_errors[0].failure == 0);
    CHECK(model.cell_errors[1].cell == "cell [2]");
    CHECK_FALSE(model.cell_errors[1].failure);
    CHECK(cell_errors_text(model) ==
          "cell [2] raised torch.OutOfMemoryError: CUDA out of memory., at cell [2], line 2 (1 earlier cell "
          "raised too)");
    CHECK_THAT(
        render_text(set, ReportOptions{}),
        Catch::Contains("  raised     cell [2] raised torch.OutOfMemoryError: CUDA out of memory., at cell "
                        "[2], line 2 (1\n"
                        "             earlier cell raised too)\n"));
    const nlohmann::json json = render_json(set, ReportOptions{})["processes"][0];
    CHECK(json["error"].is_null());
    REQUIRE(json["cell_errors"].size() == 2);
    CHECK(json["cell_errors"][1]["cell"] == "cell [2]");
    CHECK(json["cell_errors"][1]["frames"][0]["source_name"] == "cell [2]");
    CHECK(json["cell_errors"][0]["failure"] == 0);
}

namespace {

// A trace ended at 4 s by `signal`, sent as `sender` says; its parent is pid 700.
ProcessReport signalled(int signal, const format::EndSender& sender, std::vector<std::byte>& bytes) {
    TraceBuilder builder(TraceLayout{.notable_capacity = 8});
    builder.header().start_monotonic_ns = kSecond;
    builder.header().ppid = 700;
    builder.end_signaled(signal, 4 * kSecond);
    builder.header().end_sender = sender;
    bytes = builder.bytes();
    return gpuleak::test::report_of(TraceReader::parse(bytes, "trace.bin"));
}

format::EndSender sent_by(format::SenderKind kind, int32_t pid = 0, const char* name = "") {
    format::EndSender sender{};
    sender.kind = static_cast<uint32_t>(kind);
    sender.pid = pid;
    std::snprintf(sender.name, sizeof sender.name, "%s", name);
    return sender;
}

} // namespace

TEST_CASE("who sent the signal that ended a process is said after the signal, in words") {
    std::vector<std::byte> bytes;
    const auto ended = [&](int signal, const format::EndSender& sender) {
        return ended_text(signalled(signal, sender, bytes).model);
    };
    CHECK(ended(SIGTERM, sent_by(format::SenderKind::Process, 700, "timeout")) ==
          "killed by signal 15 (SIGTERM) after 3.0 s: sent by pid 700 (timeout), its parent");
    CHECK(ended(SIGTERM, sent_by(format::SenderKind::Process, 812, "slurmstepd")) ==
          "killed by signal 15 (SIGTERM) after 3.0 s: sent by pid 812 (slurmstepd)");
    // A name is what the sender set for itself: printed as printable text.
    CHECK(ended(SIGHUP, sent_by(format::SenderKind::Process, 9, "bad\x1b[2Jname")) ==
          "killed by signal 1 (SIGHUP) after 3.0 s: sent by pid 9 (bad\\x1b[2Jname)");
    CHECK(ended(SIGINT, sent_by(format::SenderKind::Kernel)) ==
          "killed by signal 2 (SIGINT) after 3.0 s: Ctrl-C at its terminal");
    CHECK(ended(SIGXCPU, sent_by(format::SenderKind::Kernel)) ==
          "killed by signal 24 (SIGXCPU) after 3.0 s: its CPU time limit (ulimit -t) ran out");
    CHECK_THAT(ended(SIGABRT, sent_by(format::SenderKind::Itself, 1)),
               Catch::EndsWith(
                   ": it aborted itself "
                   "(abort(): a failed assertion, an uncaught C++ exception, or a library's fatal error)"));
    // A fault says itself, whether the kernel sent it or a handler raised it again after saying where.
    CHECK(ended(SIGSEGV, sent_by(format::SenderKind::Kernel)) == "killed by signal 11 (SIGSEGV) after 3.0 s");
    CHECK(ended(SIGSEGV, sent_by(format::SenderKind::Itself, 1)) ==
          "killed by signal 11 (SIGSEGV) after 3.0 s");
    CHECK(ended(SIGTERM, sent_by(format::SenderKind::Unknown)) ==
          "killed by signal 15 (SIGTERM) after 3.0 s");
    CHECK_THAT(
        ended(SIGTERM, sent_by(format::SenderKind::Notebook, 812, "jupyter-lab")),
        Catch::StartsWith("killed by signal 15 (SIGTERM) after 3.0 s: Jupyter (pid 812, jupyter-lab) sent "
                          "it to end the kernel"));

    // A SIGKILL the launcher saw: the OOM killer where it confirmed it, and the Killed paragraph says so.
    format::EndSender oom = sent_by(format::SenderKind::OomKiller);
    oom.written_by = static_cast<uint32_t>(format::EndWriter::Launcher);
    ProcessReport killed = signalled(SIGKILL, oom, bytes);
    CHECK(ended_text(killed.model) ==
          "killed by signal 9 (SIGKILL) after 3.0 s: the kernel's OOM killer sent it, as memory ran out");
    CHECK(killed_unseen(killed.model.header.end));
    format::EndSender unknown{};
    unknown.written_by = static_cast<uint32_t>(format::EndWriter::Launcher);
    CHECK(ended_text(signalled(SIGKILL, unknown, bytes).model) ==
          "killed by signal 9 (SIGKILL) after 3.0 s: who sent it is not known; the OOM killer was not "
          "confirmed");
    // A SIGKILL some handler raised (none can catch one) is not the launcher's word: no Killed paragraph.
    CHECK_FALSE(
        killed_unseen(signalled(SIGKILL, sent_by(format::SenderKind::Itself, 1), bytes).model.header.end));
}
