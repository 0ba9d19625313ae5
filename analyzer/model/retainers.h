// The records of what held the program's device memory (EventType::Retainers: gpuleak.why()'s answers,
// written by the process itself at an out-of-memory error, at a phase's end, at exit or on demand), read into
// the model and tied to its failures and sites.
#pragma once

#include "model/process_model.h"
#include "model/site_keys.h"
#include "read/trace_reader.h"

namespace gpuleak::analyzer {

// Fills model.retainers from the trace's records, oldest first, and ties them to what the model has
// already found: an out-of-memory record to its failure (FailureSummary::retainers), each leak site to
// its holders in the latest record that names it (LeakSite::held_by), and the sites the record at exit
// found kept for a backward pass (ProcessModel::kept_for_backward). A site spread over the program's work
// whose repetitions were not seen grows where the record found most of it held by a holder that
// accumulates (many models; slices that keep a base each); a growing site that the record found held
// only as the working set of one model or optimizer (its parameters, buffers, gradients or state, held
// by one name) is not growing. A record that cannot be read (its
// strings lost, a document that is not gpuleak.why()'s) is left out with a warning.
void add_retainers(const TraceReader& trace, const SiteKeys& site_keys, ProcessModel& model);

} // namespace gpuleak::analyzer
