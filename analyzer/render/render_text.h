// The report as text for a terminal: a screenful per process, the diagnosis first.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "render/report_sink.h"
#include "report/job_facts.h"
#include "report/merged_report.h"
#include "report/report.h"
#include "report/report_set.h"
#include "report/site_changes.h"

namespace gpuleak::analyzer {

// Written to `write` a process's section at a time.
void render_text(ReportSet& reports, const ReportOptions& options, const ReportSink& write);
// The same, whole.
std::string render_text(ReportSet& reports, const ReportOptions& options);

// A stack as the text report shows it, a line each, without indentation: the frames, the lines that
// stand for frames left out, and where a thread was started, the stack that started it.
std::vector<std::string> stack_text(StackFrames& stacks, uint32_t stack_id, const ReportOptions& options);

// What the text report says of a job after its table of ranks, a sentence each, unwrapped: which ranks
// stand apart, intrude on another's device, ran out of memory or were killed, share a leak. Many ranks
// alike are told in one sentence. The HTML page says the same.
// `ended` says how a rank's process ended.
std::vector<std::string> job_findings(const JobFacts& job, const EndedText& ended);

// The reports of a job's machines merged (gpuleak-report --merge): the ranks, what they say together, the
// devices that processes shared, and where each machine's report is.
std::string render_merged_text(const MergedReport& merged, const ReportOptions& options);

// What grew and what shrank between two states (--diff, --between), the largest change first.
std::string render_changes_text(Comparison& comparison, const ReportOptions& options);

} // namespace gpuleak::analyzer
