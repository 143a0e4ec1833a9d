// run_options.cuh: the options every example's timed run takes, parsed in one place,
// so the examples answer the sweep's commands alike.
//
//   --iters N      timed iterations (at least 1)
//   --warmup W     untimed iterations first (outside any NVTX range)
//   --nvtx         each timed iteration in an NVTX range named "iteration" (what the
//                  sweep's nsys and cupti backends attribute launches to); a program
//                  that opens no ranges leaves it out (take_run_option's nvtx)
//   --check-only   exit after the correctness check (0: right, 1: wrong)
//   --json FILE    write the event timing of every launch as engine-timing/1 JSON
//                  (engine_timing.cuh; what the sweep's events backend reads)
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

struct RunOptions {
    int iters = 10;
    int warmup = 2;
    bool nvtx = false;
    bool check_only = false;
    std::string json;
};

// Takes argv[i] (and its value, advancing i past it) when it is one of RunOptions'
// flags; false when it is not (the program's own flags come next). nvtx: whether
// --nvtx is one (false for a program that opens no NVTX ranges).
inline bool take_run_option(int argc, char** argv, int& i, RunOptions& o, bool nvtx = true) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    if (a == "--iters" && has_value) o.iters = atoi(argv[++i]);
    else if (a == "--warmup" && has_value) o.warmup = atoi(argv[++i]);
    else if (a == "--nvtx" && nvtx) o.nvtx = true;
    else if (a == "--check-only") o.check_only = true;
    else if (a == "--json" && has_value) o.json = argv[++i];
    else return false;
    return true;
}

// "256,512,1024" as integers (a value that is no number reads 0, for the caller's range check).
inline std::vector<int> int_list(const char* text) {
    std::vector<int> out;
    std::string s = text;
    for (size_t start = 0; start <= s.size();) {
        size_t end = s.find(',', start);
        if (end == std::string::npos) end = s.size();
        out.push_back(atoi(s.substr(start, end - start).c_str()));
        start = end + 1;
    }
    return out;
}

// The whole command line of a program that takes RunOptions and "--size A,B[,C...]" (its
// problem's extents, as many as `extents` points to, each 1..largest) and nothing else; `names` is
// how its usage spells them ("W,H"). False, after one line on stderr that starts with `program`,
// on an unknown argument or a value out of range.
inline bool parse_sized_run(int argc, char** argv, const char* program, const char* names, int largest,
                            RunOptions& o, std::initializer_list<int*> extents) {
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (take_run_option(argc, argv, i, o)) continue;
        if (arg == "--size" && i + 1 < argc) {
            std::vector<int> given = int_list(argv[++i]);
            size_t e = 0;
            for (int* extent : extents) *extent = given.size() == extents.size() ? given[e++] : 0;
        } else {
            fprintf(stderr, "%s: unknown or incomplete argument '%s'\n", program, arg.c_str());
            return false;
        }
    }
    bool in_range = o.iters >= 1 && o.warmup >= 0;
    for (int* extent : extents) in_range = in_range && *extent >= 1 && *extent <= largest;
    if (!in_range) {
        fprintf(stderr, "%s: need --size %s with each 1..%d, --iters >= 1, --warmup >= 0\n", program, names, largest);
        return false;
    }
    return true;
}
