// libearly_alloc.so: device memory allocated by a library constructor, before main.
#pragma once

#include <cstddef>

void* early_allocation();
size_t early_allocation_size();
