/* What libgpuleak.so exports for gpuleak's own PyTorch adapter (torch_adapter/) beside the public C API
 * of gpuleak.h: not for programs, which have no use for it. */
#ifndef GPULEAK_ADAPTER_API_H
#define GPULEAK_ADAPTER_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A line of the adapter's, said as libgpuleak says its own ("gpuleak: " and the text): on stderr, or
 * into the log of a program that gpuleak attach records, whose stderr stays its own. */
void gpuleak_adapter_warning(const char* text);

/* 1 where gpuleak attach began the recording in the running program: the allocator holds segments and
 * blocks made before, which the adapter lists with the two functions below; 0 where the program was
 * recorded from its start. */
int gpuleak_attached_while_running(void);

/* gpuleak attach: a segment the allocator had reserved when the recording began (`expandable`: mapped
 * virtual memory of an expandable segment), and a block it had handed out then. */
void gpuleak_segment_before_attach(const void* ptr, size_t size, int device, int expandable);
void gpuleak_block_before_attach(const void* ptr, size_t size, int device);

#ifdef __cplusplus
}
#endif

#endif
