// args.h: the programs' small command-line parser. Unknown options, missing
// values and malformed numbers are reported with the usage line, never ignored.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

class Args {
public:
    Args(const char* usage, std::set<std::string> valued, std::set<std::string> flags)
        : usage_(usage), valued_(std::move(valued)), flags_(std::move(flags)) {}

    bool parse(int argc, char** argv) {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            if (a == "-h" || a == "--help") { printf("%s\n", usage_); exit(0); }
            if (flags_.count(a)) { set_.insert(a); continue; }
            if (!valued_.count(a)) return fail("unknown option " + a);
            if (i + 1 >= argc) return fail(a + " needs a value");
            values_[a] = argv[++i];
        }
        return true;
    }
    bool has(const std::string& k) const { return values_.count(k) || set_.count(k); }
    std::string str(const std::string& k, const std::string& dflt = "") const {
        auto it = values_.find(k);
        return it == values_.end() ? dflt : it->second;
    }
    // Integer option within [lo, hi]; ok turns false (with a message) when not.
    int integer(const std::string& k, int dflt, int lo, int hi, bool& ok) const {
        auto it = values_.find(k);
        if (it == values_.end()) return dflt;
        char* end = nullptr;
        const long v = strtol(it->second.c_str(), &end, 10);
        if (*end != '\0' || it->second.empty() || v < lo || v > hi) {
            fprintf(stderr, "%s %s: expected an integer from %d to %d\n", k.c_str(), it->second.c_str(), lo, hi);
            ok = false;
            return dflt;
        }
        return (int)v;
    }
    double real(const std::string& k, double dflt, bool& ok) const {
        auto it = values_.find(k);
        if (it == values_.end()) return dflt;
        char* end = nullptr;
        const double v = strtod(it->second.c_str(), &end);
        if (*end != '\0' || it->second.empty() || !(v > 0)) {
            fprintf(stderr, "%s %s: expected a positive number\n", k.c_str(), it->second.c_str());
            ok = false;
        }
        return v;
    }
    bool require(const std::string& k) const {
        if (values_.count(k)) return true;
        fprintf(stderr, "missing %s\n%s\n", k.c_str(), usage_);
        return false;
    }

private:
    bool fail(const std::string& msg) const {
        fprintf(stderr, "%s\n%s\n", msg.c_str(), usage_);
        return false;
    }
    const char* usage_;
    std::set<std::string> valued_, flags_, set_;
    std::map<std::string, std::string> values_;
};

// Splits "a,b,c" into its parts.
inline std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        const size_t comma = s.find(',', start);
        const size_t end = comma == std::string::npos ? s.size() : comma;
        if (end > start) out.push_back(s.substr(start, end - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}
