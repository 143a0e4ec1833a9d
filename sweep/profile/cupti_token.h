// cupti_token.h: the GPU token of overlap mode, as a policy with no CUDA in it, so a
// test can compile it into a small program and check it without a GPU
// (tests/profile/test_cupti_token.py). cupti_inject.cpp drives it from CUPTI's
// driver-API callbacks.
//
// The token is an exclusive flock on the node-wide lock file of the process's GPU
// (sweep/node/gpus.py lock_path): the same file that an exclusive job (nsys, ncu,
// events, a sweep that turned overlap off, another user's sweep) holds for its
// whole run, so GPU work under the token never overlaps theirs, nor another
// token-taker's. The process
//   - takes it at the entry of every call that puts work on the GPU (launches,
//     copies, memsets: `enter(true)`) or touches its memory or contexts
//     (allocation, free, context creation: `enter(false)`), waiting as long as it
//     takes (host time: nothing is measured while it waits);
//   - gives it back after a synchronising call (`settle`), and only when no call
//     that needs it is in progress on another thread and, if anything was queued
//     since it was taken, the caller's `idle` check (cuCtxSynchronize) says the GPU
//     finished it. Work still queued keeps the token until the next synchronising
//     call, or the process's exit (`release`);
//   - lingers: a drained token is given back only once `linger` has passed with no
//     new call needing it (a thread of its own watches). Why: a program that copies
//     its input, synchronises and launches its kernel (or launches and synchronises
//     in a loop) would otherwise hand the GPU on between the copy and the kernel;
//     another process's work in between evicts the input from L2 and the kernel runs
//     cold, slower than alone (measured on an H100 with examples/host_heavy: +5% to
//     +29% on kernels of 10-40 us without it). A program back in host code for longer
//     than `linger` lets the GPU go; the cost is at most `linger` a release;
//   - records each window it held the token (acquired, released, and when it was asked
//     for), in the caller's clock, for the capture: the parser checks that every kernel,
//     copy and memset of the process ran inside one, and sums the waits (a run's wall
//     time less them is what it would take alone, for the race's estimate).
// A process that dies holding it lets it go with its file descriptor (flock).

#pragma once

#include <sys/file.h>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sweep_token {

// Waits for the exclusive flock on fd (the token's and the context gate's), through interrupts.
inline void lock_exclusive(int fd) {
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
}

struct Window {
    uint64_t acquired;
    uint64_t released;
    uint64_t requested;     // when the call that took it asked: acquired - requested is the wait
};

class Token {
  public:
    // `fd`: the lock file, open; `now`: the clock the windows are in (CUPTI's, in the library);
    // `linger`: how long a drained token is kept for more work (0: given back at once).
    Token(int fd, std::function<uint64_t()> now, std::chrono::microseconds linger = std::chrono::microseconds(0))
        : fd_(fd), now_(std::move(now)), linger_(linger) {}

    ~Token() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        if (watcher_.joinable()) watcher_.join();
    }

    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;

    // At the entry of a call that needs the GPU; `enqueues`: it leaves work queued.
    void enter(bool enqueues) {
        std::lock_guard<std::mutex> lock(mutex_);
        drained_ = false;
        if (!held_) take();
        ++in_progress_;
        queued_ = queued_ || enqueues;
    }

    // At the exit of a call `enter` saw.
    void exit() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (in_progress_ > 0) --in_progress_;
    }

    // At the exit of a synchronising call (and after `exit` for one that needed the token):
    // when nothing needing it is in progress and `idle()` confirms the queued work finished,
    // gives the token back (no linger), or has it given back once `linger` passes with no new
    // call. `idle` runs under the token's mutex, so no other thread can queue work between the
    // check and the release. True when it gave the token back here and now.
    bool settle(const std::function<bool()>& idle) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!held_ || in_progress_ > 0) return false;
        if (queued_ && !idle()) return false;
        if (linger_.count() <= 0) {
            give();
            return true;
        }
        queued_ = false;            // drained, confirmed: nothing queued until the next enter(true)
        drained_ = true;
        drained_at_ = std::chrono::steady_clock::now();
        if (!watcher_.joinable()) watcher_ = std::thread([this] { watch(); });
        wake_.notify_all();
        return false;
    }

    // At exit (after the program's work drained): gives the token back whatever is pending.
    void release() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (held_) give();
    }

    bool held() {
        std::lock_guard<std::mutex> lock(mutex_);
        return held_;
    }

    // The windows closed since the last call (the library writes them as `tok` records).
    std::vector<Window> take_windows() {
        std::lock_guard<std::mutex> lock(mutex_);
        std::vector<Window> out;
        out.swap(closed_);
        return out;
    }

  private:
    // The lingering release: a drained token with no call since is given back `linger_` after
    // it drained.
    void watch() {
        std::unique_lock<std::mutex> lock(mutex_);
        while (!stop_) {
            if (held_ && drained_ && in_progress_ == 0) {
                auto due = drained_at_ + linger_;
                if (std::chrono::steady_clock::now() >= due) {
                    give();
                    continue;
                }
                wake_.wait_until(lock, due);
            } else {
                wake_.wait(lock);
            }
        }
    }

    void take() {
        requested_ = now_();
        lock_exclusive(fd_);
        held_ = true;
        acquired_ = now_();
    }

    void give() {
        closed_.push_back({acquired_, now_(), requested_});   // stamped before unlocking: the window covers the work
        flock(fd_, LOCK_UN);
        held_ = false;
        queued_ = false;
        drained_ = false;
    }

    int fd_;
    std::function<uint64_t()> now_;
    std::chrono::microseconds linger_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::thread watcher_;
    bool stop_ = false;
    bool drained_ = false;      // held, drained and nothing called since: lingering
    std::chrono::steady_clock::time_point drained_at_;
    bool held_ = false;
    bool queued_ = false;       // work was queued since the token was taken
    int in_progress_ = 0;       // calls between enter and exit, all threads
    uint64_t acquired_ = 0;
    uint64_t requested_ = 0;
    std::vector<Window> closed_;
};

// The node's context gate (SWEEP_GPU_TOKEN_CONTEXT=gate in cupti_inject.cpp): an exclusive flock
// on one file for the whole node, held around each CUDA context creation instead of the GPU's
// token. Why: the driver creates contexts one at a time across the whole node, whatever the GPU,
// so a program creating its context under its GPU's token holds that GPU idle while it waits
// for other GPUs' programs' contexts (on four H200s a context took a median 0.48 s so, against
// 0.20 s with one GPU measuring); created with no lock at all, sixteen at once took 1.8 s each.
// Under the gate a program waits for the node's other contexts holding nothing, then creates its
// own alone, beside the other programs' GPU work.
// No deadlock with the tokens: a gate holder is inside the driver's context call and takes
// nothing else before giving the gate back; a token holder may wait for the gate.
// Re-entrant on one thread (a context call inside another gives the gate back at the outer end).
class Gate {
  public:
    explicit Gate(int fd) : fd_(fd) {}

    Gate(const Gate&) = delete;
    Gate& operator=(const Gate&) = delete;

    void take() {
        mutex_.lock();                     // the process's other threads wait here, not on the flock
        if (depth_++ == 0) lock_exclusive(fd_);
    }

    void give() {
        if (depth_ > 0 && --depth_ == 0) flock(fd_, LOCK_UN);
        mutex_.unlock();
    }

  private:
    int fd_;
    std::recursive_mutex mutex_;
    int depth_ = 0;
};

}  // namespace sweep_token
