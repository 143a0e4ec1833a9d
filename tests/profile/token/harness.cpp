// The GPU token's policy (sweep/profile/cupti_token.h) without a GPU, for
// tests/profile/test_cupti_token.py:
//   harness policy                       checks the release rules; prints "ok" or what broke
//   harness linger                       the same for a lingering token (given back by its watcher)
//   harness hold <lock> <rounds> <us>    takes the token <rounds> times around a fake <us> of
//                                        "GPU work" and prints each window (acquired, released,
//                                        requested), CLOCK_MONOTONIC ns
//   harness gate-policy <gate>           the context gate's re-entrance; prints "ok" or what broke
//   harness context <gate> <lock> <rounds> <us> <under-token>
//                                        <rounds> fake context creations of <us> through the gate,
//                                        each inside the token when <under-token> is 1 (a program
//                                        creating a context while it holds its GPU); prints each
//                                        gate window, CLOCK_MONOTONIC ns
#include "cupti_token.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

uint64_t now_ns() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
}

int fail(const char* what) {
    printf("FAIL %s\n", what);
    return 1;
}

// Another open file description of the same file: can it take the lock right now?
bool free_for_others(const char* path) {
    int fd = open(path, O_RDONLY);
    bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (free) flock(fd, LOCK_UN);
    close(fd);
    return free;
}

int policy(const char* path) {
    int fd = open(path, O_RDONLY | O_CREAT, 0666);
    sweep_token::Token token(fd, now_ns);
    int idle_calls = 0;
    auto idle = [&] { ++idle_calls; return true; };
    auto busy = [&] { ++idle_calls; return false; };
    if (token.settle(idle) || idle_calls) return fail("settle without the token released or asked the GPU");
    token.enter(false);                                   // an allocation: nothing queued
    if (!token.held() || free_for_others(path)) return fail("enter did not take the lock");
    token.exit();
    if (!token.settle(busy) || idle_calls) return fail("nothing queued: settle must release without asking");
    if (!free_for_others(path)) return fail("a released token still holds the lock");
    token.enter(true);                                    // a launch
    token.exit();
    if (token.settle(busy)) return fail("released while the GPU was busy");
    if (token.settle([] { return true; }) != true) return fail("did not release once the GPU was idle");
    token.enter(true);                                    // a launch in progress on another thread
    if (token.settle(idle)) return fail("released while a launch was in progress");
    token.exit();
    token.release();                                      // the exit path, whatever is pending
    if (token.held() || !free_for_others(path)) return fail("release at exit kept the lock");
    if (token.take_windows().size() != 3) return fail("expected three windows");
    if (!token.take_windows().empty()) return fail("windows handed out twice");
    printf("ok\n");
    return 0;
}

// A drained token lingers: kept while work follows within the linger, given back after it.
int linger(const char* path) {
    int fd = open(path, O_RDONLY | O_CREAT, 0666);
    sweep_token::Token token(fd, now_ns, std::chrono::microseconds(50000));
    auto idle = [] { return true; };
    token.enter(true);                                    // a copy, synchronised
    token.exit();
    if (token.settle(idle)) return fail("a lingering token was given back at once");
    if (!token.held() || free_for_others(path)) return fail("a drained token stopped lingering at once");
    token.enter(true);                                    // its kernel, microseconds later
    token.exit();
    token.settle(idle);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!token.held()) return fail("given back before the linger passed");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (token.held() || !free_for_others(path)) return fail("not given back after the linger");
    if (token.take_windows().size() != 1) return fail("the copy and its kernel must share one window");
    token.enter(true);                                    // work queued, not yet drained: kept past the linger
    token.exit();
    token.settle([] { return false; });
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    if (!token.held()) return fail("given back with work still queued");
    token.release();
    printf("ok\n");
    return 0;
}

int hold(const char* path, int rounds, int us) {
    int fd = open(path, O_RDONLY | O_CREAT, 0666);
    sweep_token::Token token(fd, now_ns);
    for (int i = 0; i < rounds; ++i) {
        token.enter(true);
        std::this_thread::sleep_for(std::chrono::microseconds(us));   // the "GPU work"
        token.exit();
        token.settle([] { return true; });
        std::this_thread::sleep_for(std::chrono::microseconds(us));   // host work: no token
    }
    for (const sweep_token::Window& w : token.take_windows())
        printf("%llu %llu %llu\n", (unsigned long long)w.acquired, (unsigned long long)w.released,
               (unsigned long long)w.requested);
    return 0;
}

int gate_policy(const char* path) {
    int fd = open(path, O_RDONLY | O_CREAT, 0666);
    sweep_token::Gate gate(fd);
    if (!free_for_others(path)) return fail("the gate is taken before anyone took it");
    gate.take();
    gate.take();                            // a context call inside another, on one thread
    if (free_for_others(path)) return fail("the gate is free while a context is being created");
    gate.give();
    if (free_for_others(path)) return fail("the inner call's end gave the gate back before the outer one's");
    gate.give();
    if (!free_for_others(path)) return fail("the gate stayed taken after the outer call ended");
    printf("ok\n");
    return 0;
}

int context(const char* gate_path, const char* lock, int rounds, int us, bool under_token) {
    sweep_token::Gate gate(open(gate_path, O_RDONLY | O_CREAT, 0666));
    sweep_token::Token token(open(lock, O_RDONLY | O_CREAT, 0666), now_ns);
    for (int i = 0; i < rounds; ++i) {
        if (under_token) token.enter(false);
        gate.take();
        uint64_t a = now_ns();
        std::this_thread::sleep_for(std::chrono::microseconds(us));   // the driver's context creation
        uint64_t b = now_ns();
        gate.give();
        if (under_token) {
            token.exit();
            token.settle([] { return true; });
        }
        printf("%llu %llu\n", (unsigned long long)a, (unsigned long long)b);
        std::this_thread::sleep_for(std::chrono::microseconds(us / 2));
    }
    token.release();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "policy") return policy(argv[2]);
    if (argc == 3 && std::string(argv[1]) == "linger") return linger(argv[2]);
    if (argc == 5 && std::string(argv[1]) == "hold") return hold(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (argc == 3 && std::string(argv[1]) == "gate-policy") return gate_policy(argv[2]);
    if (argc == 7 && std::string(argv[1]) == "context")
        return context(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), std::string(argv[6]) == "1");
    fprintf(stderr, "usage: harness policy <lock> | harness hold <lock> <rounds> <us>\n");
    return 2;
}
