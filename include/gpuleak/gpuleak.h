/* gpuleak public C API: markers and sub-allocator blocks, recorded into the process's trace.
 *
 * These functions are defined by libgpuleak.so. A program that must also run without gpuleak loaded
 * should not link against it; it calls the gpuleak_try_* helpers at the end of this header instead,
 * which look the functions up at run time (dlsym on RTLD_DEFAULT, cached) and do nothing when the
 * library is absent. All functions are thread-safe and never fail the caller.
 *
 * From a signal handler: once the process records (gpuleak_active() returned 1, or an allocation was
 * recorded), gpuleak_mark, gpuleak_block_alloc, gpuleak_block_free, gpuleak_block_alloc_failed and
 * gpuleak_name_source take no heap memory and never wait on a lock held by the thread they interrupted:
 * an event made while that thread was inside gpuleak is dropped, and counted (the report says so; a
 * dropped block or failure leaves it without a verdict, a dropped marker does not). Before that, the first
 * call may start the recording (it creates the trace file and a thread), which is not async-signal-safe. The
 * gpuleak_try_* helpers look the function up with dlsym on their first call: call each once outside the
 * handler first.
 */
#ifndef GPULEAK_GPULEAK_H
#define GPULEAK_GPULEAK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Records a marker ("epoch 3") at this moment; the report groups growth by the intervals between
 * markers. The label is copied (at most 1023 bytes). */
void gpuleak_mark(const char* label);

/* For allocators that sub-allocate from memory they reserved with cudaMalloc & co. (caching
 * allocators, pools): a block of `size` bytes at `ptr` handed out to the program on `device`.
 * The report counts such blocks as "allocated" and the segments under them as "reserved". */
void gpuleak_block_alloc(const void* ptr, size_t size, int device);

/* The block at `ptr` went back to the sub-allocator's cache. */
void gpuleak_block_free(const void* ptr);

/* The sub-allocator refused a request for a block of `size` bytes on `device`: an out-of-memory error
 * that the program sees although no CUDA call may have failed (a cap of the allocator's own, such as
 * torch.cuda.set_per_process_memory_fraction). Recorded with the calling thread's stack like a failed
 * cudaMalloc, and kept however long the run. `free_bytes` is the device's free memory as the allocator
 * saw it then, GPULEAK_FREE_BYTES_UNKNOWN when it did not ask. When this thread's last CUDA
 * allocations on `device` failed (the allocator gave up after its cudaMalloc failed), the report shows
 * them and this refusal as one out-of-memory error. */
#define GPULEAK_FREE_BYTES_UNKNOWN ((size_t)-1)
void gpuleak_block_alloc_failed(size_t size, int device, size_t free_bytes);

/* Says that Python code compiled under the file name `file` is the source `text`, to be called `name`
 * in the report: a notebook's cell, `name` "cell [12]", compiled under a file name that exists nowhere
 * on disk. The report then shows frames of that file as "cell [12], line 4" with the line's text. Call
 * it before the code runs: it is recorded at once, so a process killed while the code runs still has
 * it. A later call for the same file replaces the earlier one. `file` is copied up to 4095 bytes,
 * `name` up to 1023, `text` up to 65535 (lines past that read as unknown). */
void gpuleak_name_source(const char* file, const char* name, const char* text);

/* The sub-allocator is about to raise an out-of-memory error on `device` to the program (after
 * gpuleak_block_alloc_failed), with none of its locks held. In a Python program, gpuleak then runs
 * gpuleak.why() under the GIL and records what keeps the device memory alive (gpuleak_retainers), unless
 * GPULEAK_WHY leaves out-of-memory errors out. The thread must be one that may take the GIL: it holds no
 * lock that a thread holding the GIL waits for. Not from a signal handler. */
void gpuleak_out_of_memory(int device);

/* The moments GPULEAK_WHY asks for, besides each call of gpuleak.why(): GPULEAK_WHY_* bits. */
#define GPULEAK_WHY_OUT_OF_MEMORY 1
#define GPULEAK_WHY_PHASE_END 2
#define GPULEAK_WHY_EXIT 4
int gpuleak_why_moments(void);

/* Whether PyTorch's saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks: torch.utils.checkpoint,
 * save_on_cpu) were ever set in this process, which gpuleak sees by standing in for the libtorch_cpu.so
 * functions that set them: 0 never, 1 they were (reading a tensor autograd saved runs the program's hook),
 * -1 unknown (this PyTorch lacks those functions, or is not loaded). gpuleak.why() reads saved tensors at
 * an out-of-memory error or a phase's end only at 0. */
int gpuleak_saved_tensor_hooks(void);

/* A notebook's cell, called `cell` ("cell [12]", as gpuleak_name_source named it), ended with an
 * exception that IPython has shown: in a Python program that gpuleak records (unless GPULEAK_PYTHON=0),
 * the exception the interpreter holds as the last one shown (sys.last_exc, before 3.12 sys.last_value) is
 * recorded for the report: its type, its message and its traceback's frames, attributed to the cell. Call
 * it under the GIL, after the cell ran (IPython's post_run_cell), only for a cell that raised: the gpuleak
 * IPython extension does. `cell` is copied up to 1023 bytes. */
void gpuleak_cell_error(const char* cell);

/* Records what keeps the device memory alive at this moment, as gpuleak.why() found it: `label` says when
 * ("out of memory on device 0", "end of epoch 3"), `document` is the JSON that gpuleak.why() writes
 * (docs/guides/why.md). The report shows it at the failure it was taken at and beside the sites it
 * names. `label` is copied up to 1023 bytes, `document` up to 16383 (a longer one is cut, and then not
 * read). */
void gpuleak_retainers(const char* label, const char* document);

/* 1 when gpuleak is recording in this process, 0 when it cannot (no trace file). */
int gpuleak_active(void);

/* Copies the path of this process's trace file (NUL-terminated, truncated to `capacity`) into `buf`
 * and returns its full length; 0 when there is no trace file yet. */
size_t gpuleak_trace_path(char* buf, size_t capacity);

#ifdef __cplusplus
}
#endif

/* ---- Optional use: works whether or not libgpuleak.so is loaded --------------------------------
 * Link with -ldl on glibc older than 2.34. */
#include <dlfcn.h>

#ifdef RTLD_DEFAULT
#define GPULEAK_DEFAULT_HANDLE_ RTLD_DEFAULT
#else
#define GPULEAK_DEFAULT_HANDLE_ ((void*)0) /* glibc's RTLD_DEFAULT, defined only with _GNU_SOURCE */
#endif

typedef void (*gpuleak_mark_fn)(const char*);
typedef void (*gpuleak_block_alloc_fn)(const void*, size_t, int);
typedef void (*gpuleak_block_free_fn)(const void*);
typedef void (*gpuleak_block_alloc_failed_fn)(size_t, int, size_t);
typedef int (*gpuleak_active_fn)(void);
typedef void (*gpuleak_name_source_fn)(const char*, const char*, const char*);

/* Looks `name` up once per call site; concurrent first calls may both look it up, harmlessly. */
#define GPULEAK_RESOLVE_(type, name)                                                                         \
    static type resolved_;                                                                                   \
    static int looked_up_;                                                                                   \
    if (!__atomic_load_n(&looked_up_, __ATOMIC_ACQUIRE)) {                                                   \
        __atomic_store_n(&resolved_, (type)dlsym(GPULEAK_DEFAULT_HANDLE_, name), __ATOMIC_RELAXED);          \
        __atomic_store_n(&looked_up_, 1, __ATOMIC_RELEASE);                                                  \
    }                                                                                                        \
    type fn_ = __atomic_load_n(&resolved_, __ATOMIC_RELAXED)

static inline void gpuleak_try_mark(const char* label) {
    GPULEAK_RESOLVE_(gpuleak_mark_fn, "gpuleak_mark");
    if (fn_)
        fn_(label);
}

static inline void gpuleak_try_block_alloc(const void* ptr, size_t size, int device) {
    GPULEAK_RESOLVE_(gpuleak_block_alloc_fn, "gpuleak_block_alloc");
    if (fn_)
        fn_(ptr, size, device);
}

static inline void gpuleak_try_block_free(const void* ptr) {
    GPULEAK_RESOLVE_(gpuleak_block_free_fn, "gpuleak_block_free");
    if (fn_)
        fn_(ptr);
}

static inline void gpuleak_try_block_alloc_failed(size_t size, int device, size_t free_bytes) {
    GPULEAK_RESOLVE_(gpuleak_block_alloc_failed_fn, "gpuleak_block_alloc_failed");
    if (fn_)
        fn_(size, device, free_bytes);
}

static inline void gpuleak_try_name_source(const char* file, const char* name, const char* text) {
    GPULEAK_RESOLVE_(gpuleak_name_source_fn, "gpuleak_name_source");
    if (fn_)
        fn_(file, name, text);
}

static inline int gpuleak_try_active(void) {
    GPULEAK_RESOLVE_(gpuleak_active_fn, "gpuleak_active");
    return fn_ ? fn_() : 0;
}

#undef GPULEAK_RESOLVE_

#endif
