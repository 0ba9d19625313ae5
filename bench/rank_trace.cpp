// The direct-reading benchmark's copier (bench/job_merge.py with FROM=trace runs it): makes one rank's
// trace of a synthetic job from a real one, as if another process of another machine had written it.
//
//   bench_rank_trace SOURCE DEST --pid P --rank R --local-rank L --node-rank N --world W --host H --job J
//
// DEST holds SOURCE's bytes with the header's pid, rank, machine and job replaced. It is written sparse
// (blocks of zeros are left as holes), as the recorder's own file is on disk: a 256 MiB trace of a short
// script takes a few MiB, and a thousand copies fit on this machine.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

#include "gpuleak/trace_format.h"

#include "bench_arguments.h"

namespace {

namespace format = gpuleak::format;

struct Identity {
    uint64_t pid = 0;
    uint64_t rank = 0;
    uint64_t local_rank = 0;
    uint64_t node_rank = 0;
    uint64_t world = 0;
    std::string host;
    std::string job;
};

bool parse_identity(int argc, char** argv, Identity& identity) {
    const std::map<std::string, uint64_t*> numbers = {{"--pid", &identity.pid},
                                                      {"--rank", &identity.rank},
                                                      {"--local-rank", &identity.local_rank},
                                                      {"--node-rank", &identity.node_rank},
                                                      {"--world", &identity.world}};
    const std::map<std::string, std::string*> words = {{"--host", &identity.host}, {"--job", &identity.job}};
    if (argc % 2 == 0)
        return false;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (const auto word = words.find(argv[i]); word != words.end())
            *word->second = argv[i + 1];
        else if (const auto number = numbers.find(argv[i]);
                 number == numbers.end() || !parse_count(argv[i + 1], 0, *number->second))
            return false;
    }
    return identity.pid > 0 && identity.world > identity.rank && !identity.host.empty() &&
           identity.host.size() < sizeof(format::FileHeader::hostname) &&
           identity.job.size() < sizeof(format::FileHeader::job);
}

void rename_process(format::FileHeader& header, const Identity& identity) {
    header.pid = static_cast<int32_t>(identity.pid);
    header.rank = static_cast<int32_t>(identity.rank);
    header.local_rank = static_cast<int32_t>(identity.local_rank);
    header.node_rank = static_cast<int32_t>(identity.node_rank);
    header.world_size = static_cast<int32_t>(identity.world);
    std::snprintf(header.hostname, sizeof header.hostname, "%s", identity.host.c_str());
    std::snprintf(header.job, sizeof header.job, "%s", identity.job.c_str());
}

// Copies [start, end) of `from`, leaving its pages of zeros out.
bool copy_data(int from, int to, off_t start, off_t end, const Identity& identity) {
    constexpr off_t kChunk = 1 << 20;
    constexpr size_t kPage = 4096;
    std::vector<char> chunk(kChunk);
    for (off_t offset = start; offset < end; offset += kChunk) {
        const ssize_t got =
            pread(from, chunk.data(), static_cast<size_t>(std::min(kChunk, end - offset)), offset);
        if (got <= 0)
            return false;
        if (offset == 0 && static_cast<size_t>(got) >= sizeof(format::FileHeader)) {
            format::FileHeader header;
            std::memcpy(&header, chunk.data(), sizeof header);
            rename_process(header, identity);
            std::memcpy(chunk.data(), &header, sizeof header);
        }
        for (size_t page = 0; page < static_cast<size_t>(got); page += kPage) {
            const size_t bytes = std::min(kPage, static_cast<size_t>(got) - page);
            const char* data = chunk.data() + page;
            if (std::all_of(data, data + bytes, [](char byte) { return byte == 0; }))
                continue;
            if (pwrite(to, data, bytes, offset + static_cast<off_t>(page)) != static_cast<ssize_t>(bytes))
                return false;
        }
    }
    return true;
}

// The file's stretches of data (its holes read as zeros and are skipped), then its size.
bool copy_sparse(int from, int to, const Identity& identity) {
    const off_t size = lseek(from, 0, SEEK_END);
    if (size < 0)
        return false;
    for (off_t offset = lseek(from, 0, SEEK_DATA); offset >= 0 && offset < size;
         offset = lseek(from, offset, SEEK_DATA)) {
        const off_t hole = lseek(from, offset, SEEK_HOLE);
        if (hole < 0 || !copy_data(from, to, offset, hole, identity))
            return false;
        offset = hole;
    }
    return ftruncate(to, size) == 0;
}

} // namespace

int main(int argc, char** argv) {
    Identity identity;
    if (argc < 3 || !parse_identity(argc, argv, identity)) {
        std::fprintf(stderr,
                     "usage: bench_rank_trace SOURCE DEST --pid P --rank R --local-rank L --node-rank N "
                     "--world W --host H --job J\n");
        return 2;
    }
    const int from = open(argv[1], O_RDONLY | O_CLOEXEC);
    const int to = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (from < 0 || to < 0 || !copy_sparse(from, to, identity)) {
        std::perror("bench_rank_trace");
        return 1;
    }
    close(from);
    return close(to) == 0 ? 0 : 1;
}
