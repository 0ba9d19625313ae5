// The pickle writer behind --format torch-snapshot, byte for byte: each expected stream was checked to
// load with Python's pickle.loads to the value named beside it.
#include <catch2/catch.hpp>
#include <string>

#include "render/pickle_writer.h"

using gpuleak::analyzer::PickleWriter;
using namespace std::string_literals;

namespace {

// Protocol 4, then the value, then STOP.
std::string framed(const std::string& body) {
    return "\x80\x04"s + body + ".";
}

} // namespace

TEST_CASE("ints take the smallest opcode that holds them") {
    PickleWriter writer;
    writer.begin_list();
    for (int64_t value : {int64_t{0}, int64_t{255}, int64_t{256}, int64_t{65536}, int64_t{-1},
                          int64_t{1} << 31, -(int64_t{1} << 31) - 1, INT64_MAX})
        writer.integer(value);
    writer.end_list();
    // [0, 255, 256, 65536, -1, 2**31, -2**31 - 1, 2**63 - 1]
    CHECK(writer.finish() == framed("](K\x00K\xffM\x00\x01J\x00\x00\x01\x00J\xff\xff\xff\xff"
                                    "\x8a\x05\x00\x00\x00\x80\x00\x8a\x05\xff\xff\xff\x7f\xff"
                                    "\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f"
                                    "e"s));
}

TEST_CASE("a dict of strings, None and bools, repeated strings memoized") {
    PickleWriter writer;
    writer.begin_dict();
    writer.memo_text("state");
    writer.memo_text("inactive");
    writer.text("n");
    writer.none();
    writer.memo_text("t");
    writer.boolean(true);
    writer.memo_text("state2");
    writer.memo_text("state");
    writer.end_dict();
    // {'state': 'inactive', 'n': None, 't': True, 'state2': 'state'}
    CHECK(writer.finish() == framed("}(\x8c\x05state\x94\x8c\x08inactive\x94\x8c\x01nN\x8c\x01t\x94\x88"
                                    "\x8c\x06state2\x94h\x00u"s));
}

TEST_CASE("a memoized list is the same object again") {
    PickleWriter writer;
    writer.begin_list();
    writer.begin_list();
    writer.integer(7);
    writer.end_list();
    const uint32_t index = writer.memoize();
    writer.again(index);
    writer.end_list();
    // x = [7]; [x, x]
    CHECK(writer.finish() == framed("](](K\x07\x65\x94h\x00\x65"s));
}

TEST_CASE("long strings take a 4-byte length, and bytes that are not UTF-8 become U+FFFD") {
    PickleWriter writer;
    writer.begin_list();
    writer.text(std::string(300, 'a'));
    writer.text("a\xff\xc3\xa9\xed\xa0\x80\xf0\x9f\x98\x80"); // bad, é, a surrogate, 😀
    writer.end_list();
    const std::string bytes = writer.finish();
    CHECK(bytes.substr(0, 9) == "\x80\x04](X\x2c\x01\x00\x00"s);
    CHECK(bytes.substr(309) == "\x8c\x13"
                               "a\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xf0\x9f\x98\x80"
                               "e."s);
}

TEST_CASE("lists are filled in batches of 1000 values, dicts of 1000 items") {
    PickleWriter list;
    list.begin_list();
    for (int i = 0; i < 2001; ++i)
        list.none();
    list.end_list();
    CHECK(list.finish() ==
          framed("](" + std::string(1000, 'N') + "e(" + std::string(1000, 'N') + "e(" + "Ne"));
    PickleWriter dict;
    dict.begin_dict();
    for (int i = 0; i < 1001; ++i) {
        dict.none(); // {None: None}, its one key set 1001 times
        dict.none();
    }
    dict.end_dict();
    CHECK(dict.finish() == framed("}(" + std::string(2000, 'N') + "u(" + "NNu"));
}

TEST_CASE("empty containers") {
    PickleWriter writer;
    writer.begin_list();
    writer.begin_dict();
    writer.end_dict();
    writer.end_list();
    CHECK(writer.finish() == framed("](}(ue"));
    CHECK(PickleWriter().finish() == "\x80\x04."s); // nothing written: not a value, but a valid stream
}
