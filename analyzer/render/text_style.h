// Bold, dim and the verdict's colour for text on a terminal (the text report, gpuleak watch); plain where
// colour is off (a file, a pipe, --no-color).
#pragma once

#include <fmt/format.h>
#include <string>

#include "model/diagnosis.h"

namespace gpuleak::analyzer {

class Style {
  public:
    explicit Style(bool color) : color_(color) {}
    [[nodiscard]] std::string bold(const std::string& text) const { return wrap("1", text); }
    [[nodiscard]] std::string dim(const std::string& text) const { return wrap("2", text); }
    [[nodiscard]] std::string verdict(DiagnosisKind kind, const std::string& text) const {
        switch (kind) {
        case DiagnosisKind::Leak:
            return wrap("1;31", text);
        case DiagnosisKind::Stable:
            return wrap("1;32", text);
        default:
            return wrap("1;33", text);
        }
    }

  private:
    [[nodiscard]] std::string wrap(const char* code, const std::string& text) const {
        return color_ ? fmt::format("\033[{}m{}\033[0m", code, text) : text;
    }
    bool color_;
};

} // namespace gpuleak::analyzer
