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
//   - gives it back at the exit of a synchronising call (`settle`), and only when no
//     call that needs it is in progress on another thread and, if anything was
//     queued since it was taken, the caller's `idle` check (cuCtxSynchronize) says
//     the GPU finished it. Work still queued keeps the token until the next
//     synchronising call, or the process's exit (`release`);
//   - records each window it held the token (acquired, released), in the caller's
//     clock, for the capture: the parser checks that every kernel, copy and memset
//     of the process ran inside one.
// A process that dies holding it lets it go with its file descriptor (flock).

#pragma once

#include <sys/file.h>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace sweep_token {

struct Window {
    uint64_t acquired;
    uint64_t released;
};

class Token {
  public:
    // `fd`: the lock file, open; `now`: the clock the windows are in (CUPTI's, in the library).
    Token(int fd, std::function<uint64_t()> now) : fd_(fd), now_(std::move(now)) {}

    // At the entry of a call that needs the GPU; `enqueues`: it leaves work queued.
    void enter(bool enqueues) {
        std::lock_guard<std::mutex> lock(mutex_);
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
    // gives the token back when nothing needing it is in progress and `idle()` confirms the
    // queued work finished. `idle` runs under the token's mutex, so no other thread can queue
    // work between the check and the release. True when it gave the token back.
    bool settle(const std::function<bool()>& idle) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!held_ || in_progress_ > 0) return false;
        if (queued_ && !idle()) return false;
        give();
        return true;
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
    void take() {
        while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
        }
        held_ = true;
        acquired_ = now_();
    }

    void give() {
        closed_.push_back({acquired_, now_()});   // stamped before unlocking: the window covers the work
        flock(fd_, LOCK_UN);
        held_ = false;
        queued_ = false;
    }

    int fd_;
    std::function<uint64_t()> now_;
    std::mutex mutex_;
    bool held_ = false;
    bool queued_ = false;       // work was queued since the token was taken
    int in_progress_ = 0;       // calls between enter and exit, all threads
    uint64_t acquired_ = 0;
    std::vector<Window> closed_;
};

}  // namespace sweep_token
