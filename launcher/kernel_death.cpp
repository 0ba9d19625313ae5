#include "launcher/kernel_death.h"

#include <algorithm>
#include <fmt/format.h>
#include <sys/wait.h>

#include "render/diagnosis_text.h"

namespace gpuleak::launcher {

namespace {

constexpr std::string_view kCellPrefix = "cell [";
constexpr std::string_view kEndPrefix = "end of cell [";

} // namespace

std::string cell_position(const std::vector<analyzer::Marker>& markers) {
    // The markers of other code may come between: the latest cell marker tells.
    const auto last = std::find_if(markers.rbegin(), markers.rend(), [](const analyzer::Marker& marker) {
        return marker.label.starts_with(kCellPrefix) || marker.label.starts_with(kEndPrefix);
    });
    if (last == markers.rend())
        return "before any cell ran";
    if (last->label.starts_with(kCellPrefix))
        return fmt::format("while running {}", last->label);
    return fmt::format("after {}, between cells", last->label.substr(std::string_view("end of ").size()));
}

bool kernel_died(int wait_status) {
    return WIFSIGNALED(wait_status) || (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) != 0);
}

std::vector<std::string> death_summary(const CommandEnd& end, RunReport* report,
                                       const std::string& no_report) {
    const analyzer::ProcessReport* kernel =
        report != nullptr ? command_process(end, report->processes.all()) : nullptr;
    CommandEnd told = end;
    if (kernel != nullptr)
        told.sender = analyzer::sender_text(kernel->model);
    std::vector<std::string> lines = ending_lines(told);
    if (kernel != nullptr)
        lines.push_back(fmt::format("the kernel died {}", cell_position(kernel->model.markers)));
    if (report == nullptr) {
        lines.push_back(no_report);
        return lines;
    }
    for (std::string& line : report_lines(end, *report))
        lines.push_back(std::move(line));
    return lines;
}

} // namespace gpuleak::launcher
