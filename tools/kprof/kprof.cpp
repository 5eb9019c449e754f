// kprof: a kernel-time profile of any CUDA program, for the GPU machine
// where Nsight Systems cannot make reports (KINDS.md). A CUPTI injection
// library: the CUDA driver loads it when CUDA_INJECTION64_PATH names it and
// calls InitializeInjection(); it records every kernel, memcpy and memset
// (graph launches included) and, at exit, writes a table to $KPROF_OUT (or
// stderr):
//   - the span from the first record's start to the last one's end, the time
//     the GPU ran something (union of intervals) and the idle rest;
//   - the idle gaps of at least 5 us, by the kernels before and after them;
//   - per kernel name, split by launch kind (graph / eager): count, total ms,
//     mean us, share of all kernel time;
//   - the same per name and grid, for the largest entries (cuBLAS runs one
//     kernel name for several shapes).
// Build: tools/kprof/build.sh. Use: CUDA_INJECTION64_PATH=$PWD/libkprof.so
// KPROF_OUT=prof.txt ./hayate bench ...  A lab tool: not part of the engine.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Record {
  unsigned long long start, end;
  std::string name;  // demangled, cut at the argument list
  bool graph;
  unsigned gx, gy, gz;
};

// The one state of an injection library: the driver calls plain C entry
// points, so it cannot be passed around.
struct State {
  std::mutex mu;
  std::vector<Record> records;
  std::map<std::string, std::string> demangled;  // mangled -> short
};
State& state() {
  static State* s = new State;  // never destroyed: exit handlers still use it
  return *s;
}

std::string short_name(const char* mangled) {
  if (!mangled) return "?";
  State& s = state();
  auto it = s.demangled.find(mangled);
  if (it != s.demangled.end()) return it->second;
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string n = (status == 0 && d) ? d : mangled;
  std::free(d);
  // "void ns::kernel<half, 4>(args...)" -> "ns::kernel<half, 4>"
  if (n.rfind("void ", 0) == 0) n = n.substr(5);
  for (size_t at; (at = n.find("(anonymous namespace)::")) != std::string::npos;)
    n.erase(at, 23);
  int depth = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i] == '<') ++depth;
    if (n[i] == '>') --depth;
    if (n[i] == '(' && depth == 0) {
      n.resize(i);
      break;
    }
  }
  if (n.size() > 110) n = n.substr(0, 110);
  s.demangled.emplace(mangled, n);
  return n;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = 8 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = kBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
      s.records.push_back({k->start, k->end, short_name(k->name), k->graphId != 0,
                           unsigned(k->gridX), unsigned(k->gridY), unsigned(k->gridZ)});
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
      s.records.push_back({m->start, m->end, "[memcpy]", m->graphId != 0, 0, 0, 0});
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
      s.records.push_back({m->start, m->end, "[memset]", m->graphId != 0, 0, 0, 0});
    }
  }
  std::free(buffer);
}

struct Sum {
  long count = 0;
  double ns = 0;
};

void report() {
  cuptiActivityFlushAll(1);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const char* path = std::getenv("KPROF_OUT");
  FILE* f = path ? std::fopen(path, "w") : stderr;
  if (!f) f = stderr;
  std::vector<Record>& r = s.records;
  std::sort(r.begin(), r.end(), [](const Record& a, const Record& b) { return a.start < b.start; });
  if (const char* w = std::getenv("KPROF_LAST_MS")) {  // only the run's timed end
    unsigned long long end = 0;
    for (const Record& x : r) end = std::max(end, x.end);
    const unsigned long long from = end - (unsigned long long)(std::atof(w) * 1e6);
    r.erase(r.begin(), std::find_if(r.begin(), r.end(),
                                    [&](const Record& x) { return x.start >= from; }));
    std::fprintf(f, "kprof: the last %s ms only (KPROF_LAST_MS)\n", w);
  }
  if (r.empty()) {
    std::fprintf(f, "kprof: no GPU activity recorded\n");
    if (f != stderr) std::fclose(f);
    return;
  }
  double busy = 0, total = 0;
  unsigned long long cur_s = r[0].start, cur_e = r[0].end, last = 0;
  for (const Record& x : r) {
    total += double(x.end - x.start);
    last = std::max(last, x.end);
    if (x.start > cur_e) {
      busy += double(cur_e - cur_s);
      cur_s = x.start;
      cur_e = x.end;
    } else {
      cur_e = std::max(cur_e, x.end);
    }
  }
  busy += double(cur_e - cur_s);
  const double span = double(last - r[0].start);
  std::fprintf(f, "kprof: %zu records; span %.1f ms, GPU busy %.1f ms, idle %.1f ms (%.1f %%)\n",
               r.size(), span / 1e6, busy / 1e6, (span - busy) / 1e6,
               100.0 * (span - busy) / span);
  // Where the device idles: gaps of at least 5 us between one record's end
  // and the next one's start, by the pair of kernels around them.
  {
    std::map<std::pair<std::string, std::string>, Sum> gaps;
    unsigned long long end = r[0].end;
    const Record* before = &r[0];
    for (size_t i = 1; i < r.size(); ++i) {
      if (r[i].start > end + 5000) {
        Sum& g = gaps[{before->name, r[i].name}];
        ++g.count;
        g.ns += double(r[i].start - end);
      }
      if (r[i].end > end) {
        end = r[i].end;
        before = &r[i];
      }
    }
    std::vector<std::pair<std::pair<std::string, std::string>, Sum>> v(gaps.begin(), gaps.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
    std::fprintf(f, "idle gaps >= 5 us, by the kernels before and after (largest 15)\n%10s %10s  %s\n",
                 "count", "total ms", "before -> after");
    for (size_t i = 0; i < v.size() && i < 15; ++i)
      std::fprintf(f, "%10ld %10.2f  %s -> %s\n", v[i].second.count, v[i].second.ns / 1e6,
                   v[i].first.first.c_str(), v[i].first.second.c_str());
    std::fprintf(f, "\n");
  }
  std::map<std::pair<std::string, bool>, Sum> by_name;
  std::map<std::string, Sum> by_grid;
  double graph_ns = 0;
  for (const Record& x : r) {
    Sum& a = by_name[{x.name, x.graph}];
    ++a.count;
    a.ns += double(x.end - x.start);
    char g[64];
    std::snprintf(g, sizeof g, " <<<%u,%u,%u>>>%s", x.gx, x.gy, x.gz, x.graph ? " graph" : "");
    Sum& b = by_grid[x.name + g];
    ++b.count;
    b.ns += double(x.end - x.start);
    if (x.graph) graph_ns += double(x.end - x.start);
  }
  std::fprintf(f, "kernel time %.1f ms: in graphs %.1f ms, eager %.1f ms\n\n", total / 1e6,
               graph_ns / 1e6, (total - graph_ns) / 1e6);
  const auto table = [&](const char* title, auto rows) {
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
    std::fprintf(f, "%s\n%10s %10s %10s %6s  %s\n", title, "count", "total ms", "mean us", "%",
                 "name");
    for (size_t i = 0; i < rows.size() && i < 60; ++i)
      std::fprintf(f, "%10ld %10.2f %10.2f %6.2f  %s\n", rows[i].second.count,
                   rows[i].second.ns / 1e6, rows[i].second.ns / 1e3 / double(rows[i].second.count),
                   100.0 * rows[i].second.ns / total, rows[i].first.c_str());
    std::fprintf(f, "\n");
  };
  std::vector<std::pair<std::string, Sum>> names;
  for (const auto& [k, v] : by_name) names.push_back({k.first + (k.second ? "  [graph]" : ""), v});
  table("per kernel name ([graph]: launched from a CUDA graph)", names);
  table("per kernel name and grid", std::vector<std::pair<std::string, Sum>>(by_grid.begin(),
                                                                             by_grid.end()));
  if (f != stderr) std::fclose(f);
}

}  // namespace

extern "C" int InitializeInjection(void) {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 0;
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  std::atexit(report);
  return 1;
}
