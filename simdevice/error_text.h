// A table of error names and descriptions, as cudaGetErrorName/cuGetErrorName answer them. The
// driver and the runtime each have their own names for the same numbers.
#pragma once

#include <span>

namespace gpuleak::sim {

struct ErrorText {
    int code;
    const char* name;
    const char* description;
};

inline const ErrorText* find_error(std::span<const ErrorText> table, int code) {
    for (const ErrorText& error : table) {
        if (error.code == code) {
            return &error;
        }
    }
    return nullptr;
}

} // namespace gpuleak::sim
