// cupti_inject.cpp: a CUPTI injection library that records every kernel launch
// of a CUDA program into one small text file, for the sweep's `cupti` profile
// backend (sweep/profile/cupti.py builds, runs and parses it).
//
// How it is loaded: the CUDA driver dlopens the library named by
// CUDA_INJECTION64_PATH when the program initialises CUDA and calls its
// InitializeInjection(). NVTX ranges reach CUPTI only when NVTX_INJECTION64_PATH
// names libcupti.so itself (cupti.environment() sets both), and only ranges
// opened after CUDA was initialised are seen.
//
// Environment:
//   SWEEP_CUPTI_OUT   the file to write (truncated first). "%p" in it becomes the
//                     process id, for programs that start several CUDA processes.
//                     Unset: the library records nothing and says so on stderr.
//   SWEEP_CUPTI_TURN  "<read fd>,<write fd>": turn mode (below), for the sweep's
//                     certification race (sweep/lockstep.py). Unset: no turns.
//   SWEEP_CUPTI_RANGE the NVTX range that is one timed iteration ("iteration").
//   SWEEP_GPU_TOKEN   the node-wide lock file of the process's GPU: overlap mode (below).
//                     With it and without SWEEP_CUPTI_OUT, the library only keeps the
//                     token (token-only mode: nothing recorded). A file that cannot be
//                     opened ends the program (exit 70): untokened GPU work would spoil
//                     every measurement that trusts the lock.
//   SWEEP_GPU_TOKEN_LINGER_US  how long a drained token is kept for more work before it is
//                     given back (default 2000; 0: at once). See cupti_token.h.
//   SWEEP_GPU_TOKEN_CONTEXT  gate (default): the CUDA context is created beside the other
//                     programs' GPU work, holding no token, one context at a time on the whole
//                     node (cupti_token.h's Gate, the file cuda-contexts.<host>.lock beside the
//                     token's); 1: creating it takes the token, as GPU work does; 0: beside the
//                     others' GPU work with no gate. The driver serialises context creation
//                     across the whole node, so under the token a program waits there holding
//                     its GPU idle (on four H200s a context took 0.2 s with one GPU measuring,
//                     0.48 s with four), and with no gate sixteen at once took 1.8 s each. On
//                     one H200 the gate cut quick_check's measuring phase from 22.8 s to 16.4 s
//                     and host_heavy's from 52-55 s to 47 s, picks unchanged (docs/benchmarks.md).
//   SWEEP_GPU_TOKEN_HOLD_AT_EXIT  1: at a clean exit, after the last window is written, take
//                     the token again and keep it until the process ends, so the CUDA
//                     runtime's teardown (the context's destruction, after this library's
//                     atexit) runs under it too. Off by default: an experiment on issue 34's
//                     mid-sized kernels measured 3-10% slower beside other programs.
//
// Overlap mode (cupti_token.h holds the policy). Several configurations' programs run on
// one GPU at once, each holding the GPU's lock (the token) only around its GPU work: at
// the entry of a driver call that queues work (cuLaunch*, cuGraphLaunch*, cuMemcpy*,
// cuMemset*, cuMemPrefetch*, cuStreamWriteValue*, cuStreamBatchMemOp*: every runtime
// call and every library (cuBLAS) reaches the GPU through these) or touches its memory or
// contexts (cuMemAlloc*, cuMemFree*, cuCtxCreate*, cuDevicePrimaryCtxRetain) it takes
// the token, waiting as long as it takes; at the exit of a synchronising call
// (cu*Synchronize, a synchronous copy or memset, cuMemFree*) it gives it back once no
// such call is in progress on another thread and cuCtxSynchronize confirms the queue
// drained (alloc and context calls give it back only when nothing was queued). A timed
// NVTX iteration (SWEEP_CUPTI_RANGE) holds it from its start to its end, so no other
// process's work comes between an iteration's kernels. At exit, after the drain, it gives
// it back whatever is pending. Each window it held the token becomes a `tok` record.
//
// Turn mode. Several programs run on one GPU and take turns, one timed
// iteration each, so each iteration has the GPU to itself and they pay their
// start-up once. At the start of each NVTX range named SWEEP_CUPTI_RANGE
// (nvtxRangePushA/Ex, nvtxRangeStartA/Ex and their domain versions, ASCII
// messages) the library synchronises the thread's CUDA context (the program's
// work so far is done), writes "ready <n>" to the write fd and blocks reading
// lines from the read fd: "go" runs iteration n; "flush" writes every record
// CUPTI holds to the capture and answers "flushed" (the kernels of the turns so
// far are then all there), and the wait goes on; "stop", or end of file (the
// coordinator is gone), flushes the records and ends the process (_exit(0)). At
// the end of the range it synchronises again, writes a `turn` record and then
// "done <n> <go_ns> <done_ns>". Every kernel of iteration n therefore ran on
// the GPU between the turn's go and done times, while every other program
// waited at the start of an iteration. A thread with no current context cannot
// be synchronised: "error <why>" goes to the write fd instead of "ready", and
// the library waits for "stop".
//
// What it records (CUPTI Activity API, nothing else):
//   - CONCURRENT_KERNEL: every kernel execution (CUpti_ActivityKernel10, the
//     record version of CUDA 13.0's cupti_activity.h): name, grid, block, static
//     and dynamic shared memory, registers per thread, local memory per thread,
//     GPU start and end, device, stream, correlation id.
//   - the launch API calls only (runtime and driver functions whose name holds
//     "Launch", enabled one by one; if CUPTI refuses that, the whole API is
//     traced and only launches are written), for their CPU start and thread: the
//     parser places a kernel in an NVTX "iteration" range by when and where it
//     was launched, as the nsys backend does, not by when the GPU ran it.
//   - MARKER: NVTX range starts and ends (push/pop and start/end).
//   - failed launches (CUPTI Callback API, at the exit of the runtime's launch
//     functions whose parameters hold the launch configuration: cudaLaunchKernel,
//     cudaLaunchCooperativeKernel, cudaLaunchKernelExC and their per-thread
//     stream variants): a launch refused for its size ("too many resources
//     requested for launch", "invalid configuration argument") never runs, so no
//     kern record shows it; the fail record keeps its size and error, and the
//     limits record the device's limits, for the sweep to say which was broken.
//
// File format "sweep-cupti/2": UTF-8 text, one record per line, fields separated
// by tabs; in names, tab, newline and backslash are written \t, \n and \\.
//   sweep-cupti/2  pid=<pid>  cupti_api=<CUPTI_API_VERSION>  start_ns=<CUPTI clock>  exe=<path>
//   clock  <cupti_ns> <realtime_ns>                  CUPTI's clock and CLOCK_REALTIME read at one moment:
//                                                    right after the header, and again at the final flush
//   api    <R|D> <cbid> <function name>             launch functions traced (R runtime, D driver)
//   name   <id> <mangled> <demangled>               once, before the first kern line using it
//   kern   <corr> <start_ns> <end_ns> <device> <context> <stream> <gx> <gy> <gz> <bx> <by> <bz>
//          <registers> <static_smem_B> <dynamic_smem_B> <local_B_per_thread> <name id>
//   call   <R|D> <cbid> <corr> <start_ns> <end_ns> <pid> <tid>
//   mark   <S|E|I> <id> <ns> <pid> <tid> <domain> <name>   S start (named), E end (name empty), I instant
//   drop   <records>                                 CUPTI dropped records (its buffers were full)
//   limits <device> threads=<n> block=<x>,<y>,<z> grid=<x>,<y>,<z> regs=<n> smem=<B> smem_optin=<B>
//                                                    once, before the first fail line: the device's per-block limits
//   fail   R <cbid> <corr> <cudaError_t> <gx> <gy> <gz> <bx> <by> <bz> <dynamic_smem_B> <mangled> <demangled>
//                                                    a launch the runtime refused, with the error it returned
//   copy   <M|S> <corr> <start_ns> <end_ns> <device> <context> <stream> <bytes>
//                                                    a memcpy (M) or memset (S) on the GPU timeline
//   tok    <acquired_ns> <released_ns> <requested_ns>
//                                                    overlap mode: a window the process held the GPU's token,
//                                                    and when the call that took it asked for it
//   ctx    <start_ns> <end_ns> <requested_ns>        a context created (cuCtxCreate*, cuDevicePrimaryCtxRetain):
//                                                    the call's entry and exit, less any wait for the token
//                                                    or the context gate; requested: when the call began, so
//                                                    requested..start is the wait for the node's gate
//   turn   <n> <go_ns> <done_ns>                    turn mode: iteration n ran from go (the turn given) to done
//                                                    (its work finished)
//   signal <number>                                  a fatal signal arrived; what was buffered was flushed
//   end    kernels=<n> calls=<n> marks=<n> dropped=<n> fails=<n>   the final flush at exit completed
// `kern` start = end = 0: CUPTI had no times for it (still queued when flushed).
// Lines are written as CUPTI hands back each completed buffer, so a program
// killed mid-way leaves every record flushed so far; a file with an `end` line
// is complete. Times are CUPTI timestamps (ns, one clock for CPU and GPU records),
// which need not be the wall clock: the `clock` pairs map them onto CLOCK_REALTIME,
// the clock the sweep stamps its GPU clock readings with, so it can tell which
// timed iterations ran while the GPU throttled. "sweep-cupti/1" is this format
// without `clock` records (its times cannot be placed on the wall clock).
//
// Flushing: at exit (atexit), after waiting up to 10 s for kernels still queued
// (a program need not synchronise before it returns); and on SIGTERM, SIGINT,
// SIGSEGV, SIGABRT, SIGBUS, SIGFPE and SIGILL, after waiting up to 1 s, before
// the signal takes its course (the program's own handler if it had one, else the
// default: the process ends as it would have). A handler that hangs (a crash
// inside the driver) is ended by alarm() after 5 s. SIGKILL, _exit() and
// quick_exit() leave only the buffers CUPTI had already handed back.

#include <cupti.h>
#include "cupti_token.h"
#include <generated_nvtx_meta.h>

#include <cxxabi.h>
#include <dlfcn.h>
#include <cerrno>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 256 * 1024;   // per CUPTI activity buffer
constexpr size_t kAlign = 8;                  // CUPTI wants 8-byte aligned buffers
constexpr unsigned kExitDrainMs = 10000;      // at exit, wait this long at most for queued kernels
constexpr unsigned kSignalDrainMs = 1000;     // on a fatal signal, this long
constexpr unsigned kFlushWatchdogS = 5;       // a signal handler that hangs ends the process after this

int g_fd = -1;
std::mutex g_mutex;                           // guards the name table and the counters
std::unordered_map<std::string, uint32_t> g_names;
uint64_t g_kernels = 0, g_calls = 0, g_marks = 0, g_dropped = 0, g_fails = 0;
bool g_limits_written = false;
std::atomic<bool> g_done{false};              // the final flush ran (atexit or a signal)
bool g_hold_at_exit = false;                  // SWEEP_GPU_TOKEN_HOLD_AT_EXIT=1 (see the header)
bool g_token_contexts = true;                 // SWEEP_GPU_TOKEN_CONTEXT: context creation under the token
sweep_token::Gate* g_gate = nullptr;          // SWEEP_GPU_TOKEN_CONTEXT=gate: the node's context gate
std::vector<bool> g_launch_runtime, g_launch_driver;  // by callback id: a launch function?
sweep_token::Token* g_token = nullptr;        // overlap mode's GPU token (SWEEP_GPU_TOKEN); null: none

const int kSignals[] = {SIGTERM, SIGINT, SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
struct sigaction g_previous[sizeof(kSignals) / sizeof(kSignals[0])];

// Reports a failed CUPTI call on stderr; true when it succeeded. The program
// runs on either way: a profiler must not be the reason it fails.
bool cupti_ok(CUptiResult r, const char* what) {
    if (r == CUPTI_SUCCESS) return true;
    const char* s = "?";
    cuptiGetResultString(r, &s);
    fprintf(stderr, "sweep-cupti: %s failed: %s\n", what, s);
    return false;
}

void write_all(const std::string& s) {
    const char* p = s.data();
    size_t left = s.size();
    while (left > 0 && g_fd >= 0) {
        ssize_t n = write(g_fd, p, left);
        if (n < 0) {
            if (errno == EINTR) continue;
            return;
        }
        p += n;
        left -= size_t(n);
    }
}

void escape(std::string& out, const char* s) {
    for (; s && *s; ++s) {
        switch (*s) {
            case '\t': out += "\\t"; break;
            case '\n': out += "\\n"; break;
            case '\\': out += "\\\\"; break;
            default: out += *s;
        }
    }
}

void field(std::string& out, const char* s) {
    out += '\t';
    escape(out, s);
}

void field(std::string& out, uint64_t v) {
    char b[24];
    snprintf(b, sizeof b, "\t%llu", (unsigned long long)v);
    out += b;
}

void field(std::string& out, int64_t v) {
    char b[24];
    snprintf(b, sizeof b, "\t%lld", (long long)v);
    out += b;
}

// The demangled name; extern "C" names are not mangled and come back as they are.
std::string demangle(const std::string& mangled) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
    std::string out = status == 0 && demangled ? demangled : mangled;
    free(demangled);
    return out;
}

// The id of a kernel name; the first time, a `name` line goes into `out` first.
uint32_t name_id(std::string& out, const char* mangled) {
    std::string key = mangled ? mangled : "?";
    auto it = g_names.find(key);
    if (it != g_names.end()) return it->second;
    uint32_t id = uint32_t(g_names.size());
    g_names.emplace(key, id);
    out += "name";
    field(out, uint64_t(id));
    field(out, key.c_str());
    field(out, demangle(key).c_str());
    out += '\n';
    return id;
}

void kernel_line(std::string& out, const CUpti_ActivityKernel10* k) {
    uint32_t id = name_id(out, k->name);
    out += "kern";
    field(out, uint64_t(k->correlationId));
    field(out, uint64_t(k->start));
    field(out, uint64_t(k->end));
    field(out, uint64_t(k->deviceId));
    field(out, uint64_t(k->contextId));
    field(out, uint64_t(k->streamId));
    for (int32_t v : {k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY, k->blockZ}) field(out, int64_t(v));
    field(out, uint64_t(k->registersPerThread));
    field(out, int64_t(k->staticSharedMemory));
    field(out, int64_t(k->dynamicSharedMemory));
    field(out, uint64_t(k->localMemoryPerThread));
    field(out, uint64_t(id));
    out += '\n';
    ++g_kernels;
}

// A memcpy (M) or memset (S): GPU time that is not a kernel's, for the token check and GPU-busy time.
void copy_line(std::string& out, char kind, uint32_t corr, uint64_t start, uint64_t end, uint32_t device,
               uint32_t context, uint32_t stream, uint64_t bytes) {
    out += "copy\t";
    out += kind;
    for (uint64_t v : {uint64_t(corr), start, end, uint64_t(device), uint64_t(context), uint64_t(stream), bytes})
        field(out, v);
    out += '\n';
}

void call_line(std::string& out, const CUpti_ActivityAPI* a) {
    const std::vector<bool>& launch = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? g_launch_runtime : g_launch_driver;
    if (a->cbid >= launch.size() || !launch[a->cbid]) return;
    out += a->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? "call\tR" : "call\tD";
    field(out, uint64_t(a->cbid));
    field(out, uint64_t(a->correlationId));
    field(out, uint64_t(a->start));
    field(out, uint64_t(a->end));
    field(out, uint64_t(a->processId));
    field(out, uint64_t(a->threadId));
    out += '\n';
    ++g_calls;
}

void mark_line(std::string& out, const CUpti_ActivityMarker2* m) {
    const char* kind = (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) ? "S"
                     : (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END)   ? "E"
                     : (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) ? "I" : nullptr;
    if (!kind) return;  // synchronization markers: not ranges
    bool thread = m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD || m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS;
    out += "mark\t";
    out += kind;
    field(out, uint64_t(m->id));
    field(out, uint64_t(m->timestamp));
    field(out, uint64_t(thread ? m->objectId.pt.processId : 0));
    field(out, uint64_t(thread ? m->objectId.pt.threadId : 0));
    field(out, m->domain);
    field(out, m->name);
    out += '\n';
    ++g_marks;
}

// A `clock` line: CUPTI's timestamp and CLOCK_REALTIME at one moment. The wall clock is read
// on both sides of CUPTI's and the pair takes the middle, so the pair is off by half the time
// between the two reads at most (well under a microsecond). Only async-signal-safe calls
// besides CUPTI's own: it runs in the signal handler's flush too.
void clock_line(std::string& out) {
    timespec before{}, after{};
    uint64_t cupti = 0;
    clock_gettime(CLOCK_REALTIME, &before);
    if (cuptiGetTimestamp(&cupti) != CUPTI_SUCCESS) return;
    clock_gettime(CLOCK_REALTIME, &after);
    auto ns = [](const timespec& t) -> uint64_t { return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec); };
    out += "clock";
    field(out, cupti);
    field(out, (ns(before) + ns(after)) / 2);
    out += '\n';
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(aligned_alloc(kAlign, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
    std::string out;
    out.reserve(valid / 2 + 256);
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        CUpti_Activity* record = nullptr;
        while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
            switch (record->kind) {
                case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
                case CUPTI_ACTIVITY_KIND_KERNEL:
                    kernel_line(out, reinterpret_cast<CUpti_ActivityKernel10*>(record));
                    break;
                case CUPTI_ACTIVITY_KIND_RUNTIME:
                case CUPTI_ACTIVITY_KIND_DRIVER:
                    call_line(out, reinterpret_cast<CUpti_ActivityAPI*>(record));
                    break;
                case CUPTI_ACTIVITY_KIND_MARKER:
                    mark_line(out, reinterpret_cast<CUpti_ActivityMarker2*>(record));
                    break;
                case CUPTI_ACTIVITY_KIND_MEMCPY: {
                    auto m = reinterpret_cast<CUpti_ActivityMemcpy6*>(record);
                    copy_line(out, 'M', m->correlationId, m->start, m->end, m->deviceId, m->contextId, m->streamId,
                              m->bytes);
                    break;
                }
                case CUPTI_ACTIVITY_KIND_MEMSET: {
                    auto m = reinterpret_cast<CUpti_ActivityMemset4*>(record);
                    copy_line(out, 'S', m->correlationId, m->start, m->end, m->deviceId, m->contextId, m->streamId,
                              m->bytes);
                    break;
                }
                default:
                    break;
            }
        }
        size_t dropped = 0;
        if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
            out += "drop";
            field(out, uint64_t(dropped));
            out += '\n';
            g_dropped += dropped;
        }
        write_all(out);  // under the lock, so name lines always precede their first use
    }
    free(buffer);
}

// The launch functions of one API domain: every one whose name holds "Launch"
// (cudaLaunchKernel, CUDA 13's __cudaLaunchKernel behind <<<>>>, cuLaunchKernelEx,
// graph launches, ...), found by name so new variants are not missed. They are
// enabled one by one; if CUPTI refuses that, the whole API is traced and the
// writer keeps the launch calls only.
void enable_launch_calls(std::string& out, CUpti_CallbackDomain domain, uint32_t size, const char* tag,
                         std::vector<bool>& launch) {
    launch.assign(size, false);
    bool refused = false;
    for (uint32_t cbid = 1; cbid < size; ++cbid) {
        const char* name = nullptr;
        if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name) continue;
        if (!strstr(name, "Launch") || strstr(name, "HostFunc")) continue;
        launch[cbid] = true;
        out += "api\t";
        out += tag;
        field(out, uint64_t(cbid));
        field(out, name);
        out += '\n';
        if (!refused) {
            CUptiResult r = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? cuptiActivityEnableRuntimeApi(cbid, 1)
                                                                  : cuptiActivityEnableDriverApi(cbid, 1);
            refused = r != CUPTI_SUCCESS;
        }
    }
    if (refused) {
        CUpti_ActivityKind kind = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? CUPTI_ACTIVITY_KIND_RUNTIME
                                                                        : CUPTI_ACTIVITY_KIND_DRIVER;
        cupti_ok(cuptiActivityEnable(kind), "tracing the whole API, as launch functions could not be chosen");
    }
}

// The token windows closed so far, as `tok` lines.
void write_windows() {
    if (!g_token) return;
    std::string out;
    for (const sweep_token::Window& w : g_token->take_windows()) {
        out += "tok";
        field(out, w.acquired);
        field(out, w.released);
        field(out, w.requested);
        out += '\n';
    }
    if (out.empty()) return;
    std::lock_guard<std::mutex> lock(g_mutex);
    write_all(out);
}

void flush_and_finish(int signal_number) {
    bool expected = false;
    if (!g_done.compare_exchange_strong(expected, true)) return;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (g_token && !signal_number) {
        // Clean exits only: a signal may have interrupted a thread holding the token's mutex
        // (the process's death lets the lock go, and a crashed run is not a measurement).
        g_token->release();
        write_windows();
        // Taken again, never given back: the process's end lets the lock go, after the runtime's
        // teardown. The window stays open, so no `tok` record: no GPU record of ours follows.
        if (g_hold_at_exit) g_token->enter(false);
    }
    std::string out;
    clock_line(out);  // a second pair, a run after the first: the parser follows drift between the clocks
    if (signal_number) {
        out += "signal";
        field(out, uint64_t(signal_number));
    } else {
        char b[160];
        snprintf(b, sizeof b, "end\tkernels=%llu\tcalls=%llu\tmarks=%llu\tdropped=%llu\tfails=%llu",
                 (unsigned long long)g_kernels, (unsigned long long)g_calls, (unsigned long long)g_marks,
                 (unsigned long long)g_dropped, (unsigned long long)g_fails);
        out += b;
    }
    out += '\n';
    write_all(out);
    fsync(g_fd);
}

// The launch configuration of a runtime launch call, for the functions whose
// parameters hold it; false for the others.
bool launch_config(CUpti_CallbackId cbid, const void* params, dim3& grid, dim3& block, size_t& smem) {
    switch (cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000: {
            auto p = static_cast<const cudaLaunchKernel_v7000_params*>(params);
            grid = p->gridDim, block = p->blockDim, smem = p->sharedMem;
            return true;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000: {
            auto p = static_cast<const cudaLaunchCooperativeKernel_v9000_params*>(params);
            grid = p->gridDim, block = p->blockDim, smem = p->sharedMem;
            return true;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: {
            auto p = static_cast<const cudaLaunchKernelExC_v11060_params*>(params);
            if (!p->config) return false;
            grid = p->config->gridDim, block = p->config->blockDim, smem = p->config->dynamicSmemBytes;
            return true;
        }
        default:
            return false;
    }
}

// The current device's per-block limits, as a `limits` line (driver API through
// dlsym, as in drain(); the launch that failed left a current context).
void limits_line(std::string& out) {
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!cuda) return;
    auto get_device = reinterpret_cast<decltype(&cuCtxGetDevice)>(dlsym(cuda, "cuCtxGetDevice"));
    auto attribute = reinterpret_cast<decltype(&cuDeviceGetAttribute)>(dlsym(cuda, "cuDeviceGetAttribute"));
    CUdevice dev = 0;
    if (get_device && attribute && get_device(&dev) == CUDA_SUCCESS) {
        auto a = [&](CUdevice_attribute which) {
            int v = -1;
            return attribute(&v, which, dev) == CUDA_SUCCESS ? v : -1;
        };
        char b[320];
        snprintf(b, sizeof b, "limits\t%d\tthreads=%d\tblock=%d,%d,%d\tgrid=%d,%d,%d\tregs=%d\tsmem=%d\tsmem_optin=%d\n",
                 int(dev), a(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK), a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X),
                 a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y), a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z),
                 a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                 a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z), a(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK),
                 a(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
                 a(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
        out += b;
    }
    dlclose(cuda);
}

// At the exit of a launch call: a refused launch becomes a `fail` line.
void on_launch(CUpti_CallbackId cbid, const void* data) {
    auto info = static_cast<const CUpti_CallbackData*>(data);
    if (info->callbackSite != CUPTI_API_EXIT || !info->functionReturnValue) return;
    cudaError_t rc = *static_cast<const cudaError_t*>(info->functionReturnValue);
    dim3 grid, block;
    size_t smem = 0;
    if (rc == cudaSuccess || !launch_config(cbid, info->functionParams, grid, block, smem)) return;
    std::string symbol = info->symbolName ? info->symbolName : "?";
    std::string out;
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_limits_written) {
        limits_line(out);
        g_limits_written = true;
    }
    out += "fail\tR";
    field(out, uint64_t(cbid));
    field(out, uint64_t(info->correlationId));
    field(out, int64_t(rc));
    for (unsigned v : {grid.x, grid.y, grid.z, block.x, block.y, block.z}) field(out, uint64_t(v));
    field(out, uint64_t(smem));
    field(out, symbol.c_str());
    field(out, demangle(symbol).c_str());
    out += '\n';
    ++g_fails;
    write_all(out);
}

// Gives kernels already queued up to `ms` to finish, so that their records
// carry times: records an event on the legacy default stream (which follows
// every blocking stream) and polls it. The driver is already loaded (it loaded
// us) and is reached through dlsym, so this library does not link it. A thread
// with no current context (a signal delivered to another thread) skips the wait.
void drain(unsigned ms) {
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!cuda) return;
    auto create = reinterpret_cast<decltype(&cuEventCreate)>(dlsym(cuda, "cuEventCreate"));
    auto record = reinterpret_cast<decltype(&cuEventRecord)>(dlsym(cuda, "cuEventRecord"));
    auto query = reinterpret_cast<decltype(&cuEventQuery)>(dlsym(cuda, "cuEventQuery"));
    auto destroy = reinterpret_cast<decltype(&cuEventDestroy)>(dlsym(cuda, "cuEventDestroy_v2"));
    CUevent event = nullptr;
    if (create && record && query && destroy && create(&event, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
        if (record(event, CU_STREAM_LEGACY) == CUDA_SUCCESS)
            for (unsigned i = 0; i < ms && query(event) == CUDA_ERROR_NOT_READY; ++i) usleep(1000);
        destroy(event);
    }
    dlclose(cuda);
}

// ---------------------------------------------------------------------------
// Turn mode (see the header): the program's timed iterations, one turn each
// ---------------------------------------------------------------------------

int g_turn_in = -1, g_turn_out = -1;          // the coordinator's pipe: read "go"/"stop", write "ready"/"done"
std::string g_turn_range = "iteration";       // the NVTX range that is one timed iteration
uint64_t g_turn = 0;                          // iterations given so far
uint64_t g_go_ns = 0;                         // CUPTI time the current turn was given
thread_local std::vector<bool> t_pushed;      // this thread's pushed ranges: is each a turn range?
std::mutex g_started_mutex;
std::unordered_set<uint64_t> g_started;       // start/end range ids that are turn ranges

void turn_write(const std::string& line) {
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
        ssize_t n = write(g_turn_out, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        p += n;
        left -= size_t(n);
    }
}

// One line from the coordinator, without its newline; "" at end of file or on an error.
std::string turn_read() {
    std::string line;
    char c;
    for (;;) {
        ssize_t n = read(g_turn_in, &c, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || c == '\n') return line;
        line += c;
    }
}

// The program's work so far finished: synchronises the calling thread's current context
// (driver API through dlsym, as drain()). False when the thread has none.
bool sync_context() {
    static void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);   // kept open: called every turn
    static auto get = cuda ? reinterpret_cast<decltype(&cuCtxGetCurrent)>(dlsym(cuda, "cuCtxGetCurrent")) : nullptr;
    static auto sync = cuda ? reinterpret_cast<decltype(&cuCtxSynchronize)>(dlsym(cuda, "cuCtxSynchronize")) : nullptr;
    CUcontext ctx = nullptr;
    return get && sync && get(&ctx) == CUDA_SUCCESS && ctx && sync() == CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Overlap mode (see the header): the GPU token around the process's GPU work
// ---------------------------------------------------------------------------

enum TokenUse : uint8_t {
    kQueues = 1,        // at entry: take the token; the call leaves work queued
    kTouches = 2,       // at entry: take the token; nothing queued (allocation, free, context creation)
    kSettle = 4,        // at exit: give it back once cuCtxSynchronize confirms the queue drained
    kSettleIfEmpty = 8, // at exit: give it back if nothing was queued since it was taken
    kContext = 16,      // creates a context: a `ctx` record (every mode: GPU-busy time counts it)
};
std::vector<uint8_t> g_token_use;             // by driver callback id
thread_local bool t_token_busy = false;       // inside our own callback: the driver calls we make are ours

bool starts(const char* name, const char* prefix) {
    return strncmp(name, prefix, strlen(prefix)) == 0;
}

// What a driver function means for the token, by its name (as the launch calls are found:
// new variants are not missed).
uint8_t token_use(const char* name) {
    bool async = strstr(name, "Async") != nullptr;
    bool host = strstr(name, "Host") != nullptr;   // cuMemAllocHost, cuMemFreeHost, cuMemHostAlloc: host memory
    uint8_t use = 0;
    if (starts(name, "cuLaunch") || starts(name, "cuGraphLaunch") || starts(name, "cuMemPrefetch") ||
        starts(name, "cuStreamWriteValue") || starts(name, "cuStreamBatchMemOp"))
        use |= kQueues;
    if (starts(name, "cuMemcpy") || starts(name, "cuMemset")) use |= kQueues | (async ? 0 : kSettle);
    if (strstr(name, "Synchronize")) use |= kSettle;
    if (starts(name, "cuMemFree") && !host) use |= kTouches | (async ? kQueues : kSettle);
    if (starts(name, "cuMemAlloc") && !host) use |= kTouches | (async ? kQueues : kSettleIfEmpty);
    if (starts(name, "cuCtxCreate") || starts(name, "cuDevicePrimaryCtxRetain"))
        use |= kTouches | kSettleIfEmpty | kContext;
    return use;
}

bool never_idle() {
    return false;
}

thread_local uint64_t t_context_ns = 0;       // when this thread's context call began (after any token wait)
thread_local uint64_t t_context_asked_ns = 0; // when it asked for the context gate (= t_context_ns without one)

void on_driver(CUpti_CallbackId cbid, const CUpti_CallbackData* info) {
    if (cbid >= g_token_use.size() || t_token_busy) return;
    uint8_t use = g_token_use[cbid];
    bool token = g_token && (use & ~kContext);
    if (!token && !(use & kContext)) return;
    t_token_busy = true;     // cuCtxSynchronize below comes back here: ignored
    if (info->callbackSite == CUPTI_API_ENTER) {
        if (token && (use & (kQueues | kTouches))) g_token->enter(use & kQueues);
        if (use & kContext) {
            cuptiGetTimestamp(&t_context_asked_ns);
            if (g_gate) g_gate->take();        // the node's other contexts first, holding no token
            cuptiGetTimestamp(&t_context_ns);
        }
    } else {
        if (use & kContext && g_fd >= 0) {
            std::string out = "ctx";
            uint64_t now = 0;
            cuptiGetTimestamp(&now);
            field(out, t_context_ns);
            field(out, now);
            field(out, t_context_asked_ns);
            out += '\n';
            std::lock_guard<std::mutex> lock(g_mutex);
            write_all(out);
        }
        if (use & kContext && g_gate) g_gate->give();
        if (!token) {
            t_token_busy = false;
            return;
        }
        if (use & (kQueues | kTouches)) g_token->exit();
        if (use & kSettle) g_token->settle(sync_context);
        else if (use & kSettleIfEmpty) g_token->settle(never_idle);
        if (g_fd >= 0) write_windows();   // given back here, or by the lingering release since
    }
    t_token_busy = false;
}

// Enables the driver callbacks: the token's (overlap mode) and the context creations'
// (always); false if CUPTI refused one the token needs (it would miss GPU work, so the
// caller ends the program).
bool enable_driver_callbacks(CUpti_SubscriberHandle subscriber) {
    g_token_use.assign(CUPTI_DRIVER_TRACE_CBID_SIZE, 0);
    bool ok = true;
    for (uint32_t cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
        const char* name = nullptr;
        if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name) != CUPTI_SUCCESS || !name) continue;
        uint8_t use = token_use(name);
        if (!g_token || (!g_token_contexts && (use & kContext))) use &= kContext;   // the ctx record only
        if (!use) continue;
        g_token_use[cbid] = use;
        ok = cupti_ok(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid),
                      "enabling a driver callback for the GPU token") && ok;
    }
    return ok;
}

// SWEEP_GPU_TOKEN: the lock file, opened as sweep/node/gpus.py opens it (read-only is enough
// for flock; made 0666 when missing). Null when unset; a file that cannot be opened ends the
// program, since its GPU work would then overlap others' measurements.
// A drained token's linger by default: long enough to keep a copy, its kernel and the next
// synchronisation together (microseconds apart), short against host work worth overlapping.
constexpr long kTokenLingerUs = 2000;

// A node-wide lock file, opened (created 0666 if missing) for flock; ends the program if it cannot.
int open_lock(const std::string& path, const char* what) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_CREAT | O_EXCL, 0666);
        if (fd >= 0) fchmod(fd, 0666);
        else if (errno == EEXIST) fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }
    if (fd < 0) {
        fprintf(stderr, "sweep-cupti: cannot open %s%s: %s; set SWEEP_LOCK_DIR to a folder every user can write, "
                        "or turn overlap off (profile: {overlap: false})\n",
                what, path.c_str(), strerror(errno));
        _exit(70);
    }
    return fd;
}

sweep_token::Token* open_token() {
    const char* path = getenv("SWEEP_GPU_TOKEN");
    if (!path || !*path) return nullptr;
    int fd = open_lock(path, "the GPU token SWEEP_GPU_TOKEN=");
    const char* hold = getenv("SWEEP_GPU_TOKEN_HOLD_AT_EXIT");
    g_hold_at_exit = hold && strcmp(hold, "1") == 0;
    // SWEEP_GPU_TOKEN_CONTEXT: gate (default) context creation beside the others' GPU work, one
    // context at a time on the node (cupti_token.h's Gate), through a lock file beside the GPUs'
    // own; 1 under the token; 0 beside the others' GPU work with no gate.
    const char* contexts = getenv("SWEEP_GPU_TOKEN_CONTEXT");
    std::string how = contexts && *contexts ? contexts : "gate";
    g_token_contexts = how != "0" && how != "gate";
    if (how == "gate") {
        std::string dir(path);
        dir = dir.find('/') == std::string::npos ? "." : dir.substr(0, dir.rfind('/'));
        // named after the host: a lock folder set on a shared file system (SWEEP_LOCK_DIR) must not
        // make one gate of every node's contexts
        char host[256] = "";
        if (gethostname(host, sizeof host - 1) != 0 || !*host) strcpy(host, "node");
        g_gate = new sweep_token::Gate(
            open_lock(dir + "/cuda-contexts." + host + ".lock", "the node's context gate "));
    }
    // SWEEP_GPU_TOKEN_LINGER_US: how long a drained token waits for more work (cupti_token.h).
    const char* linger = getenv("SWEEP_GPU_TOKEN_LINGER_US");
    long linger_us = linger && *linger ? strtol(linger, nullptr, 10) : kTokenLingerUs;
    return new sweep_token::Token(
        fd,
        [] {
            uint64_t t = 0;
            cuptiGetTimestamp(&t);
            return t;
        },
        std::chrono::microseconds(linger_us > 0 ? linger_us : 0));
}

[[noreturn]] void turn_exit() {
    drain(kSignalDrainMs);
    flush_and_finish(0);
    _exit(0);
}

// At the start of a turn range: wait for the turn (flushing when asked), or stop.
void turn_begin() {
    if (!sync_context()) {
        turn_write("error no current CUDA context on the thread that opened the " + g_turn_range +
                   " range: its work cannot be synchronised, so its turns cannot be kept apart\n");
        while (turn_read() != "stop") {
        }
        turn_exit();
    }
    turn_write("ready " + std::to_string(g_turn) + "\n");
    for (;;) {
        std::string order = turn_read();
        if (order == "go") break;
        if (order != "flush") turn_exit();   // "stop", or the coordinator is gone
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        turn_write("flushed\n");
    }
    cuptiGetTimestamp(&g_go_ns);
}

// At the end of a turn range: the iteration's work finished; its `turn` record, then "done".
void turn_end() {
    sync_context();
    uint64_t done_ns = 0;
    cuptiGetTimestamp(&done_ns);
    std::string out = "turn";
    field(out, g_turn);
    field(out, g_go_ns);
    field(out, done_ns);
    out += '\n';
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        write_all(out);
    }
    turn_write("done " + std::to_string(g_turn) + " " + std::to_string(g_go_ns) + " " + std::to_string(done_ns) + "\n");
    ++g_turn;
}

// A timed iteration begins: in turn mode, the turn; in overlap mode, the token is taken and
// kept until the iteration ends, so no other process's work (and its use of the caches)
// comes between the iteration's kernels, as none did when a run held the GPU whole.
void range_begin() {
    if (g_turn_in >= 0) turn_begin();
    if (g_token) {
        t_token_busy = true;
        g_token->enter(false);
        t_token_busy = false;
    }
}

// A timed iteration ends: the turn's end; the token may go once the iteration's work drained.
void range_end() {
    if (g_turn_in >= 0) turn_end();
    if (g_token) {
        t_token_busy = true;
        g_token->exit();
        g_token->settle(sync_context);
        t_token_busy = false;
        if (g_fd >= 0) write_windows();
    }
}

bool is_turn_range(const nvtxEventAttributes_t* a) {
    return a && a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii && g_turn_range == a->message.ascii;
}

bool is_turn_range(const char* message) {
    return message && g_turn_range == message;
}

// An NVTX call: a turn range opening or closing. A push and a start of a turn range
// begin a turn; the pop (this thread's innermost push) and the end (by range id) of
// one end it. Ranges nest: only the turn ranges themselves count.
void on_nvtx(CUpti_CallbackId cbid, const CUpti_NvtxData* d) {
    const void* p = d->functionParams;
    bool turn = false;
    switch (cbid) {
        case CUPTI_CBID_NVTX_nvtxRangePushA:
            turn = is_turn_range(static_cast<const nvtxRangePushA_params*>(p)->message);
            t_pushed.push_back(turn);
            if (turn) range_begin();
            return;
        case CUPTI_CBID_NVTX_nvtxRangePushEx:
            turn = is_turn_range(static_cast<const nvtxRangePushEx_params*>(p)->eventAttrib);
            t_pushed.push_back(turn);
            if (turn) range_begin();
            return;
        case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
            turn = is_turn_range(static_cast<const nvtxDomainRangePushEx_params*>(p)->core.eventAttrib);
            t_pushed.push_back(turn);
            if (turn) range_begin();
            return;
        case CUPTI_CBID_NVTX_nvtxRangePop:
        case CUPTI_CBID_NVTX_nvtxDomainRangePop:
            if (t_pushed.empty()) return;
            turn = t_pushed.back();
            t_pushed.pop_back();
            if (turn) range_end();
            return;
        case CUPTI_CBID_NVTX_nvtxRangeStartA:
            turn = is_turn_range(static_cast<const nvtxRangeStartA_params*>(p)->message);
            break;
        case CUPTI_CBID_NVTX_nvtxRangeStartEx:
            turn = is_turn_range(static_cast<const nvtxRangeStartEx_params*>(p)->eventAttrib);
            break;
        case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx:
            turn = is_turn_range(static_cast<const nvtxDomainRangeStartEx_params*>(p)->core.eventAttrib);
            break;
        case CUPTI_CBID_NVTX_nvtxRangeEnd:
        case CUPTI_CBID_NVTX_nvtxDomainRangeEnd: {
            nvtxRangeId_t id = cbid == CUPTI_CBID_NVTX_nvtxRangeEnd
                                   ? static_cast<const nvtxRangeEnd_params*>(p)->id
                                   : static_cast<const nvtxDomainRangeEnd_params*>(p)->core.id;
            bool ours = false;
            {
                std::lock_guard<std::mutex> lock(g_started_mutex);
                ours = g_started.erase(id) > 0;
            }
            if (ours) range_end();
            return;
        }
        default:
            return;
    }
    if (!turn) return;   // a start of another range
    if (d->functionReturnValue) {
        std::lock_guard<std::mutex> lock(g_started_mutex);
        g_started.insert(*static_cast<const nvtxRangeId_t*>(d->functionReturnValue));
    }
    range_begin();
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) on_launch(cbid, data);
    else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) on_driver(cbid, static_cast<const CUpti_CallbackData*>(data));
    else if (domain == CUPTI_CB_DOMAIN_NVTX) on_nvtx(cbid, static_cast<const CUpti_NvtxData*>(data));
}

// One subscriber (CUPTI takes one a process): the runtime launch functions with a launch
// configuration, for refused launches; in turn mode and in overlap mode, the NVTX range
// calls too; in overlap mode, the driver calls the token follows. A token that cannot be kept ends the program.
void subscribe(bool turns) {
    CUpti_SubscriberHandle subscriber;
    bool subscribed = cupti_ok(cuptiSubscribe(&subscriber, on_callback, nullptr), "subscribing to callbacks");
    if (!(subscribed && enable_driver_callbacks(subscriber)) && g_token) {
        fprintf(stderr, "sweep-cupti: the GPU token needs CUPTI's driver callbacks (another profiler or tool holds "
                        "CUPTI's one subscriber?); turn overlap off (profile: {overlap: false})\n");
        _exit(70);
    }
    if (!subscribed) return;
    for (CUpti_CallbackId cbid : {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060})
        cupti_ok(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid), "enabling a launch callback");
    if (turns || g_token)
        for (CUpti_CallbackId cbid : {CUPTI_CBID_NVTX_nvtxRangePushA, CUPTI_CBID_NVTX_nvtxRangePushEx,
                                      CUPTI_CBID_NVTX_nvtxDomainRangePushEx, CUPTI_CBID_NVTX_nvtxRangePop,
                                      CUPTI_CBID_NVTX_nvtxDomainRangePop, CUPTI_CBID_NVTX_nvtxRangeStartA,
                                      CUPTI_CBID_NVTX_nvtxRangeStartEx, CUPTI_CBID_NVTX_nvtxDomainRangeStartEx,
                                      CUPTI_CBID_NVTX_nvtxRangeEnd, CUPTI_CBID_NVTX_nvtxDomainRangeEnd})
            cupti_ok(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_NVTX, cbid), "enabling an NVTX callback");
}

// SWEEP_CUPTI_TURN="<read fd>,<write fd>": turn mode. False (no turns) when unset; a value
// that names no open pipe ends the program, since running it untimed would spoil the race.
bool turn_mode() {
    const char* spec = getenv("SWEEP_CUPTI_TURN");
    if (!spec || !*spec) return false;
    if (sscanf(spec, "%d,%d", &g_turn_in, &g_turn_out) != 2 || fcntl(g_turn_in, F_GETFD) < 0 ||
        fcntl(g_turn_out, F_GETFD) < 0) {
        fprintf(stderr, "sweep-cupti: SWEEP_CUPTI_TURN=%s names no open pipe (\"<read fd>,<write fd>\"); "
                        "only the sweep's race sets it\n", spec);
        _exit(70);
    }
    const char* range = getenv("SWEEP_CUPTI_RANGE");
    if (range && *range) g_turn_range = range;
    return true;
}

// At exit: a program need not synchronise before it returns.
void at_exit() {
    drain(kExitDrainMs);
    flush_and_finish(0);
}

size_t signal_index(int sig) {
    for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i)
        if (kSignals[i] == sig) return i;
    return 0;
}

// Flush what CUPTI holds, then let the signal do what it would have done.
void on_signal(int sig) {
    if (!g_done.load()) {
        alarm(kFlushWatchdogS);  // if the crash left the driver, CUPTI or our lock unusable, SIGALRM ends the wait
        drain(kSignalDrainMs);
        flush_and_finish(sig);
        alarm(0);
    }
    // The disposition the program had before us (its own handler, if it set one
    // before CUDA started), else the default one, which ends the process.
    struct sigaction previous = g_previous[signal_index(sig)];
    bool own = (previous.sa_flags & SA_SIGINFO) ||
               (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler != on_signal);
    if (own) {
        sigaction(sig, &previous, nullptr);
    } else {
        signal(sig, SIG_DFL);
    }
    raise(sig);
}

void install_signal_handlers() {
    for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = on_signal;
        sigemptyset(&action.sa_mask);
        action.sa_flags = SA_NODEFER | SA_RESETHAND;
        sigaction(kSignals[i], &action, &g_previous[i]);
    }
}

std::string output_path(const char* pattern) {
    std::string path;
    for (const char* p = pattern; *p; ++p) {
        if (p[0] == '%' && p[1] == 'p') {
            path += std::to_string(getpid());
            ++p;
        } else {
            path += *p;
        }
    }
    return path;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
    static std::atomic<bool> initialised{false};
    bool expected = false;
    if (!initialised.compare_exchange_strong(expected, true)) return 1;

    g_token = open_token();
    const char* pattern = getenv("SWEEP_CUPTI_OUT");
    if ((!pattern || !*pattern) && g_token) {    // token-only mode: a check run that records nothing
        subscribe(false);
        atexit(at_exit);
        return 1;
    }
    if (!pattern || !*pattern) {
        fprintf(stderr, "sweep-cupti: SWEEP_CUPTI_OUT is not set, so nothing is recorded; "
                        "set it to the capture file to write\n");
        return 1;
    }
    std::string path = output_path(pattern);
    g_fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (g_fd < 0) {
        fprintf(stderr, "sweep-cupti: cannot write %s: %s; nothing is recorded\n", path.c_str(), strerror(errno));
        return 1;
    }

    uint64_t now = 0;
    cuptiGetTimestamp(&now);
    char exe[4096] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    std::string out = "sweep-cupti/2";
    out += "\tpid=" + std::to_string(getpid());
    out += "\tcupti_api=" + std::to_string(CUPTI_API_VERSION);
    out += "\tstart_ns=" + std::to_string(now);
    out += "\texe=";
    escape(out, exe);
    out += '\n';
    clock_line(out);
    write_all(out);  // the header goes first, before any buffer can complete

    // Thread ids from gettid(), for launch calls and NVTX ranges alike.
    cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    if (!cupti_ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks"))
        return 1;
    cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enabling kernel records");
    cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER), "enabling NVTX marker records");
    cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enabling memcpy records");
    cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enabling memset records");
    out.clear();
    enable_launch_calls(out, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, "R", g_launch_runtime);
    enable_launch_calls(out, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, "D", g_launch_driver);
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        write_all(out);
    }
    subscribe(turn_mode());
    atexit(at_exit);
    install_signal_handlers();
    return 1;
}
