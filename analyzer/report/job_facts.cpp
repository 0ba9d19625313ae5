#include "report/job_facts.h"

#include <algorithm>
#include <map>

#include "report/report.h"

namespace gpuleak::analyzer {

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
// A rank stands apart when its peak is at least this many times the median of the other ranks' peaks
// and this much above it: rank 0 that keeps the whole dataset on its device, not the few MiB one step's
// batch adds.
constexpr double kApartRatio = 1.5;
constexpr uint64_t kMinApartBytes = 8 * kMiB;

RankRow row_of(ProcessReport& report, size_t process) {
    const ProcessModel& model = report.model;
    RankRow row;
    row.process = process;
    row.pid = model.header.pid;
    row.rank = model.role.rank;
    row.local_rank = model.role.local_rank;
    row.node_rank = model.role.node_rank;
    row.host = model.header.hostname;
    row.devices = devices_used(model);
    for (const DeviceSummary& device : model.devices) {
        row.peak_reserved += device.peak_reserved;
        row.final_reserved += device.final_reserved;
        row.peak_allocated += device.peak_allocated;
        row.final_allocated += device.final_allocated;
    }
    row.verdict = report.diagnosis.kind;
    if (report.diagnosis.leak && report.diagnosis.leak->cause == LeakCause::Growth)
        row.leaked = report.diagnosis.leak->bytes;
    if (const LeakSite* top = top_site(report)) {
        row.top_site = report.stacks->describe(top->stack_id);
        row.top_site_bytes = top->bytes;
    }
    return row;
}

uint64_t median_of(std::vector<uint64_t> values) {
    std::sort(values.begin(), values.end());
    const size_t middle = values.size() / 2;
    return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

// The device where a process reserved the most; -1 where it reserved nothing.
int main_device(const ProcessModel& model) {
    int device = -1;
    uint64_t most = 0;
    for (const DeviceSummary& summary : model.devices)
        if (summary.peak_reserved > most) {
            most = summary.peak_reserved;
            device = summary.device;
        }
    return device;
}

// The ranks whose `measure` stands apart from their peers': against its peers only, as of two ranks the
// median of both would sit halfway to the one apart.
void find_apart(JobFacts& job, ApartBy by, uint64_t RankRow::*measure) {
    if (job.ranks.size() < 2)
        return;
    for (size_t i = 0; i < job.ranks.size(); ++i) {
        std::vector<uint64_t> peers;
        peers.reserve(job.ranks.size() - 1);
        for (size_t j = 0; j < job.ranks.size(); ++j)
            if (j != i)
                peers.push_back(job.ranks[j].*measure);
        const uint64_t median = median_of(std::move(peers));
        const uint64_t value = job.ranks[i].*measure;
        if (by == ApartBy::Growth && median == 0)
            continue;
        if (static_cast<double>(value) >= kApartRatio * static_cast<double>(median) &&
            value >= median + kMinApartBytes)
            job.apart.push_back({i, by, median});
    }
}

void find_failures(JobFacts& job, std::vector<ProcessReport>& reports) {
    for (size_t i = 0; i < job.ranks.size(); ++i) {
        ProcessReport& report = reports[job.ranks[i].process];
        const ProcessModel& model = report.model;
        FailedRank failed;
        failed.index = i;
        const auto ran_out =
            std::find_if(model.failures.begin(), model.failures.end(),
                         [](const FailureSummary& failure) { return failure.out_of_memory(); });
        if (ran_out != model.failures.end()) {
            failed.out_of_memory = true;
            failed.asked_bytes = ran_out->bytes;
            failed.device = ran_out->device;
            failed.reserved_then = ran_out->reserved_then;
            failed.failure_site = report.stacks->describe(ran_out->stack_id);
        }
        failed.ended_realtime_ns = model.header.start_realtime_ns + model.duration_ns;
        failed.killed =
            model.header.end.state == format::EndState::Signaled || killed_unseen(model.header.end);
        if (failed.out_of_memory || failed.killed)
            job.failed.push_back(std::move(failed));
    }
}

// Where `report`'s process first touched `device`: its context's stack, else the oldest site it still held
// there.
std::string first_touch(ProcessReport& report, int device) {
    if (const DeviceContext* context = context_on(report.model, device); context && context->stack_id != 0)
        return report.stacks->describe(context->stack_id);
    const LeakSite* oldest = oldest_site_on(report.model, device);
    return oldest != nullptr ? report.stacks->describe(oldest->stack_id) : std::string();
}

} // namespace

const LeakSite* top_site(const ProcessReport& report) {
    const std::vector<LeakSite>& sites = report.model.leak_sites;
    if (report.diagnosis.leak && !report.diagnosis.leak->sites.empty())
        return &sites[report.diagnosis.leak->sites.front()];
    return sites.empty() ? nullptr : &sites.front();
}

const LeakSite* oldest_site_on(const ProcessModel& model, int device) {
    const LeakSite* oldest = nullptr;
    for (const LeakSite& site : model.leak_sites)
        if (site.device == device && (oldest == nullptr || site.first_ns < oldest->first_ns))
            oldest = &site;
    return oldest;
}

void find_intruders(JobFacts& job, const std::vector<const ProcessModel*>& models,
                    const PhysicalDevices& devices, const FirstTouch& first_touch) {
    std::vector<int> mains;
    mains.reserve(job.ranks.size());
    for (const RankRow& row : job.ranks)
        mains.push_back(main_device(*models[row.process]));
    for (size_t i = 0; i < job.ranks.size(); ++i) {
        const ProcessModel& model = *models[job.ranks[i].process];
        for (const int device : job.ranks[i].devices) {
            if (device == mains[i])
                continue;
            for (size_t j = 0; j < job.ranks.size(); ++j) {
                const ProcessModel& owner = *models[job.ranks[j].process];
                if (j == i || mains[j] < 0 || devices.key(model, device) != devices.key(owner, mains[j]))
                    continue;
                const DeviceSummary* summary = device_summary(model, device);
                job.intruding.push_back({i, device, job.ranks[j].rank, context_on(model, device) != nullptr,
                                         summary != nullptr ? summary->peak_reserved : 0,
                                         first_touch(job.ranks[i].process, device)});
                break;
            }
        }
    }
}

void judge_ranks(JobFacts& job) {
    job.apart.clear();
    job.shared_leaks.clear();
    find_apart(job, ApartBy::Peak, &RankRow::peak_reserved);
    find_apart(job, ApartBy::Growth, &RankRow::leaked);
    std::map<std::string, SharedLeak> by_site;
    for (const RankRow& row : job.ranks) {
        if (row.verdict != DiagnosisKind::Leak || row.top_site.empty())
            continue;
        SharedLeak& shared = by_site[row.top_site];
        shared.site = row.top_site;
        shared.ranks.push_back(row.rank);
        shared.bytes += row.top_site_bytes;
    }
    for (auto& [site, shared] : by_site)
        if (shared.ranks.size() >= 2)
            job.shared_leaks.push_back(std::move(shared));
    std::stable_sort(
        job.shared_leaks.begin(), job.shared_leaks.end(),
        [](const SharedLeak& a, const SharedLeak& b) { return a.ranks.size() > b.ranks.size(); });
}

std::shared_ptr<const JobFacts> job_facts(std::vector<ProcessReport>& reports,
                                          const PhysicalDevices& devices) {
    auto job = std::make_shared<JobFacts>();
    for (size_t i = 0; i < reports.size(); ++i)
        if (reports[i].model.role.kind == RoleKind::Rank)
            job->ranks.push_back(row_of(reports[i], i));
    if (job->ranks.empty())
        return nullptr;
    std::sort(job->ranks.begin(), job->ranks.end(),
              [](const RankRow& a, const RankRow& b) { return a.rank < b.rank; });
    for (const RankRow& row : job->ranks) {
        const TraceHeader& header = reports[row.process].model.header;
        if (job->id.empty())
            job->id = header.job;
        job->world_size = std::max(job->world_size, reports[row.process].model.role.world_size);
    }
    std::vector<const ProcessModel*> models;
    models.reserve(reports.size());
    for (const ProcessReport& report : reports)
        models.push_back(&report.model);
    find_intruders(*job, models, devices,
                   [&](size_t process, int device) { return first_touch(reports[process], device); });
    find_failures(*job, reports);
    judge_ranks(*job);
    return job;
}

} // namespace gpuleak::analyzer
