#include "common/printable.h"

#include <cstdint>
#include <cstring>

namespace gpuleak {

namespace {

// The code point of the UTF-8 sequence at the start of `text` and its length; length 0 where it is not
// one (a stray continuation byte, a cut or overlong sequence, a surrogate, past U+10FFFF).
struct Decoded {
    uint32_t code_point = 0;
    size_t length = 0;
};

Decoded decode(std::string_view text) {
    const auto lead = static_cast<uint8_t>(text[0]);
    size_t length = 0;
    uint32_t code_point = 0;
    uint32_t least = 0;
    if (lead >= 0xc2 && lead <= 0xdf) {
        length = 2;
        code_point = lead & 0x1fu;
        least = 0x80;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        length = 3;
        code_point = lead & 0x0fu;
        least = 0x800;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        length = 4;
        code_point = lead & 0x07u;
        least = 0x10000;
    } else {
        return {};
    }
    if (text.size() < length)
        return {};
    for (size_t i = 1; i < length; ++i) {
        const auto next = static_cast<uint8_t>(text[i]);
        if ((next & 0xc0u) != 0x80)
            return {};
        code_point = code_point << 6 | (next & 0x3fu);
    }
    if (code_point < least || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff))
        return {};
    return {code_point, length};
}

// Code points past ASCII that change how a terminal shows what follows: C1 controls (8-bit CSI and OSC
// among them), the line and paragraph separators, and the bidirectional marks, embeddings, overrides and
// isolates.
bool hidden_control(uint32_t code_point) {
    return (code_point >= 0x80 && code_point <= 0x9f) || code_point == 0x061c || code_point == 0x200e ||
           code_point == 0x200f || (code_point >= 0x2028 && code_point <= 0x202e) ||
           (code_point >= 0x2066 && code_point <= 0x2069);
}

// "\x1b" for a byte, "\u202e" for a code point: a backslash, the letter, then `digits` hex digits.
size_t write_escape(char letter, uint32_t value, int digits, char (&escape)[8]) {
    constexpr char kHex[] = "0123456789abcdef";
    escape[0] = '\\';
    escape[1] = letter;
    for (int i = 0; i < digits; ++i)
        escape[2 + i] = kHex[value >> (4 * (digits - 1 - i)) & 0xf];
    return 2 + static_cast<size_t>(digits);
}

} // namespace

size_t printable_into(std::string_view text, std::span<char> out) {
    size_t written = 0;
    while (!text.empty()) {
        char escape[8];
        const char* piece = escape;
        size_t piece_size = 0;
        size_t consumed = 1;
        const auto byte = static_cast<uint8_t>(text[0]);
        const Decoded decoded = byte < 0x80 ? Decoded{byte, 1} : decode(text);
        if (byte == '\n' || byte == '\t' || byte == '\r') {
            escape[0] = '\\';
            escape[1] = byte == '\n' ? 'n' : byte == '\t' ? 't' : 'r';
            piece_size = 2;
        } else if (decoded.length == 0 || byte < 0x20 || byte == 0x7f) {
            // A control character, or a byte that is not UTF-8.
            piece_size = write_escape('x', byte, 2, escape);
        } else if (hidden_control(decoded.code_point)) {
            piece_size = write_escape('u', decoded.code_point, 4, escape);
            consumed = decoded.length;
        } else {
            piece = text.data();
            piece_size = decoded.length;
            consumed = decoded.length;
        }
        if (written + piece_size > out.size())
            break;
        std::memcpy(out.data() + written, piece, piece_size);
        written += piece_size;
        text.remove_prefix(consumed);
    }
    return written;
}

size_t utf8_prefix_bytes(std::string_view text, size_t most) {
    if (most >= text.size())
        return text.size();
    size_t cut = most;
    while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xc0u) == 0x80u)
        --cut;
    return cut;
}

} // namespace gpuleak
