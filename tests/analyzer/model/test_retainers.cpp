// Records of what held the memory (format 12, gpuleak_retainers: gpuleak.why()'s answers in the trace): read
// into the model, tied to the out-of-memory error they were taken at and to the sites they name, shown by
// the renderers and used by the diagnosis; a record that is not gpuleak.why()'s is left out, with a warning.
#include <catch2/catch.hpp>

#include <sstream>

#include "in_memory_report.h"
#include "model/diagnosis.h"
#include "model/process_model.h"
#include "read/trace_reader.h"
#include "render/diagnosis_text.h"
#include "render/render_json.h"
#include "render/render_text.h"
#include "trace_builder.h"

namespace format = gpuleak::format;
using gpuleak::analyzer::ProcessReport;
using gpuleak::analyzer::ReportOptions;
using gpuleak::analyzer::TraceReader;
using gpuleak::test::TraceBuilder;
using gpuleak::test::TraceLayout;

namespace {

constexpr uint64_t kBlock = 1024;

// The losses' document: three blocks of stack 1 held by `losses` through their graphs, stack 2's block
// reached by nothing.
const char* const kLosses =
    R"({"moment":"out_of_memory","device":0,"seconds":0.5,"objects_searched":1000,"stopped":false,"problem":"",)"
    R"("saved_tensors_read":true,)"
    R"("sites":[{"stack_id":1,"kind":"block","bytes":3072},{"stack_id":2,"kind":"block","bytes":512}],)"
    R"("holders":[{"root":"`losses`, a list with 3 items in __main__","kind":"global","bytes":3072,"tensors":3,)"
    R"("sites":[[0,3072,"losses[2].grad_fn._saved_self"]],"path":"losses[2].grad_fn._saved_self",)"
    R"("through":["autograd graph"],"own":"","advice":["keep `loss.item()` for a number"]}],)"
    R"("unreached":[[1,512]]})";

format::EventRecord retainers(uint64_t label, uint64_t document, uint64_t time_ns) {
    format::EventRecord record{};
    record.type = static_cast<uint16_t>(format::EventType::Retainers);
    record.address = label;
    record.size = document;
    record.time_ns = time_ns;
    record.device = -2;
    return record;
}

// A PyTorch-like process: stack 1 holds three blocks, stack 2 one, and the allocator refused a block on
// device 0 at 100 ns; `document` recorded at 150 ns.
TraceBuilder out_of_memory(const std::string& document = kLosses) {
    TraceBuilder builder(TraceLayout{.strings_bytes = 16384, .notable_capacity = 8});
    builder.add_stack(1, {0x401000});
    builder.add_stack(2, {0x402000});
    uint64_t slot = 0;
    for (const auto& [stack, count] : {std::pair{1U, 3U}, std::pair{2U, 1U}})
        for (uint32_t i = 0; i < count; ++i, ++slot) {
            format::LiveSlot live{};
            live.state = format::kSlotLive;
            live.stack_id = stack;
            live.address = 0x10000 + slot * kBlock;
            live.size = stack == 1 ? kBlock : 512;
            live.time_ns = 10 + slot;
            live.kind = static_cast<uint8_t>(format::MemoryKind::Block);
            live.sequence = slot;
            builder.set_live(slot, live);
        }
    builder.header().accounting.live_bytes[0][static_cast<size_t>(format::MemoryKind::Block)] =
        3 * kBlock + 512;
    builder.header().accounting.peak_bytes[0][static_cast<size_t>(format::MemoryKind::Block)] =
        3 * kBlock + 512;
    format::EventRecord refused{};
    refused.type = static_cast<uint16_t>(format::EventType::AllocFailed);
    refused.kind = static_cast<uint8_t>(format::MemoryKind::Block);
    refused.size = 2 * kBlock;
    refused.address = 0; // free bytes
    refused.result = format::kAllocatorRefused;
    refused.time_ns = 100;
    builder.add_notable(refused);
    builder.add_string(1, "out of memory on device 0");
    builder.add_string(2, document);
    builder.add_notable(retainers(1, 2, 150));
    return builder;
}

std::vector<ProcessReport> reports_of(const TraceReader& trace) {
    std::vector<ProcessReport> reports;
    reports.push_back(gpuleak::test::report_of(trace));
    return reports;
}

size_t site_of_stack(const gpuleak::analyzer::ProcessModel& model, uint32_t stack_id) {
    for (size_t i = 0; i < model.leak_sites.size(); ++i)
        if (model.leak_sites[i].stack_id == stack_id)
            return i;
    FAIL("no leak site of stack " << stack_id);
    return 0;
}

} // namespace

TEST_CASE("a record taken at an out-of-memory error is tied to the error and to the sites it names") {
    TraceBuilder builder = out_of_memory();
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    gpuleak::analyzer::ReportSet set(reports_of(trace));
    std::vector<ProcessReport>& reports = set.all();
    const gpuleak::analyzer::ProcessModel& model = reports[0].model;
    REQUIRE(model.retainers.size() == 1);
    const gpuleak::analyzer::RetainerSnapshot& snapshot = model.retainers[0];
    CHECK(snapshot.moment == gpuleak::analyzer::RetainerMoment::OutOfMemory);
    CHECK(snapshot.label == "out of memory on device 0");
    CHECK(snapshot.time_ns == 150);
    CHECK(snapshot.device == 0);
    CHECK(snapshot.failure == 0);
    REQUIRE(model.failures.size() == 1);
    CHECK(model.failures[0].retainers == 0);
    REQUIRE(snapshot.holders.size() == 1);
    CHECK(snapshot.holders[0].through == std::vector<std::string>{"autograd graph"});
    const size_t held = site_of_stack(model, 1);
    const size_t reached_by_none = site_of_stack(model, 2);
    REQUIRE(model.leak_sites[held].held_by.size() == 1);
    CHECK(model.leak_sites[held].held_by[0].bytes == 3072);
    CHECK(model.leak_sites[reached_by_none].held_by.empty());
    CHECK(model.warnings.empty());

    const ReportOptions options;
    const std::string text = gpuleak::analyzer::render_text(set, options);
    CHECK_THAT(text,
               Catch::Contains("      what held it, as gpuleak.why() found it before the error reached the "
                               "program (0.5 s):\n"
                               "        3.0 KiB made at "));
    CHECK_THAT(text, Catch::Contains(": held by `losses`, a list with 3 items in __main__\n"
                                     "          through losses[2].grad_fn._saved_self\n"
                                     "          keep `loss.item()` for a number\n"));
    CHECK_THAT(text, Catch::Contains(": not reached from the program's objects\n"));
    // Beside the site, with when it was found.
    CHECK_THAT(text,
               Catch::Contains(
                   "        when memory ran out (0.00 s): 3.0 KiB held by `losses`, a list with 3 items in "
                   "__main__\n"
                   "          through losses[2].grad_fn._saved_self\n"));

    const nlohmann::json process = gpuleak::analyzer::render_json(set, options)["processes"][0];
    CHECK(process["failures"][0]["retainers"] == 0);
    const nlohmann::json& record = process["retainers"][0];
    CHECK(record["moment"] == "out_of_memory");
    CHECK(record["label"] == "out of memory on device 0");
    CHECK(record["failure"] == 0);
    CHECK(record["holders"][0]["root"] == "`losses`, a list with 3 items in __main__");
    CHECK(record["holders"][0]["sites"][0]["leak"] == held);
    CHECK(record["holders"][0]["sites"][0]["path"] == "losses[2].grad_fn._saved_self");
    CHECK(record["unreached"][0]["bytes"] == 512);
    CHECK(process["leaks"][held]["held_by"][0]["root"] == "`losses`, a list with 3 items in __main__");
    CHECK(process["leaks"][held]["stack_id"] == 1);
    CHECK(process["leaks"][reached_by_none]["held_by"].empty());
}

TEST_CASE("the diagnosis of a leak names what held it") {
    TraceBuilder builder = out_of_memory();
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    gpuleak::analyzer::ReportSet set(reports_of(trace));
    std::vector<ProcessReport>& reports = set.all();
    gpuleak::analyzer::ProcessModel& model = reports[0].model;
    // As if its blocks had been made through the program's work.
    const size_t held = site_of_stack(model, 1);
    model.leak_sites[held].growing = true;
    model.growth_sites = {held};
    const gpuleak::analyzer::Diagnosis diagnosis = gpuleak::analyzer::diagnose(model);
    REQUIRE(diagnosis.kind == gpuleak::analyzer::DiagnosisKind::Leak);
    CHECK_THAT(gpuleak::analyzer::diagnosis_text(model, diagnosis, *reports[0].stacks),
               Catch::Contains(
                   "gpuleak.why() at 0.00 s (out of memory on device 0) found 3.0 KiB of it held by "
                   "`losses`, a list with 3 items in __main__. Keep `loss.item()` for a number. Emptying"));
}

TEST_CASE("the latest record that names a site says what holds it") {
    TraceBuilder builder = out_of_memory();
    std::string later = kLosses;
    later.replace(later.find("out_of_memory"), 13, "phase_end");
    later.replace(later.find("`losses`, a list with 3 items"), 29, "`cache`, a dict with 3 items");
    builder.add_string(3, "end of epoch 2");
    builder.add_string(4, later);
    builder.add_notable(retainers(3, 4, 200));
    // Latest of all, but naming none of the sites: what held them before still stands.
    builder.add_string(5, "gpuleak.why()");
    builder.add_string(6,
                       R"({"moment":"on_demand","seconds":0,"objects_searched":0,"stopped":false,)"
                       R"("problem":"","saved_tensors_read":true,"sites":[],"holders":[],"unreached":[]})");
    builder.add_notable(retainers(5, 6, 300));
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    const gpuleak::analyzer::ProcessModel model = gpuleak::analyzer::build_model("trace.bin", trace);
    REQUIRE(model.retainers.size() == 3);
    CHECK(model.retainers[1].moment == gpuleak::analyzer::RetainerMoment::PhaseEnd);
    CHECK_FALSE(model.retainers[1].failure);
    CHECK(model.retainers[2].moment == gpuleak::analyzer::RetainerMoment::OnDemand);
    const gpuleak::analyzer::LeakSite& site = model.leak_sites[site_of_stack(model, 1)];
    REQUIRE(site.held_by.size() == 1);
    CHECK(site.held_by[0].snapshot == 1);
    CHECK(model.retainers[1].holders[site.held_by[0].holder].root ==
          "`cache`, a dict with 3 items in __main__");
    // The error's record is still the error's.
    CHECK(model.failures[0].retainers == 0);
}

TEST_CASE("a record that is not gpuleak.why()'s is left out, with a warning") {
    const std::string document =
        GENERATE(as<std::string>{}, "not json", R"({"moment":"later"})",
                 // A holder's site past the document's sites.
                 std::string(kLosses).replace(std::string(kLosses).find("[[0,3072"), 3, "[[7"),
                 // A kind no trace has.
                 std::string(kLosses).replace(std::string(kLosses).find("\"block\""), 7, "\"tensor\""));
    TraceBuilder builder = out_of_memory();
    builder.add_string(3, "gpuleak.why()");
    builder.add_string(4, document);
    builder.add_notable(retainers(3, 4, 200));
    // Its strings lost.
    builder.add_notable(retainers(3, 99, 250));
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    const gpuleak::analyzer::ProcessModel model = gpuleak::analyzer::build_model("trace.bin", trace);
    // The good record is still read.
    REQUIRE(model.retainers.size() == 1);
    CHECK(model.retainers[0].label == "out of memory on device 0");
    REQUIRE(model.warnings.size() == 2);
    CHECK_THAT(model.warnings[0],
               Catch::StartsWith("the record of what held the memory at 0.00 s (gpuleak.why()) "
                                 "is not gpuleak.why()'s: its "));
    CHECK(model.warnings[1] == "a record of what held the memory at 0.00 s lost its text in the trace");
}

TEST_CASE("a later record that searched for a site and found nothing holding it clears its holders") {
    TraceBuilder builder = out_of_memory();
    // Stack 1's blocks searched for again, at the end of a phase, and reached by nothing.
    builder.add_string(3, "end of epoch 2");
    builder.add_string(
        4, R"({"moment":"phase_end","seconds":1,"objects_searched":10,"stopped":false,"problem":"",)"
           R"("saved_tensors_read":true,"sites":[{"stack_id":1,"kind":"block","bytes":3072}],)"
           R"("holders":[],"unreached":[[0,3072]]})");
    builder.add_notable(retainers(3, 4, 200));
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    const gpuleak::analyzer::ProcessModel model = gpuleak::analyzer::build_model("trace.bin", trace);
    REQUIRE(model.retainers.size() == 2);
    CHECK(model.leak_sites[site_of_stack(model, 1)].held_by.empty());
}

TEST_CASE("an out-of-memory record is the error's of its own thread") {
    TraceBuilder builder(TraceLayout{.strings_bytes = 16384, .notable_capacity = 8});
    format::EventRecord refused{};
    refused.type = static_cast<uint16_t>(format::EventType::AllocFailed);
    refused.kind = static_cast<uint8_t>(format::MemoryKind::Block);
    refused.result = format::kAllocatorRefused;
    refused.device = 0;
    refused.time_ns = 100;
    refused.thread_id = 7;
    builder.add_notable(refused);
    refused.time_ns = 110;
    refused.thread_id = 8;
    builder.add_notable(refused);
    builder.add_string(1, "out of memory on device 0");
    builder.add_string(2, kLosses);
    // Thread 7 searched while thread 8's error came and went.
    format::EventRecord record = retainers(1, 2, 150);
    record.thread_id = 7;
    builder.add_notable(record);
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    const gpuleak::analyzer::ProcessModel model = gpuleak::analyzer::build_model("trace.bin", trace);
    REQUIRE(model.failures.size() == 2);
    CHECK(model.failures[0].retainers == 0);
    CHECK_FALSE(model.failures[1].retainers);
}

TEST_CASE("a record that did not read what autograd saved says so under its error") {
    std::string document = kLosses;
    document.replace(document.find("\"saved_tensors_read\":true"), 25, "\"saved_tensors_read\":false");
    TraceBuilder builder = out_of_memory(document);
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    gpuleak::analyzer::ReportSet set(reports_of(trace));
    std::vector<ProcessReport>& reports = set.all();
    REQUIRE(reports[0].model.retainers.size() == 1);
    CHECK_FALSE(reports[0].model.retainers[0].saved_tensors_read);
    // Wrapped as the text wraps it: compared word by word.
    std::istringstream words(gpuleak::analyzer::render_text(set, ReportOptions{}));
    std::string text;
    for (std::string word; words >> word;)
        text += word + " ";
    CHECK_THAT(text, Catch::Contains("(the tensors autograd saved were not looked into: the program set "
                                     "saved-tensor hooks, which reading them would have run)"));
}

namespace {

// As the program ended: stack 1's three blocks held by `predictions` through the tensors its graph, which
// joins `passes` forward passes, saved for backward; stack 2's block by `model` as its parameter; `moment`
// in place of the exit's.
std::string predictions_at(const std::string& moment, int passes = 8) {
    return R"({"moment":")" + moment +
           R"(","seconds":0.5,"objects_searched":1000,"stopped":false,"problem":"",)"
           R"("saved_tensors_read":true,)"
           R"("sites":[{"stack_id":1,"kind":"block","bytes":3072},{"stack_id":2,"kind":"block","bytes":512}],)"
           R"("holders":[{"root":"`predictions`, a tensor in __main__","kind":"global","bytes":3072,"tensors":3,)"
           R"("sites":[[0,3072,"predictions.grad_fn._saved_mat1"]],"path":"predictions.grad_fn._saved_mat1",)"
           R"("through":["autograd graph","saved for backward"],"saved":[[0,3072]],"own":"","advice":[],)"
           R"("graph":{"path":"predictions","nodes":40,"passes":)" +
           std::to_string(passes) +
           R"(,"spent_passes":0,"address":0,"bytes":40}},)"
           R"({"root":"`model`, a Linear in __main__","kind":"global","bytes":512,"tensors":1,)"
           R"("sites":[[1,512,"model.weight"]],"path":"model.weight","through":["parameter"],"saved":[],)"
           R"("own":"the parameters of a Linear","advice":[]}],"unreached":[]})";
}

TraceBuilder ended_with(const std::string& document) {
    TraceBuilder builder = out_of_memory();
    builder.add_string(3, "the program's exit");
    builder.add_string(4, document);
    builder.add_notable(retainers(3, 4, 200));
    return builder;
}

} // namespace

TEST_CASE(
    "memory an autograd graph saved for a backward that never ran, held as the program ended, is a leak") {
    TraceBuilder builder = ended_with(predictions_at("exit"));
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    gpuleak::analyzer::ReportSet set(reports_of(trace));
    std::vector<ProcessReport>& reports = set.all();
    const gpuleak::analyzer::ProcessModel& model = reports[0].model;
    REQUIRE(model.retainers.size() == 2);
    CHECK(model.retainers[1].moment == gpuleak::analyzer::RetainerMoment::Exit);
    const size_t saved = site_of_stack(model, 1);
    // The parameter is the model's, not a graph's: only the saved tensors' site.
    REQUIRE(model.kept_for_backward.size() == 1);
    CHECK(model.kept_for_backward[0].site == saved);
    CHECK(model.kept_for_backward[0].bytes == 3 * kBlock);
    CHECK(model.retainers[1].holders[model.kept_for_backward[0].holder].root ==
          "`predictions`, a tensor in __main__");
    const gpuleak::analyzer::Diagnosis& diagnosis = reports[0].diagnosis;
    REQUIRE(diagnosis.kind == gpuleak::analyzer::DiagnosisKind::Leak);
    CHECK(diagnosis.leak->cause == gpuleak::analyzer::LeakCause::KeptForBackward);
    CHECK(diagnosis.leak->sites == std::vector<size_t>{saved});
    CHECK(diagnosis.leak->bytes == 3 * kBlock);
    CHECK_THAT(
        gpuleak::analyzer::diagnosis_text(model, diagnosis, *reports[0].stacks),
        Catch::StartsWith("As the program ended, the autograd graphs of 8 forward passes held 3.0 KiB: "
                          "tensors saved for a backward() that never ran.") &&
            Catch::Contains("and held by `predictions`, a tensor in __main__. Outputs of forward passes") &&
            Catch::Contains("`with torch.no_grad():`"));
    const nlohmann::json process = gpuleak::analyzer::render_json(set, ReportOptions{})["processes"][0];
    CHECK(process["diagnosis"]["leak_cause"] == "kept_for_backward");
    CHECK(process["growth"].empty());
    REQUIRE(process["kept_for_backward"].size() == 1);
    CHECK(process["kept_for_backward"][0]["held_bytes"] == 3 * kBlock);
    CHECK(process["kept_for_backward"][0]["held_by"] == "`predictions`, a tensor in __main__");
    CHECK(process["retainers"][1]["moment"] == "exit");
}

TEST_CASE("tensors saved for backward are no leak before the program ends, nor beside memory that grew") {
    SECTION("at a phase's end or on demand, the backward pass may still come") {
        const std::string moment = GENERATE(as<std::string>{}, "phase_end", "on_demand");
        TraceBuilder builder = ended_with(predictions_at(moment));
        const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
        gpuleak::analyzer::ReportSet set(reports_of(trace));
        std::vector<ProcessReport>& reports = set.all();
        CHECK(reports[0].model.kept_for_backward.empty());
        CHECK(reports[0].diagnosis.kind != gpuleak::analyzer::DiagnosisKind::Leak);
    }
    SECTION("what one forward pass saved is what the last step left, not a leak") {
        TraceBuilder builder = ended_with(predictions_at("exit", GENERATE(1, 2)));
        const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
        gpuleak::analyzer::ReportSet set(reports_of(trace));
        std::vector<ProcessReport>& reports = set.all();
        CHECK(reports[0].model.kept_for_backward.empty());
        CHECK(reports[0].diagnosis.kind != gpuleak::analyzer::DiagnosisKind::Leak);
    }
    SECTION("a site that grew is the leak") {
        TraceBuilder builder = ended_with(predictions_at("exit"));
        const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
        gpuleak::analyzer::ProcessModel model = gpuleak::analyzer::build_model("trace.bin", trace);
        const size_t grew = site_of_stack(model, 2);
        model.growth_sites = {grew};
        const gpuleak::analyzer::Diagnosis diagnosis = gpuleak::analyzer::diagnose(model);
        REQUIRE(diagnosis.kind == gpuleak::analyzer::DiagnosisKind::Leak);
        CHECK(diagnosis.leak->cause == gpuleak::analyzer::LeakCause::Growth);
        CHECK(diagnosis.leak->sites == std::vector<size_t>{grew});
    }
    SECTION("a document of a package older than the record at exit has no saved tensors") {
        std::string document = predictions_at("exit");
        for (const std::string saved : {R"("saved":[[0,3072]],)", R"("saved":[],)",
                                        R"(,"graph":{"path":"predictions","nodes":40,"passes":8,)"
                                        R"("spent_passes":0,"address":0,"bytes":40})"})
            document.erase(document.find(saved), saved.size());
        TraceBuilder builder = ended_with(document);
        const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
        const gpuleak::analyzer::ProcessModel model = gpuleak::analyzer::build_model("trace.bin", trace);
        REQUIRE(model.retainers.size() == 2);
        CHECK(model.kept_for_backward.empty());
    }
}

namespace {

// Stack 2's block (the storage of `running_loss`, at 0x10c00) kept by a graph that joins `passes` backward
// passes, recorded at `moment`.
std::string running_total_at(const std::string& moment, int passes, uint64_t address = 0x10c00) {
    return R"({"moment":")" + moment +
           R"(","seconds":0.1,"objects_searched":100,"stopped":false,"problem":"","saved_tensors_read":true,)"
           R"("sites":[{"stack_id":2,"kind":"block","bytes":512}],)"
           R"("holders":[{"root":"`running_loss`, a tensor in __main__","kind":"global","bytes":512,"tensors":1,)"
           R"("sites":[[0,512,"running_loss"]],"path":"running_loss","through":[],"saved":[],"own":"",)"
           R"("advice":[],"graph":{"path":"running_loss","nodes":640,"passes":0,"spent_passes":)" +
           std::to_string(passes) + R"(,"address":)" + std::to_string(address) +
           R"(,"bytes":4}}],"unreached":[]})";
}

} // namespace

TEST_CASE("a kept tensor whose graph joins the graphs of many backward passes is a leak where it was made") {
    const std::string moment = GENERATE(as<std::string>{}, "exit", "phase_end", "on_demand");
    TraceBuilder builder = ended_with(running_total_at(moment, 64));
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    gpuleak::analyzer::ReportSet set(reports_of(trace));
    std::vector<ProcessReport>& reports = set.all();
    const gpuleak::analyzer::ProcessModel& model = reports[0].model;
    const size_t total = site_of_stack(model, 2);
    REQUIRE(model.spent_graphs.size() == 1);
    CHECK(model.spent_graphs[0].site == total);
    const gpuleak::analyzer::Diagnosis& diagnosis = reports[0].diagnosis;
    REQUIRE(diagnosis.kind == gpuleak::analyzer::DiagnosisKind::Leak);
    CHECK(diagnosis.leak->cause == gpuleak::analyzer::LeakCause::SpentGraphs);
    CHECK(diagnosis.leak->sites == std::vector<size_t>{total});
    CHECK_THAT(
        gpuleak::analyzer::diagnosis_text(model, diagnosis, *reports[0].stacks),
        Catch::StartsWith("`running_loss`, a tensor in __main__, keeps the autograd graphs of 64 backward "
                          "passes (640 nodes), per gpuleak.why() at 0.00 s (the program's exit)") &&
            Catch::Contains("(4 B at `running_loss`, made at ") && Catch::Contains("`loss.item()`"));
    const nlohmann::json process = gpuleak::analyzer::render_json(set, ReportOptions{})["processes"][0];
    CHECK(process["diagnosis"]["leak_cause"] == "spent_graphs");
    REQUIRE(process["spent_graphs"].size() == 1);
    CHECK(process["spent_graphs"][0]["spent_passes"] == 64);
    CHECK(process["spent_graphs"][0]["held_by"] == "`running_loss`, a tensor in __main__");
}

TEST_CASE("a spent graph of a few passes, or of a tensor no longer alive, is no leak") {
    // Fewer than kMinSpentPasses: one step's loss may sum as many, which one backward() ran through.
    const auto [passes, address] = GENERATE(std::pair{15, uint64_t{0x10c00}},
                                            std::pair{64, uint64_t{0x90000}}, std::pair{64, uint64_t{0}});
    TraceBuilder builder = ended_with(running_total_at("exit", passes, address));
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    const gpuleak::analyzer::ProcessModel model = gpuleak::analyzer::build_model("trace.bin", trace);
    REQUIRE(model.retainers.size() == 2);
    CHECK(model.spent_graphs.empty());
}

TEST_CASE("a list of losses, each with its own graph, is no running total, however many it holds") {
    std::string document = running_total_at("exit", 64);
    const std::string spent = R"("spent_passes":64,)";
    document.replace(document.find(spent), spent.size(), R"("spent_passes":64,"spent_by_one":1,)");
    TraceBuilder builder = ended_with(document);
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    const gpuleak::analyzer::ProcessModel model = gpuleak::analyzer::build_model("trace.bin", trace);
    REQUIRE(model.retainers.size() == 2);
    CHECK(model.retainers[1].holders[0].graph->spent_by_one == 1);
    CHECK(model.spent_graphs.empty());
}

TEST_CASE("only the latest record that found anything tells the spent graphs") {
    TraceBuilder builder = ended_with(running_total_at("phase_end", 64));
    SECTION("a later record that found no such graph: the running total was let go, its address reused") {
        builder.add_string(5, "gpuleak.why()");
        builder.add_string(6, running_total_at("on_demand", 0));
        builder.add_notable(retainers(5, 6, 300));
        const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
        CHECK(gpuleak::analyzer::build_model("trace.bin", trace).spent_graphs.empty());
    }
    SECTION("a later record that failed says nothing: the one before stands") {
        builder.add_string(5, "gpuleak.why()");
        builder.add_string(
            6, R"({"moment":"on_demand","seconds":0,"objects_searched":0,"stopped":false,)"
               R"("problem":"the search failed","saved_tensors_read":true,"sites":[],"holders":[],)"
               R"("unreached":[]})");
        builder.add_notable(retainers(5, 6, 300));
        const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
        const gpuleak::analyzer::ProcessModel model = gpuleak::analyzer::build_model("trace.bin", trace);
        REQUIRE(model.spent_graphs.size() == 1);
        CHECK(model.spent_graphs[0].snapshot == 1);
    }
}

TEST_CASE("a holder's graph is null where it has none, and a graph of another shape is not read") {
    std::string document = running_total_at("exit", 64);
    const size_t graph = document.find(R"("graph":{)");
    const size_t end = document.find('}', graph) + 1;
    SECTION("null") {
        document.replace(graph, end - graph, R"("graph":null)");
        TraceBuilder builder = ended_with(document);
        const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
        const gpuleak::analyzer::ProcessModel model = gpuleak::analyzer::build_model("trace.bin", trace);
        REQUIRE(model.retainers.size() == 2);
        CHECK_FALSE(model.retainers[1].holders[0].graph);
        CHECK(model.spent_graphs.empty());
    }
    SECTION("a list, or a count that is no count") {
        document.replace(
            graph, end - graph,
            GENERATE(
                as<std::string>{}, R"("graph":[64])",
                R"("graph":{"path":"t","nodes":1,"passes":0,"spent_passes":-64,"address":1,"bytes":4})"));
        TraceBuilder builder = ended_with(document);
        const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
        const gpuleak::analyzer::ProcessModel model = gpuleak::analyzer::build_model("trace.bin", trace);
        CHECK(model.retainers.size() == 1);
        REQUIRE(model.warnings.size() == 1);
        CHECK_THAT(model.warnings[0], Catch::Contains("its graph is missing or wrong") ||
                                          Catch::Contains("its spent_passes is missing or wrong"));
    }
}
