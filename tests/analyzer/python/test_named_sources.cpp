// Named sources (format 5, gpuleak_name_source): the SourceName record read back, torn ones ignored, the
// latest naming of a file kept, and how the report shows a frame of a named source.
#include <catch2/catch.hpp>

#include "python/named_sources.h"
#include "read/trace_reader.h"
#include "report/stack_view.h"
#include "trace_builder.h"

using gpuleak::analyzer::NamedSources;
using gpuleak::analyzer::ReportFrame;
using gpuleak::analyzer::TraceReader;
using gpuleak::test::TraceBuilder;
using gpuleak::test::TraceLayout;
namespace format = gpuleak::format;

namespace {

format::EventRecord source_name(uint64_t file, uint64_t name, uint64_t text, uint64_t time_ns) {
    format::EventRecord record{};
    record.type = static_cast<uint16_t>(format::EventType::SourceName);
    record.address = file;
    record.size = name;
    record.stream = text;
    record.time_ns = time_ns;
    record.device = -2;
    return record;
}

TraceBuilder named_cells() {
    TraceBuilder builder(TraceLayout{.notable_capacity = 8});
    builder.add_string(1, "/tmp/ipykernel_7/11.py");
    builder.add_string(2, "cell [3]");
    builder.add_string(3, "import ctypes\n  held.append(allocate(1 << 20))  \n");
    builder.add_string(4, "cell [5]");
    builder.add_string(5, "/tmp/ipykernel_7/12.py");
    builder.add_string(6, "cell [4]");
    builder.add_notable(source_name(1, 2, 3, 10));
    builder.add_notable(source_name(5, 6, 0, 20));
    return builder;
}

} // namespace

TEST_CASE("a SourceName record round-trips through the reader") {
    const TraceReader trace = TraceReader::parse(named_cells().bytes(), "trace.bin");
    const auto& events = trace.notable_events().events;
    REQUIRE(events.size() == 2);
    CHECK(events[0].type == format::EventType::SourceName);
    CHECK(events[0].address == 1);
    CHECK(events[0].size == 2);
    CHECK(events[0].stream == 3);
    CHECK(events[0].time_ns == 10);
    CHECK(trace.warnings().empty());
}

TEST_CASE("a named source's lines are found by file and line") {
    const TraceReader trace = TraceReader::parse(named_cells().bytes(), "trace.bin");
    const NamedSources named(trace);
    const auto line = named.find("/tmp/ipykernel_7/11.py", 2);
    REQUIRE(line);
    CHECK(line->name == "cell [3]");
    CHECK(line->text == "held.append(allocate(1 << 20))");
    CHECK(named.find("/tmp/ipykernel_7/11.py", 3)->text.empty());
    CHECK(named.find("/tmp/ipykernel_7/11.py", 0)->text.empty());
    // Named without its text: the name still stands for the file.
    CHECK(named.find("/tmp/ipykernel_7/12.py", 1)->name == "cell [4]");
    CHECK_FALSE(named.find("/tmp/other.py", 1));
}

TEST_CASE("a torn SourceName record, or one whose strings are missing, names nothing") {
    TraceBuilder builder = named_cells();
    // The first record in flight when the process died: its commit word is not there.
    builder.put<uint64_t>(builder.header().notable.offset, 0);
    builder.add_notable(source_name(5, 99, 0, 30));
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    CHECK(trace.notable_events().torn == 1);
    const NamedSources named(trace);
    CHECK_FALSE(named.find("/tmp/ipykernel_7/11.py", 2));
    CHECK(named.find("/tmp/ipykernel_7/12.py", 1)->name == "cell [4]");
}

TEST_CASE("a later naming of the same file replaces the earlier one") {
    TraceBuilder builder = named_cells();
    builder.add_notable(source_name(1, 4, 0, 30));
    const NamedSources named(TraceReader::parse(builder.bytes(), "trace.bin"));
    CHECK(named.find("/tmp/ipykernel_7/11.py", 2)->name == "cell [5]");
    CHECK(named.find("/tmp/ipykernel_7/11.py", 2)->text.empty());
}

TEST_CASE("a frame of a named source reads as the cell and its line") {
    ReportFrame frame;
    frame.function = "<module>";
    frame.file = "/tmp/ipykernel_7/11.py";
    frame.line = 2;
    frame.python = true;
    CHECK(gpuleak::analyzer::python_frame_name(frame) == "/tmp/ipykernel_7/11.py:2 in <module>");
    frame.source_name = "cell [3]";
    frame.source_line = "held.append(allocate(1 << 20))";
    CHECK(gpuleak::analyzer::python_frame_name(frame) ==
          "cell [3], line 2 in <module> (`held.append(allocate(1 << 20))`)");
    frame.source_line.clear();
    CHECK(gpuleak::analyzer::python_frame_name(frame) == "cell [3], line 2 in <module>");
    frame.line = 0;
    CHECK(gpuleak::analyzer::python_frame_name(frame) == "cell [3] in <module>");
}
