#include "render/pickle_writer.h"

#include <limits>
#include <stdexcept>

namespace gpuleak::analyzer {

namespace {

// Opcodes, as CPython's Lib/pickle.py names them; the protocol that introduced each in parentheses.
constexpr uint8_t kProto = 0x80;           // (2)
constexpr uint8_t kStop = '.';             // (0)
constexpr uint8_t kNone = 'N';             // (0)
constexpr uint8_t kNewTrue = 0x88;         // (2)
constexpr uint8_t kNewFalse = 0x89;        // (2)
constexpr uint8_t kBinInt1 = 'K';          // (1) unsigned, 1 byte
constexpr uint8_t kBinInt2 = 'M';          // (1) unsigned, 2 bytes
constexpr uint8_t kBinInt = 'J';           // (1) signed, 4 bytes
constexpr uint8_t kLong1 = 0x8a;           // (2) two's complement, length in 1 byte
constexpr uint8_t kShortBinUnicode = 0x8c; // (4) UTF-8, length in 1 byte
constexpr uint8_t kBinUnicode = 'X';       // (1) UTF-8, length in 4 bytes
constexpr uint8_t kEmptyList = ']';        // (1)
constexpr uint8_t kEmptyDict = '}';        // (1)
constexpr uint8_t kMark = '(';             // (0)
constexpr uint8_t kAppends = 'e';          // (1)
constexpr uint8_t kSetItems = 'u';         // (1)
constexpr uint8_t kMemoize = 0x94;         // (4)
constexpr uint8_t kBinGet = 'h';           // (1) index in 1 byte
constexpr uint8_t kLongBinGet = 'j';       // (1) index in 4 bytes

constexpr std::string_view kReplacement = "\xEF\xBF\xBD"; // U+FFFD

// The length of the well-formed UTF-8 sequence at text[at], or 0 when none starts there: no overlong
// forms, no surrogates, nothing past U+10FFFF (RFC 3629's table).
size_t utf8_sequence(std::string_view text, size_t at) {
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[at + i]); };
    const uint8_t lead = byte(0);
    if (lead < 0x80)
        return 1;
    size_t length = 0;
    uint8_t low = 0x80; // bounds of the second byte, narrower after some leads
    uint8_t high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        low = lead == 0xE0 ? 0xA0 : 0x80;
        high = lead == 0xED ? 0x9F : 0xBF;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        low = lead == 0xF0 ? 0x90 : 0x80;
        high = lead == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (text.size() - at < length || byte(1) < low || byte(1) > high)
        return 0;
    for (size_t i = 2; i < length; ++i)
        if (byte(i) < 0x80 || byte(i) > 0xBF)
            return 0;
    return length;
}

std::string valid_utf8(std::string_view text) {
    std::string result;
    result.reserve(text.size());
    for (size_t at = 0; at < text.size();) {
        const size_t length = utf8_sequence(text, at);
        if (length == 0) {
            result += kReplacement;
            ++at;
        } else {
            result.append(text.substr(at, length));
            at += length;
        }
    }
    return result;
}

} // namespace

PickleWriter::PickleWriter() {
    opcode(kProto);
    opcode(4);
}

void PickleWriter::opcode(uint8_t code) {
    out_.push_back(static_cast<char>(code));
}

void PickleWriter::little_endian(uint64_t value, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i)
        out_.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void PickleWriter::count_value() {
    if (open_.empty())
        return;
    // A full batch is closed before the next value rather than after the last, so that memoize() always
    // directly follows the value it names.
    Open& container = open_.back();
    if (container.batched == (container.dict ? 2 * kBatch : kBatch)) {
        opcode(container.dict ? kSetItems : kAppends);
        opcode(kMark);
        container.batched = 0;
    }
    ++container.batched;
}

void PickleWriter::none() {
    count_value();
    opcode(kNone);
}

void PickleWriter::boolean(bool value) {
    count_value();
    opcode(value ? kNewTrue : kNewFalse);
}

void PickleWriter::integer(int64_t value) {
    count_value();
    if (value >= 0 && value <= 0xFF) {
        opcode(kBinInt1);
        little_endian(static_cast<uint64_t>(value), 1);
    } else if (value >= 0 && value <= 0xFFFF) {
        opcode(kBinInt2);
        little_endian(static_cast<uint64_t>(value), 2);
    } else if (value >= std::numeric_limits<int32_t>::min() && value <= std::numeric_limits<int32_t>::max()) {
        opcode(kBinInt);
        little_endian(static_cast<uint64_t>(value), 4);
    } else {
        // The fewest bytes whose two's complement holds the value, as CPython's encode_long writes it.
        size_t bytes = 5;
        while (bytes < 8) {
            const int64_t limit = int64_t{1} << (8 * bytes - 1);
            if (value >= -limit && value < limit)
                break;
            ++bytes;
        }
        opcode(kLong1);
        opcode(static_cast<uint8_t>(bytes));
        little_endian(static_cast<uint64_t>(value), bytes);
    }
}

void PickleWriter::text(std::string_view value) {
    count_value();
    const std::string utf8 = valid_utf8(value);
    if (utf8.size() <= 0xFF) {
        opcode(kShortBinUnicode);
        little_endian(utf8.size(), 1);
    } else {
        if (utf8.size() > std::numeric_limits<uint32_t>::max())
            throw std::length_error("a string too long for a pickle");
        opcode(kBinUnicode);
        little_endian(utf8.size(), 4);
    }
    out_ += utf8;
}

void PickleWriter::memo_text(std::string_view value) {
    auto found = memo_texts_.find(std::string(value));
    if (found != memo_texts_.end()) {
        again(found->second);
        return;
    }
    text(value);
    memo_texts_.emplace(value, memoize());
}

void PickleWriter::begin_list() {
    count_value();
    opcode(kEmptyList);
    opcode(kMark);
    open_.push_back({.dict = false, .batched = 0});
}

void PickleWriter::begin_dict() {
    count_value();
    opcode(kEmptyDict);
    opcode(kMark);
    open_.push_back({.dict = true, .batched = 0});
}

void PickleWriter::end_list() {
    open_.pop_back();
    opcode(kAppends);
}

void PickleWriter::end_dict() {
    open_.pop_back();
    opcode(kSetItems);
}

uint32_t PickleWriter::memoize() {
    opcode(kMemoize);
    return memo_count_++;
}

void PickleWriter::again(uint32_t index) {
    count_value();
    if (index <= 0xFF) {
        opcode(kBinGet);
        little_endian(index, 1);
    } else {
        opcode(kLongBinGet);
        little_endian(index, 4);
    }
}

std::string PickleWriter::finish() {
    opcode(kStop);
    return std::move(out_);
}

} // namespace gpuleak::analyzer
