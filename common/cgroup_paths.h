// Where this process's memory cgroup is: the directories of cgroup v2's one hierarchy and of v1's memory
// controller, from the text of /proc/self/cgroup.
#pragma once

namespace gpuleak {

struct CgroupDirectories {
    char v2[512]; // empty when the text has no "0::" line or the path does not fit
    char v1[512]; // empty when no v1 hierarchy has the memory controller
};

// Lines are "hierarchy:controllers:path": v2's is "0::path"; v1's memory controller has a hierarchy of
// its own (perhaps shared with others: "3:cpu,memory:path"), mounted under `root` by its name.
void memory_cgroup_directories(const char* proc_self_cgroup, const char* root,
                               CgroupDirectories& directories);

} // namespace gpuleak
