// Growth needs repetition (repetition.h): memory made in one stretch and held since is the program's
// working set however much of the program that stretch was, and a site grows only where the program's
// work, seen in what it made and freed elsewhere between two survivors, came back to make another.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "model/process_model.h"
#include "read/trace_reader.h"
#include "trace_builder.h"

using namespace gpuleak::analyzer;
using gpuleak::test::TraceBuilder;
using gpuleak::test::TraceLayout;
namespace format = gpuleak::format;

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kStart = 1000;
constexpr uint64_t kMillisecond = 1'000'000;

// 3.10's line table, first line 1: instructions [0, 2) on line 2, [2, 4) on line 3, and so on.
const std::vector<uint8_t> kLineTable = {2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1};

// Stacks of a PyTorch script (Python frames, innermost first; code 1 the script's <module>, 2 a
// function of torch's), of PyTorch's autograd thread (no Python frames) and of a C++ program.
enum Stack : uint32_t {
    kMakeModel = 1,      // <module> line 7, `model = Net().to(device)`, in torch's convert
    kBatch = 2,          // <module> line 3, `x = batch.to(device)`
    kLoss = 3,           // <module> line 5, `loss = loss_fn(model(x), y)`
    kBackward = 4,       // <module> line 9, `loss.backward()`
    kHalf = 5,           // <module> line 11, `model.half()`, in torch's convert
    kAutograd = 6,       // PyTorch's autograd thread: a gradient
    kAutogradTmp = 7,    // the same thread, another kernel's output
    kKeepHistory = 8,    // a C++ program's: main -> keep_history -> cudaMalloc
    kStep = 9,           // a C++ program's: main -> step -> cudaMalloc
    kWorkerScratch = 10, // a C++ program's thread of its own: its start -> work -> cudaMalloc
};

class Program {
  public:
    // A Python program's stacks, or a C++ program's; a ring of `ring` events.
    explicit Program(bool python = true, uint64_t ring = 512)
        : builder_(TraceLayout{
              .strings_bytes = 16384, .live_capacity = 128, .ring_capacity = ring, .notable_capacity = 8}) {
        builder_.header().start_monotonic_ns = kStart;
        builder_.header().stack_depth = 64;
        if (!python) {
            // Innermost first: cudaMalloc, the function that called it, main, the C library's start.
            builder_.add_stack(kKeepHistory, {0x100, 0x200, 0x300, 0x400});
            builder_.add_stack(kStep, {0x100, 0x210, 0x310, 0x400});
            builder_.add_stack(kWorkerScratch, {0x100, 0x220, 0x500, 0x600});
            return;
        }
        builder_.header().python_version = format::python_version(3, 10);
        builder_.add_code(1, "/home/me/train.py", "<module>", 1, kLineTable);
        builder_.add_code(2, "/venv/lib/python3.10/site-packages/torch/nn/modules/module.py", "convert", 1,
                          kLineTable);
        builder_.add_stack(kMakeModel, {0x1}, {{2, 0}, {1, 12}});
        builder_.add_stack(kBatch, {0x1}, {{1, 4}});
        builder_.add_stack(kLoss, {0x1}, {{1, 8}});
        builder_.add_stack(kBackward, {0x1}, {{1, 16}});
        builder_.add_stack(kHalf, {0x1}, {{2, 0}, {1, 20}});
        builder_.add_stack(kAutograd, {0x10, 0x11, 0x12});
        builder_.add_stack(kAutogradTmp, {0x13, 0x11, 0x12});
    }

    // Allocates 1 MiB at `stack`, kept to the end unless freed.
    uint64_t make(uint32_t stack, uint32_t thread = 1) {
        format::EventRecord event{};
        event.type = static_cast<uint16_t>(format::EventType::Alloc);
        event.kind = static_cast<uint8_t>(format::MemoryKind::Device);
        event.address = 0x100000 * (++made_);
        event.size = kMiB;
        event.stack_id = stack;
        event.thread_id = thread;
        event.time_ns = kStart + builder_.header().ring_head * kMillisecond;
        live_.push_back({event, builder_.header().ring_head});
        builder_.append_event(event);
        return event.address;
    }

    // What gpuleak.why() found holding the memory as the program ended: `document`.
    void record_at_exit(const std::string& document) {
        builder_.add_string(1, "the program's exit");
        builder_.add_string(2, document);
        format::EventRecord record{};
        record.type = static_cast<uint16_t>(format::EventType::Retainers);
        record.address = 1;
        record.size = 2;
        record.time_ns = kStart + builder_.header().ring_head * kMillisecond;
        record.device = -2;
        builder_.add_notable(record);
    }

    void free(uint64_t address) {
        for (auto kept = live_.begin(); kept != live_.end(); ++kept) {
            if (kept->event.address != address)
                continue;
            format::EventRecord event = kept->event;
            event.type = static_cast<uint16_t>(format::EventType::Free);
            event.time_ns = kStart + builder_.header().ring_head * kMillisecond;
            builder_.append_event(event);
            live_.erase(kept);
            return;
        }
        FAIL("freed twice");
    }

    format::FileHeader& header() { return builder_.header(); }

    // The site of `stack` as the model of the finished trace finds it.
    LeakSite site(uint32_t stack) {
        for (size_t slot = 0; slot < live_.size(); ++slot) {
            const format::EventRecord& event = live_[slot].event;
            format::LiveSlot record{};
            record.state = format::kSlotLive;
            record.address = event.address;
            record.size = event.size;
            record.kind = event.kind;
            record.stack_id = event.stack_id;
            record.thread_id = event.thread_id;
            record.time_ns = event.time_ns;
            record.sequence = live_[slot].sequence;
            builder_.set_live(slot, record);
            builder_.header().accounting.live_bytes[0][event.kind] += event.size;
        }
        builder_.end_exited(0, kStart + (builder_.header().ring_head + 1) * kMillisecond);
        const TraceReader trace = TraceReader::parse(builder_.bytes(), "trace.bin");
        const ProcessModel model = build_model("trace.bin", trace);
        for (const LeakSite& site : model.leak_sites)
            if (site.stack_id == stack)
                return site;
        FAIL("no site of stack " << stack);
        return {};
    }

  private:
    struct Live {
        format::EventRecord event;
        uint64_t sequence;
    };
    TraceBuilder builder_;
    std::vector<Live> live_;
    uint64_t made_ = 0;
};

} // namespace

TEST_CASE("a model made and held, then a failure: the working set, though it was all of the program") {
    Program program;
    for (int parameter = 0; parameter < 24; ++parameter)
        program.make(kMakeModel);
    // The first forward pass made its input and failed.
    program.make(kBatch);
    const LeakSite model = program.site(kMakeModel);
    CHECK(model.count == 24);
    CHECK(model.program_share > 0.9);
    CHECK_FALSE(model.growing);
}

TEST_CASE("a site made again after the program made and freed memory at another line grows") {
    Program program;
    for (int parameter = 0; parameter < 4; ++parameter)
        program.make(kMakeModel);
    uint64_t batch = 0;
    for (int step = 0; step < 6; ++step) {
        const uint64_t next = program.make(kBatch);
        if (batch != 0)
            program.free(batch);
        batch = next;
        program.make(kLoss); // kept: `losses.append(loss)`
    }
    CHECK(program.site(kLoss).growing);
}

TEST_CASE("what one call makes and frees within itself is no repetition: a backward pass") {
    Program program;
    for (int parameter = 0; parameter < 4; ++parameter)
        program.make(kMakeModel);
    program.make(kBatch);
    program.make(kLoss);
    // loss.backward(): its first allocation on the program's thread, then PyTorch's autograd thread makes
    // each gradient and frees the outputs of the kernels before it.
    program.make(kBackward);
    for (int layer = 0; layer < 12; ++layer) {
        const uint64_t output = program.make(kAutogradTmp, 2);
        program.make(kAutograd, 2);
        program.free(output);
    }
    CHECK_FALSE(program.site(kAutograd).growing);

    SECTION("but the same gradients kept over steps of a loop grow") {
        Program steps;
        for (int step = 0; step < 6; ++step) {
            const uint64_t batch = steps.make(kBatch);
            steps.make(kBackward);
            const uint64_t output = steps.make(kAutogradTmp, 2);
            steps.make(kAutograd, 2); // `grads.append(weight.grad)`, zero_grad(set_to_none=True)
            steps.free(output);
            steps.free(batch);
        }
        CHECK(steps.site(kAutograd).growing);
    }
}

TEST_CASE("freeing what was made before the site is no repetition: a model converted to half precision") {
    Program program;
    std::vector<uint64_t> single;
    for (int parameter = 0; parameter < 12; ++parameter)
        single.push_back(program.make(kMakeModel));
    for (uint64_t parameter : single) {
        program.make(kHalf);
        program.free(parameter);
    }
    CHECK_FALSE(program.site(kHalf).growing);
}

TEST_CASE("a native program's steps: another call in the function that made the site") {
    Program program(false);
    for (int step = 0; step < 10; ++step) {
        program.free(program.make(kStep));
        program.make(kKeepHistory);
    }
    CHECK(program.site(kKeepHistory).growing);

    SECTION("while a loop that only makes what it keeps is one stretch, as a model's making is") {
        Program only_kept(false);
        for (int step = 0; step < 10; ++step)
            only_kept.make(kKeepHistory);
        CHECK_FALSE(only_kept.site(kKeepHistory).growing);
    }
    SECTION("and what another thread makes and frees between is no step of its work") {
        Program threads(false);
        for (int step = 0; step < 10; ++step) {
            threads.free(threads.make(kWorkerScratch, 2));
            threads.make(kKeepHistory);
        }
        CHECK_FALSE(threads.site(kKeepHistory).growing);
    }
}

TEST_CASE("where stacks cannot be lined up, or the ring lost the survivors, the events' spread decides") {
    SECTION("stacks cut at the depth limit: their outermost frames are lost") {
        Program program(false);
        program.header().stack_depth = 4;
        for (int step = 0; step < 10; ++step)
            program.make(kKeepHistory);
        CHECK(program.site(kKeepHistory).growing);
    }
    SECTION("a ring that holds the last two survivors only") {
        Program program(false, 2);
        for (int step = 0; step < 10; ++step)
            program.make(kKeepHistory);
        CHECK(program.site(kKeepHistory).growing);
    }
}

TEST_CASE("the newest survivors decide: a loop after set-up made at the same line") {
    Program program(false);
    // Twenty made one after another, then twenty over steps of work.
    for (int made = 0; made < 20; ++made)
        program.make(kKeepHistory);
    for (int step = 0; step < 20; ++step) {
        program.free(program.make(kStep));
        program.make(kKeepHistory);
    }
    CHECK(program.site(kKeepHistory).growing);
}

namespace {

// The record at exit of a program whose six 1 MiB allocations of kMakeModel `holder` held: its root, its
// class and how many models it holds, where it is not one.
std::string held_at_exit(const std::string& root, const std::string& owner, int models) {
    return R"({"moment":"exit","seconds":0.1,"objects_searched":100,"stopped":false,"problem":"",)"
           R"("saved_tensors_read":true,"sites":[{"stack_id":1,"kind":"device","bytes":6291456}],)"
           R"("holders":[{"root":")" +
           root +
           R"(","kind":"global","bytes":6291456,"tensors":6,"sites":[[0,6291456,"model.0.weight"]],)"
           R"("path":"model.0.weight","through":["parameter"],"own":"the parameters","owner":")" +
           owner + R"(","models":)" + std::to_string(models) + R"(,"advice":[]}],"unreached":[]})";
}

// The same record of a holder of the six allocations that are not a model's: a list of tensors, each
// its own (`through` []) or a slice of a base of its own (`through` ["view"]).
std::string tensors_held_at_exit(const std::string& through) {
    return R"({"moment":"exit","seconds":0.1,"objects_searched":100,"stopped":false,"problem":"",)"
           R"("saved_tensors_read":true,"sites":[{"stack_id":1,"kind":"device","bytes":6291456}],)"
           R"("holders":[{"root":"`kept`, a list with 6 items in __main__","kind":"global","bytes":6291456,)"
           R"("tensors":6,"sites":[[0,6291456,"kept[5]"]],"path":"kept[5]","through":)" +
           through + R"(,"own":"","owner":"","models":0,"advice":[]}],"unreached":[]})";
}

// Six allocations made one after another with nothing between (models built in a loop, a dataset moved
// to the device), held as gpuleak.why() found them at exit.
LeakSite made_one_after_another(const std::string& document) {
    Program program;
    for (int made = 0; made < 6; ++made)
        program.make(kMakeModel);
    program.record_at_exit(document);
    return program.site(kMakeModel);
}

// A model whose parameters were made between steps of the program's work (lazily, at its first
// calls), held as gpuleak.why() found them at exit.
LeakSite parameters_made_through_steps(const std::string& document) {
    Program program;
    for (int step = 0; step < 6; ++step) {
        program.free(program.make(kBatch));
        program.make(kMakeModel);
    }
    program.record_at_exit(document);
    return program.site(kMakeModel);
}

} // namespace

TEST_CASE("the parameters of one model, held by one name, are the working set however they were made") {
    CHECK_FALSE(parameters_made_through_steps(held_at_exit("`model`, a Net in __main__", "Net", 0)).growing);
    // One model reached through another object (a trainer holding it) is one model too.
    CHECK_FALSE(
        parameters_made_through_steps(held_at_exit("`trainer`, a Trainer in __main__", "Net", 1)).growing);
    SECTION("one model that holds a small part of what grew says nothing of the rest") {
        std::string document = held_at_exit("`model`, a Net in __main__", "Net", 0);
        document.replace(document.find("[[0,6291456,"), std::string("[[0,6291456,").size(), "[[0,1048576,");
        CHECK(parameters_made_through_steps(document).growing);
    }
    SECTION("many models kept in a list grow: a search that keeps every trial's model") {
        CHECK(parameters_made_through_steps(
                  held_at_exit("`results`, a list with 6 items in __main__", "Net", 6))
                  .growing);
    }
    SECTION("a record of an older package, which does not say whose they are, changes nothing") {
        std::string document = held_at_exit("`model`, a Net in __main__", "Net", 0);
        document.replace(document.find(R"("owner":"Net","models":0,)"),
                         std::string(R"("owner":"Net","models":0,)").size(), "");
        CHECK(parameters_made_through_steps(document).growing);
    }
}

TEST_CASE(
    "made one after another, what a holder accumulates grows: many models, slices of bases of their own") {
    CHECK(made_one_after_another(held_at_exit("`registry`, a list with 6 items in __main__", "Net", 6))
              .growing);
    CHECK(made_one_after_another(tensors_held_at_exit(R"(["view"])")).growing);
    // One model, or a list of tensors (a dataset moved to the device): the working set.
    CHECK_FALSE(made_one_after_another(held_at_exit("`model`, a Net in __main__", "Net", 0)).growing);
    CHECK_FALSE(made_one_after_another(tensors_held_at_exit("[]")).growing);
}
