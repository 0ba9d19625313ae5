// Writes a Python pickle of dicts, lists, strings, ints and bools, for readers that take only part of
// the format: pytorch.org/memory_viz's own unpickler (torch/utils/viz/MemoryViz.js) reads protocols 2 to
// 4, no bytes objects, and ints of at most 8 bytes, which it turns into JavaScript numbers. So only
// opcodes of protocols 2 to 4 that it knows are written, the stream is marked protocol 4, and ints are
// int64_t. Lists and dicts are filled in batches of at most 1000 items, as CPython's pickler does: the
// viewer pushes a batch onto an array as the arguments of one call, which has a limit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpuleak::analyzer {

class PickleWriter {
  public:
    PickleWriter();

    void none();
    void boolean(bool value);
    void integer(int64_t value);
    // Bytes that are not UTF-8 (a path or a name from the traced program) are written as U+FFFD: a
    // pickle's strings must be UTF-8, and Python refuses the whole file over one bad string.
    void text(std::string_view value);
    // The same string again is a reference to the first: keys and file names repeat in every entry.
    void memo_text(std::string_view value);

    // Containers, closed in the order opened. A dict takes key and value alternately.
    void begin_list();
    void end_list();
    void begin_dict();
    void end_dict();

    // Remembers the value just written (a container after its end) and returns its index, for again().
    uint32_t memoize();
    // Writes the value memoize() returned `index` for: the same object again, not a copy.
    void again(uint32_t index);

    // The pickle, ended; the writer must not be used after.
    std::string finish();

  private:
    static constexpr size_t kBatch = 1000;
    struct Open {
        bool dict = false;
        size_t batched = 0; // values written since the last batch mark: keys and values for a dict
    };
    void opcode(uint8_t code);
    void little_endian(uint64_t value, size_t bytes);
    void count_value(); // counts a value for the innermost container, after closing a full batch

    std::string out_;
    std::vector<Open> open_;
    std::unordered_map<std::string, uint32_t> memo_texts_;
    uint32_t memo_count_ = 0;
};

} // namespace gpuleak::analyzer
