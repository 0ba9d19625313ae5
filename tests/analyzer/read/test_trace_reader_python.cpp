// The trace reader on what a Python program's trace adds: Python frames in stacks and the code region.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "read/trace_reader.h"
#include "trace_builder.h"

using gpuleak::analyzer::CodeObject;
using gpuleak::analyzer::PythonFrame;
using gpuleak::analyzer::TraceError;
using gpuleak::analyzer::TraceReader;
using gpuleak::test::TraceBuilder;
namespace format = gpuleak::format;

namespace {

constexpr uint32_t kTruncated = static_cast<uint32_t>(format::CodeFlag::Truncated);
constexpr uint32_t kBeforeFirst = format::kPythonOffsetBeforeFirstInstruction;
constexpr uint32_t kLoopEntry = format::kPythonFrameLoopEntry;

TraceReader parse(const std::vector<std::byte>& bytes) {
    return TraceReader::parse(bytes, "trace.bin");
}

bool has_warning(const TraceReader& trace, const std::string& part) {
    for (const std::string& warning : trace.warnings())
        if (warning.find(part) != std::string::npos)
            return true;
    return false;
}

const std::vector<uint8_t> kLineTable = {6, 1, 0, 2, 4, 0x80, 8, 0xff};

TraceBuilder python_trace() {
    TraceBuilder builder;
    builder.header().python_version = format::python_version(3, 10);
    builder.header().code_dropped = 2;
    builder.add_code(1, "/srv/train.py", "Trainer.step", 80, kLineTable);
    // Lengths that are not multiples of 8, one empty: the parts follow each other with no padding.
    builder.add_code(2, "/srv/モデル.py", "<module>", 1, {}, kTruncated);
    builder.add_code(3, "x.py", "", 0, {1, 2, 3});
    builder.add_stack(1, {0x401234, 0x7f0000001111}, {{1, 8}, {2, kBeforeFirst | kLoopEntry}});
    builder.add_stack(2, {}, {{1, 0 | kLoopEntry}});
    builder.add_stack(3, {0x401000});
    builder.add_stack(4, {0x401000}, {{0, 4}, {99, 6}});
    return builder;
}

// Bad input must end in a one-line TraceError or a trace; anything else fails the test.
void parse_without_crash(const std::vector<std::byte>& bytes) {
    try {
        const TraceReader trace = parse(bytes);
        for (const std::string& warning : trace.warnings())
            REQUIRE(warning.find('\n') == std::string::npos);
        for (const auto& [id, frames] : trace.python_stacks()) {
            REQUIRE(trace.stacks().contains(id));
            REQUIRE(frames.size() <= format::kMaxStackDepth);
        }
    } catch (const TraceError& error) {
        REQUIRE(std::string(error.what()).find('\n') == std::string::npos);
    }
}

} // namespace

TEST_CASE("Python frames and code objects read back exactly") {
    TraceBuilder builder = python_trace();
    const TraceReader trace = parse(builder.bytes());
    CHECK(trace.warnings().empty());
    CHECK(trace.header().python_version == format::python_version(3, 10));
    CHECK(trace.header().counters.code_dropped == 2);
    CHECK(trace.header().counters.code_used == builder.header().code_used);

    CHECK(trace.stacks() == std::map<uint32_t, std::vector<uint64_t>>{
                                {1, {0x401234, 0x7f0000001111}}, {2, {}}, {3, {0x401000}}, {4, {0x401000}}});
    CHECK(trace.python_stacks() ==
          std::map<uint32_t, std::vector<PythonFrame>>{
              {1, {{1, 8, false}, {2, kBeforeFirst, true}}}, {2, {{1, 0, true}}}, {4, {{0, 4}, {99, 6}}}});
    const std::map<uint32_t, CodeObject> expected = {
        {1, {"/srv/train.py", "Trainer.step", 80, 0x7f0000000100, kLineTable, false}},
        {2, {"/srv/モデル.py", "<module>", 1, 0x7f0000000200, {}, true}},
        {3, {"x.py", "", 0, 0x7f0000000300, {1, 2, 3}, false}},
    };
    CHECK(trace.code_objects() == expected);
}

TEST_CASE("a trace without Python has no Python frames and no code objects") {
    TraceBuilder builder;
    builder.add_stack(1, {1, 2});
    const TraceReader trace = parse(builder.bytes());
    CHECK(trace.header().python_version == 0);
    CHECK(trace.python_stacks().empty());
    CHECK(trace.code_objects().empty());
    CHECK(trace.warnings().empty());
}

TEST_CASE("malformed code records stop the walk of the code stream like the other streams") {
    TraceBuilder builder;
    builder.add_code(1, "a.py", "f", 1, {2, 1}); // 40 + 7 bytes, padded to 48
    const uint64_t second = builder.add_code(2, "b.py", "g", 1, {2, 1});
    builder.add_code(3, "c.py", "h", 1, {2, 1});
    std::string problem;
    SECTION("lengths that need more than the record's size") {
        builder.put<uint32_t>(second + offsetof(format::CodeRecord, qualname_bytes), 9);
        problem = "malformed record at offset 48 (size does not match its lengths)";
    }
    SECTION("lengths that need less") {
        builder.put<uint32_t>(second + offsetof(format::CodeRecord, filename_bytes), 0);
        builder.put<uint32_t>(second + offsetof(format::CodeRecord, qualname_bytes), 0);
        builder.put<uint32_t>(second + offsetof(format::CodeRecord, line_table_bytes), 0);
        problem = "malformed record at offset 48 (size does not match its lengths)";
    }
    SECTION("lengths whose sum overflows 32 bits") {
        builder.put<uint32_t>(second + offsetof(format::CodeRecord, filename_bytes), 0xfffffff0u);
        builder.put<uint32_t>(second + offsetof(format::CodeRecord, qualname_bytes), 0xfffffff0u);
        problem = "malformed record at offset 48 (size does not match its lengths)";
    }
    SECTION("id 0") {
        builder.put<uint32_t>(second + offsetof(format::CodeRecord, id), 0);
        problem = "malformed record at offset 48 (id 0)";
    }
    SECTION("a duplicate id") {
        builder.put<uint32_t>(second + offsetof(format::CodeRecord, id), 1);
        problem = "malformed record at offset 48 (duplicate id)";
    }
    SECTION("flags this reader does not know") {
        builder.put<uint32_t>(second + offsetof(format::CodeRecord, flags), 1u << 5);
        problem = "malformed record at offset 48 (unknown flags)";
    }
    SECTION("a size not a multiple of 8") {
        builder.put(second, format::RecordPrefix{format::kRecordCommit, 44});
        problem = "malformed record at offset 48 (size not a multiple of 8)";
    }
    SECTION("a size past the end of the region") {
        builder.put(second, format::RecordPrefix{format::kRecordCommit, 1u << 20});
        problem = "malformed record at offset 48 (runs past the end of its region)";
    }
    const TraceReader trace = parse(builder.bytes());
    CHECK(trace.code_objects().size() == 1);
    CHECK(trace.code_objects().at(1).filename == "a.py");
    CHECK(has_warning(trace, "stream 'code': " + problem + "; the rest is ignored"));
    CHECK(has_warning(trace,
                      "stream 'code': header says 144 bytes written, the first 48 are valid (torn tail)"));
}

TEST_CASE("a code record in flight ends the code stream with a torn-tail warning") {
    TraceBuilder builder;
    builder.add_code(1, "a.py", "f", 1, {2, 1});
    builder.put<uint32_t>(builder.add_code(2, "b.py", "g", 1, {2, 1}), 0);
    const TraceReader trace = parse(builder.bytes());
    CHECK(trace.code_objects().size() == 1);
    CHECK(has_warning(trace,
                      "stream 'code': header says 96 bytes written, the first 48 are valid (torn tail)"));
}

TEST_CASE("a code region cut off with the file keeps the records before the cut") {
    TraceBuilder builder = python_trace();
    std::vector<std::byte> bytes = builder.bytes();
    bytes.resize(builder.header().code.offset + 100); // the first record is 80 bytes
    const TraceReader trace = parse(bytes);
    CHECK(trace.code_objects().size() == 1);
    CHECK(has_warning(trace, "truncated: region 'code' has 100 of its 4096 bytes"));
    CHECK(trace.python_stacks().size() == 3);
}

TEST_CASE("stacks with Python frames must have the size their counts give") {
    TraceBuilder builder;
    builder.add_stack(1, {1}, {{1, 2}});
    const uint64_t second = builder.add_stack(2, {3}, {{1, 4}, {1, 6}});
    builder.add_stack(3, {5});
    std::string problem;
    SECTION("a Python count too large for the record") {
        builder.put<uint16_t>(second + offsetof(format::StackRecord, python_count), 3);
        problem = "size does not match its frame count";
    }
    SECTION("a Python count too small for the record") {
        builder.put<uint16_t>(second + offsetof(format::StackRecord, python_count), 1);
        problem = "size does not match its frame count";
    }
    SECTION("more Python frames than any stack may have") {
        builder.put<uint16_t>(second + offsetof(format::StackRecord, python_count),
                              format::kMaxStackDepth + 1);
        problem = "more frames than any stack may have";
    }
    SECTION("a duplicate id with other Python frames") {
        builder.put<uint32_t>(second + offsetof(format::StackRecord, id), 1);
        problem = "duplicate id";
    }
    const TraceReader trace = parse(builder.bytes());
    CHECK(trace.stacks().size() == 1);
    CHECK(trace.python_stacks() == std::map<uint32_t, std::vector<PythonFrame>>{{1, {{1, 2}}}});
    CHECK(has_warning(trace, "stream 'stacks': malformed record at offset 32 (" + problem + ")"));
}

TEST_CASE("the deepest stack there may be, native and Python, is read") {
    TraceBuilder builder(gpuleak::test::TraceLayout{.stacks_bytes = 20000});
    const std::vector<uint64_t> native(format::kMaxStackDepth, 0x401000);
    const std::vector<format::PythonFrameRecord> python(format::kMaxStackDepth, {1, 2});
    builder.add_stack(1, native, python);
    const TraceReader trace = parse(builder.bytes());
    CHECK(trace.warnings().empty());
    CHECK(trace.stacks().at(1).size() == format::kMaxStackDepth);
    CHECK(trace.python_stacks().at(1).size() == format::kMaxStackDepth);
}

TEST_CASE("a Python version wider than major and minor is corrupt: no version, with a warning") {
    TraceBuilder builder = python_trace();
    builder.header().python_version = 0x1030c;
    const TraceReader trace = parse(builder.bytes());
    CHECK(trace.header().python_version == 0);
    CHECK(has_warning(trace, "Python version 0x1030c is not a version"));
    CHECK(trace.code_objects().size() == 3);
}

TEST_CASE("header validation covers the code region") {
    TraceBuilder builder;
    format::FileHeader& header = builder.header();
    std::string message;
    SECTION("misaligned") {
        header.code.offset += 8;
        message = "region 'code' is not 64-byte aligned";
    }
    SECTION("outside the file") {
        header.code.size = header.file_bytes;
        message = "region 'code' lies outside the file";
    }
    SECTION("overlapping another region") {
        header.code.offset = header.timeline.offset;
        message = "regions 'timeline' and 'code' overlap";
    }
    CHECK_THROWS_WITH(parse(builder.bytes()), Catch::StartsWith("trace.bin: " + message));
}

TEST_CASE("corrupt Python frames and code records never crash the reader") {
    TraceBuilder builder = python_trace();
    const std::vector<std::byte> whole = builder.bytes();
    const auto& header = builder.header();
    // Every byte of the written stacks and code records, each set to values that break lengths and ids.
    for (const auto& [offset, used] : {std::pair{header.stacks.offset, header.stacks_used},
                                       std::pair{header.code.offset, header.code_used}}) {
        for (uint64_t at = offset; at < offset + used; ++at) {
            for (const std::byte value : {std::byte{0xff}, std::byte{0x00}, std::byte{0x41}}) {
                std::vector<std::byte> bytes = whole;
                bytes[at] = value;
                parse_without_crash(bytes);
            }
        }
    }
    std::mt19937_64 random(4);
    std::uniform_int_distribution<uint64_t> code_byte(header.code.offset,
                                                      header.code.offset + header.code_used - 1);
    for (int round = 0; round < 2000; ++round) {
        std::vector<std::byte> bytes = whole;
        for (int i = 0; i < 4; ++i)
            bytes[code_byte(random)] = static_cast<std::byte>(random());
        parse_without_crash(bytes);
    }
}
